"""tunebench: benchmark and tune vLLM deployments.

Notebook API (see tunebench.analysis.api): load_run, load_requests, compare.
"""

from tunebench.version import __version__

__all__ = ["__version__", "load_run", "load_requests", "compare", "load_manifest"]


def __getattr__(name: str):
    # Lazy, so that `import tunebench` stays cheap for the CLI and the load worker.
    if name in ("load_run", "load_requests", "compare", "load_manifest"):
        from tunebench.analysis import api

        return getattr(api, name)
    raise AttributeError(name)
