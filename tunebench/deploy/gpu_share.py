"""Sharing a box's GPUs among configurations measured at once (kind local, parallel > 1).

Each configuration needs tensor x pipeline x data parallel size GPUs. A configuration gets a
set of free GPUs for its whole life (server start to teardown) and its server sees only
those (CUDA_VISIBLE_DEVICES). GPUs are handed out lowest index first; which GPUs share an
NVLink or a PCIe switch is not considered (docs/sweep-files.md#parallel-configurations).
"""

from __future__ import annotations

import threading

from tunebench.spec.plan import ServerConfig, gpus_per_server


def gpus_needed(config: ServerConfig) -> int:
    """How many GPUs one server of `config` uses."""
    return gpus_per_server(config.args)


class GpuPool:
    """The GPUs not in use by a running configuration. Thread-safe."""

    def __init__(self, gpus: list[str]):
        self.gpus = list(gpus)
        self._free = list(gpus)
        self._lock = threading.Lock()

    def take(self, count: int) -> tuple[str, ...] | None:
        """`count` free GPUs (taken), or None when fewer are free now."""
        with self._lock:
            if count > len(self._free):
                return None
            taken = tuple(self._free[:count])
            del self._free[:count]
            return taken

    def give_back(self, gpus: tuple[str, ...]) -> None:
        with self._lock:
            self._free.extend(g for g in gpus if g not in self._free)
            self._free.sort(key=self.gpus.index)

    @property
    def free(self) -> int:
        with self._lock:
            return len(self._free)
