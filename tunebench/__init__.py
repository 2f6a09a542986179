"""tunebench: benchmark and tune vLLM deployments.

Notebook API (see tunebench.analysis.api): load_run, load_requests, compare.
"""

__version__ = "0.1.0"


def __getattr__(name: str):
    # Lazy, so that `import tunebench` stays cheap for the CLI and the load worker.
    if name in ("load_run", "load_requests", "compare", "load_manifest"):
        from tunebench.analysis import api

        return getattr(api, name)
    raise AttributeError(name)
