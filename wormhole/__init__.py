"""wormhole: read once, write to many destinations, each succeeding or rolling back on its own."""

__version__ = "0.1.0"

__all__ = ["__version__"]
