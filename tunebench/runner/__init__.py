"""Sequencing one server configuration: deploy, verify, every load point, teardown."""

from tunebench.runner.config_runner import ConfigOutcome, ConfigRunner
from tunebench.runner.measuring import PointExtras, PointRules

__all__ = ["ConfigOutcome", "ConfigRunner", "PointExtras", "PointRules"]
