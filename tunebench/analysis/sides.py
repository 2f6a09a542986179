"""What is compared: a side (a run, or the configurations of a run sharing one arg value),
and what differs between sides beyond their points (engine args, hardware)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pandas as pd

LOAD_KEY = ("load_kind", "target")


@dataclass
class Side:
    """One thing being compared: a run, or the configurations of a run with one arg value."""

    name: str
    points: pd.DataFrame
    requests: pd.DataFrame
    args: dict[str, Any] = field(default_factory=dict)
    host: dict[str, Any] = field(default_factory=dict)


def args_differ(sides: list[Side]) -> dict[str, list[Any]]:
    names: list[str] = []
    for side in sides:
        names += [k for k in side.args if k not in names]
    return {
        name: [side.args.get(name) for side in sides]
        for name in names
        if len({repr(side.args.get(name)) for side in sides}) > 1
    }


HARDWARE_KEYS = ("cpu_model", "cpu_flags", "accelerator", "gpus")


def hardware_warnings(sides: list[Side]) -> list[str]:
    """A warning when the runs were measured on different hardware (CPU model, vector
    instruction sets, GPUs): their numbers may differ for that reason alone."""
    known = [
        (s.name, {k: s.host.get(k) for k in HARDWARE_KEYS if s.host.get(k) is not None})
        for s in sides
        if s.host
    ]
    distinct = {repr(h) for _, h in known}
    if len(distinct) <= 1:
        return []
    described = "; ".join(f"{name}: {_describe_host(host)}" for name, host in known)
    return [
        f"the runs come from different hardware ({described}); differences may be the "
        "machines', not the configurations'"
    ]


def _describe_host(host: dict[str, Any]) -> str:
    flags = host.get("cpu_flags") or []
    vector = (
        "avx512"
        if any(str(f).startswith("avx512") for f in flags)
        else ("avx2" if "avx2" in flags else ",".join(map(str, flags[:3])) or "no vector flags")
    )
    return f"{host.get('cpu_model') or '?'} ({vector}), {host.get('accelerator') or 'cpu'}"
