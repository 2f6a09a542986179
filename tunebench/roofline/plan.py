"""The roofline of one configuration: its model's bytes as the server runs it (from the
effective configuration) and the bandwidth of the device serving it."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from tunebench import demo
from tunebench.environment import gpus
from tunebench.numbers import to_float
from tunebench.points.records import RooflineRecord
from tunebench.points.roofline import Roofline
from tunebench.processes import parse_cpus
from tunebench.roofline.bandwidth import Bandwidth, gpu_bandwidth, measure_cpu
from tunebench.roofline.model_bytes import model_bytes
from tunebench.spec.deployments import Whereabouts


def _gpu_names() -> list[str]:
    return [gpu["name"] for gpu in gpus()]


class RooflinePlanner:
    """Builds each configuration's Roofline; measures the CPU once per size and CPU set."""

    def __init__(
        self,
        settings: Any,  # spec roofline
        server: Whereabouts,
        server_cpus: str | None,
        log_dir: Path,
        measure: Callable[[int, set[int] | None, Path], Bandwidth | str] = measure_cpu,
        gpu_names: Callable[[], list[str]] = _gpu_names,
    ):
        self.settings = settings
        self.server = server
        self.cpus = parse_cpus(server_cpus) if server_cpus else None
        self.log_dir = log_dir
        self._measure = measure
        self._gpu_names = gpu_names
        self._measured: dict[int, Bandwidth | str] = {}

    def for_config(
        self, model: str, args: dict[str, Any], effective: dict[str, Any]
    ) -> tuple[Roofline | None, RooflineRecord]:
        """The configuration's roofline and what to record of it (or why there is none)."""
        if not self.settings.enabled:
            return None, {"note": "roofline: enabled false in the spec"}
        if self.server.plays_recorded_run:
            return None, {"note": "a recorded deployment has no device"}
        path = Path(demo.resolve_builtin(model)).expanduser()
        if not path.is_dir():
            return None, {"note": f"the model's files ({model}) are not on this machine"}
        quantization = effective.get("quantization") or args.get("quantization")
        counted = model_bytes(
            path,
            served_dtype=effective.get("dtype") or args.get("dtype"),
            quantization=str(quantization) if quantization else None,
            kv_cache_dtype=effective.get("kv_cache_dtype") or args.get("kv-cache-dtype"),
        )
        if isinstance(counted, str):
            return None, {"note": counted}
        bandwidth = self._bandwidth(counted.weight_bytes)
        if isinstance(bandwidth, str):
            return None, {"note": bandwidth}
        devices = 1
        if bandwidth.source.startswith(("table", "spec")):  # per GPU: TP GPUs read in parallel
            tensor = effective.get("tensor_parallel_size") or args.get("tensor-parallel-size")
            devices = max(1, int(to_float(tensor) or 1))
        roofline = Roofline(
            counted.weight_bytes,
            counted.kv_bytes_per_token,
            bandwidth.gbs * devices,
            f"{counted.source}; {counted.detail}; {bandwidth.source}"
            + (f" x {devices} devices" if devices > 1 else ""),
        )
        record: RooflineRecord = {
            "weight_bytes": counted.weight_bytes,
            # (a key ending in "token" would be masked as a secret)
            "kv_bytes_per_context_tokens": counted.kv_bytes_per_token,
            "bandwidth_gbs": round(bandwidth.gbs, 2),
            "devices": devices,
            "note": roofline.note,
        }
        return roofline, record

    def _bandwidth(self, weight_bytes: float) -> Bandwidth | str:
        if self.settings.bandwidth_gbs:
            return Bandwidth(float(self.settings.bandwidth_gbs), "spec: roofline.bandwidth_gbs")
        if self.settings.device:
            found = gpu_bandwidth(self.settings.device)
            return found or f"roofline.device {self.settings.device!r} is not in the table"
        if not self.server.on_this_host:
            return (
                f"the {self.server.kind} server's device is not known here: set roofline.device "
                "or roofline.bandwidth_gbs"
            )
        names = self._gpu_names()
        if names:
            return gpu_bandwidth(names[0]) or (
                f"GPU {names[0]!r} is not in the bandwidth table: set roofline.bandwidth_gbs"
            )
        key = int(weight_bytes) >> 20  # per MiB of working set
        if key not in self._measured:
            self._measured[key] = self._measure(int(weight_bytes), self.cpus, self.log_dir)
        return self._measured[key]
