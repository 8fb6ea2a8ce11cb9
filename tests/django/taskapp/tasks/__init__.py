"""A ``tasks`` package: its modules are found by path, not by autodiscovery."""
