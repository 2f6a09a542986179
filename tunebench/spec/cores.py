"""Which CPUs a local CPU server and its load generator use.

On a CPU host the server and the load generator compete for the same cores: vLLM-CPU keeps
every core it is given busy, and a load generator that waits for a CPU reports latencies of
its own waiting (the point is client-limited). So a local server on CPU gets the host's CPUs
but one, and the load generator the last one, unless the spec says otherwise
(`deployment.cpus`, `load.client_cpus`); when it names one side only, the other gets the
rest. A GPU server, a server elsewhere or several servers at once keep what the spec says,
and so does every sweep while TUNEBENCH_CPU_SPLIT=off (several sweeps side by side on one
host, as a test suite runs them, would otherwise all pin their servers to the same CPUs).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING

from tunebench.environment import gpu_visible as host_has_gpu
from tunebench.processes import parse_cpus
from tunebench.spec.deployments import placement_of

if TYPE_CHECKING:
    from tunebench.spec.models import SweepSpec

CpuSet = set[int]
SWITCH = "TUNEBENCH_CPU_SPLIT"


def host_cpus() -> CpuSet:
    """The CPUs this process may run on (its affinity, not the machine's count)."""
    try:
        return set(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return set(range(os.cpu_count() or 1))


def cpu_list(cpus: CpuSet) -> str:
    """A set of CPUs as a Linux CPU list: {0, 1, 2, 5} -> "0-2,5"."""
    parts: list[str] = []
    ordered = sorted(cpus)
    start = prev = ordered[0]
    for cpu in [*ordered[1:], None]:
        if cpu is not None and cpu == prev + 1:
            prev = cpu
            continue
        parts.append(str(start) if start == prev else f"{start}-{prev}")
        if cpu is not None:
            start = prev = cpu
    return ",".join(parts)


def splits_cores(spec: SweepSpec, gpu_visible: Callable[[], bool] | None = None) -> bool:
    """Whether the spec's server is one local CPU server on this host."""
    deployment = spec.deployment
    if os.environ.get(SWITCH, "").lower() in ("off", "0", "no"):
        return False
    if not placement_of(deployment).on_this_host or getattr(deployment, "parallel", 1) > 1:
        return False
    has_gpu = gpu_visible or host_has_gpu  # read at the call: tests replace it
    cpu = getattr(deployment, "cpu", "auto")
    if cpu == "off" or (cpu == "auto" and has_gpu()):
        return False
    return True


def with_cpu_split(
    spec: SweepSpec, gpu_visible: Callable[[], bool] | None = None, cpus: CpuSet | None = None
) -> SweepSpec:
    """The spec with the server's and the load generator's CPUs filled in where a local CPU
    server would otherwise share them with its load; unchanged elsewhere."""
    if not splits_cores(spec, gpu_visible):
        return spec
    server: str | None = getattr(spec.deployment, "cpus", None)
    client = spec.load.client_cpus
    if server and client:
        return spec
    available = cpus if cpus is not None else host_cpus()
    if len(available) < 2:
        return spec  # one CPU: nothing to split; the plan says so
    if server:
        server_set = parse_cpus(server)
        client_set = available - server_set
    elif client:
        client_set = parse_cpus(client)
        server_set = available - client_set
    else:
        client_set = {max(available)}
        server_set = available - client_set
    if not server_set or not client_set:
        return spec  # the side given takes every CPU; the plan warns
    deployment = spec.deployment.model_copy(update={"cpus": cpu_list(server_set)})
    load = spec.load.model_copy(update={"client_cpus": cpu_list(client_set)})
    return spec.model_copy(update={"deployment": deployment, "load": load})


def cores_line(
    spec: SweepSpec, gpu_visible: Callable[[], bool] | None = None, cpus: CpuSet | None = None
) -> str | None:
    """The plan's line on the CPUs of a local CPU server and its load generator, with a
    warning where they share a CPU (None: not a local CPU server)."""
    if not splits_cores(spec, gpu_visible):
        return None
    server = getattr(spec.deployment, "cpus", None)
    client = getattr(getattr(spec, "load", None), "client_cpus", None)
    available = cpus if cpus is not None else host_cpus()
    fix = (
        "give each its own (deployment.cpus and load.client_cpus, e.g. '0' and '1' on "
        "2 cores) or expect client-limited points"
    )
    if not server or not client:
        return (
            f"warning: the server and the load generator share this host's "
            f"{len(available)} CPU{'s' if len(available) != 1 else ''}: {fix}"
        )
    shared = parse_cpus(server) & parse_cpus(client)
    line = f"CPUs: server {server}, load generator {client}"
    if shared:
        line += f"; warning: both use CPU {cpu_list(shared)}: {fix}"
    return line
