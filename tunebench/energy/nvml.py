"""GPU energy through NVML (nvidia-ml-py) for servers on this machine.

Volta and newer GPUs keep an energy counter (nvmlDeviceGetTotalEnergyConsumption, mJ since
the driver loaded): read at the window's edges it is exact. Older GPUs only report power
(nvmlDeviceGetPowerUsage, mW): their windows average the power samples. The GPUs measured
are the server's: its CUDA_VISIBLE_DEVICES (indices or UUIDs), else every GPU.
"""

from __future__ import annotations

import time
from typing import Any, Callable

from tunebench.energy.sampler import SamplingMeter
from tunebench.environment import load_nvml


def visible_devices(value: str | None) -> list[str] | None:
    """CUDA_VISIBLE_DEVICES as a list of indices or UUIDs (None: every GPU)."""
    if value is None or not value.strip():
        return None
    return [part.strip() for part in value.split(",") if part.strip()]


def nvml_meter(
    cuda_visible_devices: str | None = None,
    interval_s: float = 1.0,
    nvml: Any = None,
    clock: Callable[[], float] = time.time,
) -> SamplingMeter | str:
    """A meter of the server's GPUs, or why there is none (no NVML, no GPU)."""
    nvml = nvml if nvml is not None else load_nvml()
    if isinstance(nvml, str):
        return nvml
    try:
        nvml.nvmlInit()
    except nvml.NVMLError as exc:
        return f"NVML did not start: {exc} (no NVIDIA driver: no GPU here)"
    try:
        count = nvml.nvmlDeviceGetCount()
        wanted = visible_devices(cuda_visible_devices)
        if not count:
            return "NVML sees no GPU"
        if wanted is None:
            handles = {str(i): nvml.nvmlDeviceGetHandleByIndex(i) for i in range(count)}
        else:
            handles = {}
            for device in wanted:
                if device.isdigit():
                    handles[device] = nvml.nvmlDeviceGetHandleByIndex(int(device))
                else:
                    handles[device] = nvml.nvmlDeviceGetHandleByUUID(device)
    except nvml.NVMLError as exc:
        return f"NVML could not open the server's GPUs ({cuda_visible_devices}): {exc}"
    names = sorted({_text(nvml.nvmlDeviceGetName(h)) for h in handles.values()})
    devices = f"{len(handles)} GPU(s) {','.join(handles)} ({', '.join(names)})"
    try:
        for handle in handles.values():
            nvml.nvmlDeviceGetTotalEnergyConsumption(handle)
    except nvml.NVMLError:  # pre-Volta: power only
        return SamplingMeter(
            _power_reader(nvml, handles), "power", "nvml", devices, interval_s, clock
        )
    return SamplingMeter(
        _energy_reader(nvml, handles), "counter", "nvml", devices, interval_s, clock
    )


def _energy_reader(nvml: Any, handles: dict[str, Any]):
    def read() -> dict[str, float]:
        return {
            f"gpu{d}": nvml.nvmlDeviceGetTotalEnergyConsumption(h) / 1000.0
            for d, h in handles.items()
        }

    return read


def _power_reader(nvml: Any, handles: dict[str, Any]):
    def read() -> dict[str, float]:
        return {f"gpu{d}": nvml.nvmlDeviceGetPowerUsage(h) / 1000.0 for d, h in handles.items()}

    return read


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
