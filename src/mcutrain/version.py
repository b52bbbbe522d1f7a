"""The package version, in a module of its own so the CLI can print it without importing the API."""

__version__ = "0.1.0"
