"""Measure memory read bandwidth on this process's CPUs: `python -m
tunebench.roofline.bandwidth_probe BYTES THREADS` prints {"gbs": ..., ...} as JSON.

It sums a float32 buffer of BYTES with THREADS threads (torch, as vLLM-CPU's kernels use
OpenMP threads on the server's cores) and reports the best of several timed rounds: the
highest rate the cores reached, so the roofline built on it stays an upper bound. The buffer
is the size a decode step reads, so a model that fits in the CPU's caches is measured at
cache bandwidth, not DRAM's.
"""

from __future__ import annotations

import json
import sys
import time

ROUNDS = 7
ROUND_SECONDS = 0.15


def measure(size_bytes: int, threads: int) -> dict[str, float]:
    import torch

    torch.set_num_threads(max(1, threads))
    buffer = torch.ones(max(1, size_bytes // 4), dtype=torch.float32)
    real = buffer.numel() * 4
    buffer.sum()  # first touch and warm caches
    best = 0.0
    calls_per_round = 1
    for _ in range(ROUNDS):
        while True:
            began = time.perf_counter()
            for _ in range(calls_per_round):
                buffer.sum()
            took = time.perf_counter() - began
            if took >= ROUND_SECONDS or calls_per_round >= 1 << 20:
                break
            calls_per_round *= 2
        best = max(best, real * calls_per_round / took)
    return {"gbs": best / 1e9, "bytes": float(real), "threads": float(threads)}


def main(argv: list[str]) -> int:
    size, threads = int(argv[0]), int(argv[1])
    print(json.dumps(measure(size, threads)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
