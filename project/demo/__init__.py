"""The demo app: tasks and views that show EchoMQ at work (filled in by later issues)."""
