"""The Deployment seam: something that gives tunebench a vLLM server for one configuration.

Contract for every implementation (tests/contract/test_deployment_contract.py runs it):
- `start(config)` returns a ready `ServerHandle` (GET /health answered 200) or raises
  `DeploymentError` whose message carries the server's own error line when there is one;
  it never leaves a process behind when it raises.
- `stop()` is idempotent, safe after a failed `start`, and reaps everything `start` began.
- `log_text()` returns what the server logged so far ("" when the server is not ours);
  `log_path` is where that log is kept in the run (None when there is none).
- `pgid` is the process group of the server running now, `last_pgid` the group of the
  latest one, kept after it stopped (a failed start's group is recorded with the failure);
  both None for kinds that start no local process.
- `failure()`: why a started server became unreachable (it exited, its port-forward
  ended), else None; the runner polls it during the load and aborts at once.
Secrets (API keys) live only in `ServerHandle.headers`, which is never written anywhere.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Protocol

from tunebench.spec.plan import ServerConfig

StatusCallback = Callable[[str], None]


def tls_verify(verify: bool, ca_bundle: str | None) -> bool | ssl.SSLContext:
    """What httpx's `verify=` takes: a context trusting `ca_bundle`, else the flag."""
    if ca_bundle:
        return ssl.create_default_context(cafile=ca_bundle)
    return verify


@dataclass(frozen=True)
class ServerHandle:
    base_url: str  # e.g. http://127.0.0.1:8123 (no trailing /v1)
    metrics_url: str
    served_model: str  # the model name requests must use
    headers: dict[str, str] = field(default_factory=dict, repr=False)
    verify_tls: bool = True
    ca_bundle: str | None = None  # a CA file to trust instead of the system's (OpenShift routes)
    started_s: float | None = None  # seconds from launch to healthy; None if not started by us
    effective: dict[str, Any] | None = None  # known effective configuration (recorded); None: ask

    @property
    def tls(self) -> bool | ssl.SSLContext:
        """httpx's `verify=`: a context trusting `ca_bundle`, else `verify_tls`."""
        return tls_verify(self.verify_tls, self.ca_bundle)

    @property
    def api_key(self) -> str | None:
        auth = self.headers.get("Authorization", "")
        return auth.removeprefix("Bearer ") or None


class Deployment(Protocol):
    kind: str

    def start(self, config: ServerConfig) -> ServerHandle: ...

    def stop(self) -> None: ...

    def log_text(self) -> str: ...

    def failure(self) -> str | None: ...

    @property
    def log_path(self) -> Path | None: ...

    @property
    def pgid(self) -> int | None: ...

    @property
    def last_pgid(self) -> int | None: ...
