"""The EchoMQ example project (scripts/run starts it)."""
