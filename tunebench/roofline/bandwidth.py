"""Memory bandwidth of the device that serves: a table of GPUs, or measured on the CPU.

GPU figures are the vendors' datasheet peaks for the memory (HBM/GDDR) of one device;
nvidia-smi's name picks the row. A datasheet peak is above what kernels reach (typically
80-90% of it), so a roofline built on it is an upper bound. The CPU is measured on the
server's own cores (bandwidth_probe.py) with a buffer the size a decode step reads.
"""

from __future__ import annotations

import json
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from tunebench.processes import ManagedProcess

# (pattern of the nvidia-smi / rocm-smi name, GB/s per device, the row's name). First match
# wins, so the more specific names come first.
GPU_BANDWIDTH_GBS: tuple[tuple[str, float, str], ...] = (
    (r"B200", 8000.0, "NVIDIA B200 (HBM3e)"),
    (r"GH200", 4000.0, "NVIDIA GH200 96GB (HBM3)"),
    (r"H200", 4800.0, "NVIDIA H200 141GB (HBM3e)"),
    (r"H100.*NVL", 3900.0, "NVIDIA H100 NVL 94GB (HBM3)"),
    (r"H100.*PCIe", 2000.0, "NVIDIA H100 PCIe 80GB (HBM2e)"),
    (r"H100", 3350.0, "NVIDIA H100 SXM 80GB (HBM3)"),
    (r"H20\b", 4000.0, "NVIDIA H20 96GB (HBM3)"),
    (r"A100.*(80GB|SXM4-80)", 2039.0, "NVIDIA A100 80GB SXM (HBM2e)"),
    (r"A100 80GB PCIe", 1935.0, "NVIDIA A100 80GB PCIe (HBM2e)"),
    (r"A100", 1555.0, "NVIDIA A100 40GB (HBM2)"),
    (r"A800", 2039.0, "NVIDIA A800 80GB (HBM2e)"),
    (r"L40S", 864.0, "NVIDIA L40S 48GB (GDDR6)"),
    (r"L40", 864.0, "NVIDIA L40 48GB (GDDR6)"),
    (r"\bL4\b", 300.0, "NVIDIA L4 24GB (GDDR6)"),
    (r"A10G", 600.0, "NVIDIA A10G 24GB (GDDR6)"),
    (r"\bA10\b", 600.0, "NVIDIA A10 24GB (GDDR6)"),
    (r"\bA30\b", 933.0, "NVIDIA A30 24GB (HBM2)"),
    (r"RTX 6000 Ada", 960.0, "NVIDIA RTX 6000 Ada 48GB (GDDR6)"),
    (r"RTX A6000", 768.0, "NVIDIA RTX A6000 48GB (GDDR6)"),
    (r"RTX 5090", 1792.0, "NVIDIA GeForce RTX 5090 32GB (GDDR7)"),
    (r"RTX 4090", 1008.0, "NVIDIA GeForce RTX 4090 24GB (GDDR6X)"),
    (r"RTX 3090", 936.0, "NVIDIA GeForce RTX 3090 24GB (GDDR6X)"),
    (r"V100", 900.0, "NVIDIA V100 (HBM2)"),
    (r"\bT4\b", 320.0, "NVIDIA T4 16GB (GDDR6)"),
    (r"MI325X", 6000.0, "AMD Instinct MI325X (HBM3e)"),
    (r"MI300X", 5300.0, "AMD Instinct MI300X (HBM3)"),
    (r"MI250X?", 3277.0, "AMD Instinct MI250X (HBM2e)"),
)


@dataclass(frozen=True)
class Bandwidth:
    gbs: float  # of one device (GPU) or of the server's CPU cores together
    source: str  # "table: <row>", "measured: ...", "spec"


def gpu_bandwidth(name: str) -> Bandwidth | None:
    for pattern, gbs, row in GPU_BANDWIDTH_GBS:
        if re.search(pattern, name, re.IGNORECASE):
            return Bandwidth(gbs, f"table: {row}")
    return None


def measure_cpu(
    size_bytes: int, cpus: set[int] | None, log_dir: Path, timeout_s: float = 120.0
) -> Bandwidth | str:
    """Read bandwidth of `cpus` (default: every CPU this process may use) at `size_bytes`."""
    cpus = cpus or set(os.sched_getaffinity(0))
    size = max(size_bytes, 1 << 20)
    log_dir.mkdir(parents=True, exist_ok=True)
    process = ManagedProcess(
        [sys.executable, "-m", "tunebench.roofline.bandwidth_probe", str(size), str(len(cpus))],
        log_path=log_dir / "bandwidth-probe.log",
        capture_stdout=True,
        cpus=cpus,
    )
    try:
        out, _ = process.popen.communicate(timeout=timeout_s)
        if process.popen.returncode != 0:
            return f"the bandwidth probe failed (exit {process.popen.returncode}; {log_dir})"
        result = json.loads(out.strip().splitlines()[-1])
    except (OSError, ValueError, IndexError) as exc:
        return f"the bandwidth probe failed: {exc}"
    except Exception as exc:  # subprocess.TimeoutExpired
        return f"the bandwidth probe did not finish: {exc}"
    finally:
        process.stop()
    cpu_list = ",".join(str(c) for c in sorted(cpus))
    return Bandwidth(
        float(result["gbs"]),
        f"measured: {size / 1e6:.1f} MB read by {len(cpus)} thread(s) on CPUs {cpu_list}",
    )
