"""Whether a run watches the machine under its server, and with what."""

from __future__ import annotations

import os

from tunebench.machine.gpu import nvml_clock_reader
from tunebench.machine.probe import Probe
from tunebench.machine.telemetry import Telemetry
from tunebench.machine.watch import MachineWatch
from tunebench.processes import parse_cpus
from tunebench.spec.deployments import Whereabouts


def make_watch(
    server: Whereabouts,
    cpus: str | None,
    probe_interval_s: float = 30.0,
    server_env: dict[str, str] | None = None,
) -> MachineWatch | str:
    """A watch of the server's CPUs (`deployment.cpus`; None: every CPU) and, where NVML
    sees them, of its GPUs' clocks; or why none (a server elsewhere: its CPUs, cgroups and
    /proc are not ours to read)."""
    if not server.on_this_host:
        return f"the {server.kind} server's machine is not this one: no telemetry of it here"
    watched = parse_cpus(cpus) if cpus else None
    try:
        probe: Probe | None = Probe(watched)
    except ImportError:
        probe = None
    env = {**os.environ, **(server_env or {})}
    gpus = nvml_clock_reader(env.get("CUDA_VISIBLE_DEVICES"))
    return MachineWatch(
        Telemetry(watched, []),
        probe,
        probe_interval_s=probe_interval_s,
        gpu_reader=None if isinstance(gpus, str) else gpus,
    )
