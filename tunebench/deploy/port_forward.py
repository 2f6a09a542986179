"""`oc port-forward` to a release's pod: tunebench's own processes, one group each, that a
configuration reaches vLLM (and its /metrics) through when the cluster gives no Route.

Each forward listens on a free loopback port; it is ready when that port accepts a
connection, and a forward that exits while load runs is the reason vLLM became unreachable.
"""

from __future__ import annotations

import socket
import time
from pathlib import Path

from tunebench.deploy.kube import KubeCli, first_line
from tunebench.deploy.local import free_port
from tunebench.errors import DeploymentError
from tunebench.processes import ManagedProcess

VLLM_PORT = 8080  # the chart's ServingRuntime runs vLLM with --port=8080
LISTEN_TIMEOUT_S = 30.0


class PortForwards:
    """The port-forwards of one configuration at a time; `close()` stops them all."""

    def __init__(self, kube: KubeCli, logs: Path):
        self.kube = kube
        self.logs = logs
        self._forwards: list[ManagedProcess] = []
        self._pod: str | None = None
        self.last_pgid: int | None = None  # the first forward's group, kept after close()

    @property
    def pgid(self) -> int | None:
        """The first forward's group: the processes tunebench started for this release."""
        return self._forwards[0].pgid if self._forwards else None

    def open(self, pod: str | None, config_id: str) -> str:
        """A forward to `pod`'s vLLM port; its base URL once it listens."""
        self._pod = pod
        port = free_port()
        argv = self.kube.executable_argv(
            "port-forward", f"pod/{pod}", f"{port}:{VLLM_PORT}", "--address", "127.0.0.1"
        )
        log_path = self.logs / f"port-forward-{config_id}.log"  # one per configuration
        forward = ManagedProcess(argv, log_path=log_path)
        self._forwards.append(forward)
        if len(self._forwards) == 1:
            self.last_pgid = forward.pgid
        deadline = time.monotonic() + LISTEN_TIMEOUT_S
        while time.monotonic() < deadline:
            if forward.poll() is not None:
                raise DeploymentError(
                    f"oc port-forward to pod/{pod} exited: {first_line(_read(forward.log_path))}"
                )
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                return f"http://127.0.0.1:{port}"
            except OSError:
                time.sleep(0.2)
        raise DeploymentError(
            f"oc port-forward to pod/{pod} did not listen within {LISTEN_TIMEOUT_S:.0f} s"
        )

    def failure(self) -> str | None:
        """Why vLLM became unreachable during the load (a forward ended), or None."""
        for forward in self._forwards:
            code = forward.poll()
            if code is not None:
                return (
                    f"oc port-forward to pod/{self._pod} exited (code {code}) while load was "
                    f"running: {first_line(_read(forward.log_path))}"
                )
        return None

    def close(self) -> None:
        for forward in self._forwards:
            forward.stop()
        self._forwards.clear()


def _read(path: Path | None) -> str:
    return path.read_text(errors="replace") if path and path.exists() else ""
