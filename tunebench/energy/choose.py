"""Which energy meter a run uses, or why it has none (the reason every point then carries)."""

from __future__ import annotations

import os
from typing import Any

from tunebench.energy.dcgm import DcgmMeter
from tunebench.energy.nvml import nvml_meter
from tunebench.energy.rapl import rapl_meter
from tunebench.seams.energy import EnergyMeter
from tunebench.spec.deployments import Whereabouts


def make_meter(
    settings: Any, server: Whereabouts, server_env: dict[str, str] | None = None, gpus: int = 1
) -> EnergyMeter | str:
    """The meter of `settings` (spec `energy:`) for a server of deployment kind `server`
    that holds `gpus` GPUs (NVML and RAPL see its hardware only when it runs on this host)."""
    source = settings.source
    if source == "off":
        return "energy: source off in the spec"
    if source == "dcgm" or (source == "auto" and settings.prometheus_url):
        return DcgmMeter(
            settings.prometheus_url,
            settings.selector,
            settings.bearer_token_env,
            verify=settings.verify_tls,
            settle_s=settings.settle_s,
        )
    if server.plays_recorded_run:
        return "a recorded deployment draws no power"
    if not server.on_this_host and source == "auto":
        # nvml or rapl named in the spec: the user says the server shares this host
        return (
            f"the {server.kind} server may run elsewhere: set energy.prometheus_url to a "
            "Prometheus that scrapes the DCGM exporter, or energy.source nvml/rapl when it runs "
            "on this host (docs/energy.md)"
        )
    env = {**os.environ, **(server_env or {})}
    reasons: list[str] = []
    if source in ("auto", "nvml"):
        # A server given no GPUs by name runs on the first `gpus` (vLLM's default; CUDA and
        # NVML count in one order, deploy/local.py sets CUDA_DEVICE_ORDER): meter those, not
        # every GPU of the box with the idle ones' draw.
        visible = env.get("CUDA_VISIBLE_DEVICES") or ",".join(str(i) for i in range(gpus))
        meter = nvml_meter(visible, settings.interval_s)
        if not isinstance(meter, str):
            return meter
        reasons.append(f"no GPU power: {meter}")
    if source in ("auto", "rapl"):
        meter = rapl_meter(settings.interval_s)
        if not isinstance(meter, str):
            return meter
        reasons.append(f"no CPU energy: {meter}")
    return "; ".join(reasons)
