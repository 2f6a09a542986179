"""tunebench's version (its own module, so low layers can name it without the package's API)."""

__version__ = "0.1.0"
