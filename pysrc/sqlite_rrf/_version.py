"""The one place the version is defined (read by setup.py for the C build too)."""

__version__ = "0.1.0"
