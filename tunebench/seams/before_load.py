"""BeforeLoad: work on a configuration's ready server before its first load point.

The runner (runner/config_runner.py) calls each step once per configuration, after the
server started and its args were read back, and before any load point; a step's time is in
no point's window. The quality check and lm-eval are such steps (quality/step.py).

Contract:
- `run` never raises for what the server answers: a step that fails records why on the
  configuration (the run store) and returns; the load points still run.
- `run` returns a reason to measure no load on this configuration (e.g. "quality gate:
  ..." in a tune, where a trial that answers wrong is infeasible whatever its speed), or None;
  the runner records the first reason and measures no point.
- A step does its work once per configuration: it does nothing for a repeat after the first,
  nor when an earlier attempt of a resumed run already did it.
"""

from __future__ import annotations

from typing import Protocol

from tunebench.seams.deployment import ServerHandle
from tunebench.spec.plan import ServerConfig


class BeforeLoad(Protocol):
    def run(self, config: ServerConfig, handle: ServerHandle, repeat: int) -> str | None: ...
