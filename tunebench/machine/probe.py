"""A fixed piece of work timed on the server's cores: the machine's speed, apart from vLLM.

A point's latencies measure the server and the machine together. The probe measures the
machine alone, with work shaped like a small model's decode step: a batch of one vector
times a few weight matrices (compute that fits the caches) and a pass over a buffer larger
than the last-level cache (memory bandwidth). It takes tens of milliseconds, so it can run
before and after every point and inside long ones without taking the server's core for
long. Its wall time is what it measures: a core that is throttled, stolen by the
hypervisor, shared with a noisy neighbour or clocked down makes it slower, as it makes the
server slower.

The probe runs on a thread pinned to the server's CPUs (Linux pins threads one by one), with
one BLAS thread, so it measures one core's speed wherever the server runs.
"""

from __future__ import annotations

import os
import statistics
import time
from contextlib import contextmanager
from typing import Iterator

#: Shapes of the work: a decode step's matrix-vector products, and a memory pass.
WIDTH = 512
LAYERS = 8
STEPS = 24
BUFFER_MB = 32
PASSES = 2


class Probe:
    """The probe's buffers, made once (allocating them is no part of what is timed)."""

    def __init__(self, cpus: set[int] | None = None):
        import numpy as np  # numpy is tunebench's own dependency; imported only when used

        self.cpus = cpus
        rng = np.random.default_rng(0)
        self._weights = [
            rng.standard_normal((WIDTH, WIDTH), dtype=np.float32) for _ in range(LAYERS)
        ]
        self._vector = rng.standard_normal((1, WIDTH), dtype=np.float32)
        self._buffer = np.ones(BUFFER_MB * 2**20 // 4, dtype=np.float32)
        self._out = np.empty_like(self._buffer)

    def measure(self) -> float:
        """Milliseconds the work took this time (wall clock, on the calling thread)."""
        import numpy as np

        with _pinned(self.cpus), _one_blas_thread():
            begin = time.perf_counter()
            for _ in range(STEPS):
                x = self._vector
                for weight in self._weights:
                    x = np.tanh(x @ weight * 0.05)
            for _ in range(PASSES):
                np.multiply(self._buffer, 1.0001, out=self._out)
            return (time.perf_counter() - begin) * 1000

    def measure_median(self, times: int = 3) -> float:
        return statistics.median(self.measure() for _ in range(times))


@contextmanager
def _pinned(cpus: set[int] | None) -> Iterator[None]:
    """Run the block on `cpus` (this thread only), then as before."""
    if not cpus or not hasattr(os, "sched_setaffinity"):
        yield
        return
    before = os.sched_getaffinity(0)
    try:
        os.sched_setaffinity(0, cpus)
    except OSError:  # CPUs not ours (a container's cpuset): measure where we are
        yield
        return
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


@contextmanager
def _one_blas_thread() -> Iterator[None]:
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # without it, the shapes are too small for BLAS to use threads
        yield
        return
    with threadpool_limits(limits=1, user_api="blas"):
        yield
