"""tunebench: benchmark and tune vLLM deployments."""
__version__ = "0.1.0"
