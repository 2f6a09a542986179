"""Wait until a server's GPUs are free before starting it.

A stopped vLLM server's GPU memory is released when its processes have exited and the driver
has cleaned up; a server still holding the GPU (the previous configuration's, slow to exit,
or one a killed tunebench left behind) makes the next start fail with vLLM's "Free memory on
device ... is less than desired GPU memory utilization". So before a local start on a GPU,
NVML is asked which processes hold the server's GPUs, until none does or the wait ends; then
the start fails with the PIDs, so the user knows what to stop.
"""

from __future__ import annotations

import time
from typing import Any, Callable

from tunebench.errors import DeploymentError

WAIT_S = 60.0  # a vLLM server's GPU memory is usually free within seconds of its exit


def _load_nvml() -> Any:
    try:
        import pynvml
    except ImportError:
        return None
    return pynvml


def gpu_holders(nvml: Any, devices: list[str] | None) -> dict[str, list[int]]:
    """GPU (index or UUID) -> the PIDs of the compute processes on it (empty: free)."""
    count = nvml.nvmlDeviceGetCount()
    names = devices if devices is not None else [str(i) for i in range(count)]
    held: dict[str, list[int]] = {}
    for name in names:
        handle = (
            nvml.nvmlDeviceGetHandleByIndex(int(name))
            if name.isdigit()
            else nvml.nvmlDeviceGetHandleByUUID(name)
        )
        held[name] = [p.pid for p in nvml.nvmlDeviceGetComputeRunningProcesses(handle)]
    return held


def wait_for_free_gpus(
    cuda_visible_devices: str | None,
    wait_s: float = WAIT_S,
    nvml: Any = None,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
    on_status: Callable[[str], None] = lambda message: None,
) -> None:
    """Return once no process holds the server's GPUs (CUDA_VISIBLE_DEVICES, else all);
    raise DeploymentError naming the PIDs after `wait_s`. Without NVML: return (nothing to
    ask; vLLM's own error then says it)."""
    nvml = nvml if nvml is not None else _load_nvml()
    if nvml is None:
        return
    try:
        nvml.nvmlInit()
    except nvml.NVMLError:
        return
    try:
        named = [d.strip() for d in (cuda_visible_devices or "").split(",") if d.strip()]
        devices = named or None
        deadline = clock() + wait_s
        told = False
        while True:
            held = {gpu: pids for gpu, pids in gpu_holders(nvml, devices).items() if pids}
            if not held:
                return
            if clock() >= deadline:
                taken = "; ".join(
                    f"GPU {gpu}: PIDs {', '.join(map(str, pids))}" for gpu, pids in held.items()
                )
                raise DeploymentError(
                    f"the server's GPUs are still in use after {wait_s:g} s ({taken}): stop "
                    "those processes (a server left by an interrupted run?) and resume"
                )
            if not told:
                on_status(f"waiting for GPU(s) {', '.join(held)} to be freed …")
                told = True
            sleep(1.0)
    finally:
        try:
            nvml.nvmlShutdown()
        except nvml.NVMLError:
            pass
