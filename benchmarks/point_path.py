"""One point's path through the code: the modules a measured point's row passes through
from the load driver's result to the progress line, in call order.

A configuration with one load point runs through the real runner, store and rules, with the
deployment and the load generator stood in for (tunebench.testing's fakes: the path of the
row does not depend on which server answered). A profiler records every call into a
tunebench module from the moment the driver has the point's figures until the reporter has
shown the stored row. It prints:

- visits: calls from one module into another (each a module a reader opens next),
- modules: the distinct modules on the path,
- upward: calls into a module of a higher layer than the caller's (pyproject.toml's
  import-linter layers): control flowing back up, as callbacks do.

    python benchmarks/point_path.py [--json]

Run it on two checkouts (PYTHONPATH=CHECKOUT) to compare them; nothing else is needed.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
import tomllib
from pathlib import Path
from types import FrameType
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
STAND_IN = "tunebench.testing.fakes"  # the fake load driver is not on the path


def layers() -> list[list[str]]:
    """The import-linter layers, top first, each a list of package names."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    contract = next(c for c in config["tool"]["importlinter"]["contracts"] if c["type"] == "layers")
    return [[p.strip() for p in layer.split("|")] for layer in contract["layers"]]


def layer_of(module: str, order: list[list[str]]) -> int:
    """The index of the module's layer (0 = top); modules outside every layer (the package's
    top-level helpers) count as the bottom."""
    for index, packages in enumerate(order):
        if any(module == p or module.startswith(p + ".") for p in packages):
            return index
    return len(order)


class PathRecorder:
    """Calls from one tunebench module into another while `recording` is set."""

    def __init__(self) -> None:
        self.recording = False
        self.calls: list[tuple[str, str]] = []  # (caller's module, callee's module)

    def profile(self, frame: FrameType, event: str, arg: Any) -> None:
        if not self.recording or event != "call" or frame.f_back is None:
            return
        callee = frame.f_globals.get("__name__", "")
        caller = frame.f_back.f_globals.get("__name__", "")
        if not callee.startswith("tunebench") or callee == caller or callee == STAND_IN:
            return
        self.calls.append((caller, callee))


def run_one_point(recorder: PathRecorder) -> None:
    from tunebench.runner import ConfigRunner, PointRules
    from tunebench.seams.progress import SilentReporter
    from tunebench.spec.models import Metrics
    from tunebench.spec.plan import LoadPoint, ServerConfig
    from tunebench.store.manifest import RunKind
    from tunebench.store.run import RunStore
    from tunebench.testing import FakeDeployment, FakeLoadDriver, fake_columns

    class ShowingReporter(SilentReporter):
        def point_done(self, config: Any, row: Any) -> None:  # the path's last stop
            recorder.recording = False

    def measure(point: Any) -> Any:
        columns = fake_columns(point)
        recorder.recording = True  # the driver has the point's figures: the path starts
        return columns

    config = ServerConfig(
        "c1", "max-num-seqs=4", "m", None, {"max-num-seqs": 4}, {"max-num-seqs": 4}
    )
    point = LoadPoint("concurrent-1", "concurrent", 1, 5.0, None, None)
    with tempfile.TemporaryDirectory() as tmp:
        store = RunStore.create(
            Path(tmp), RunKind.SWEEP, "path", varied_args=["max-num-seqs"], versions={}, host={}
        )
        driver = FakeLoadDriver(measure=measure)
        runner = ConfigRunner(
            store,
            FakeDeployment(),
            lambda config: driver,
            Metrics(),
            ShowingReporter(),
            PointRules(slo={"ttft_ms": {"p95": 100}}),
        )
        sys.setprofile(recorder.profile)
        threading.setprofile(recorder.profile)  # type: ignore[arg-type]
        try:
            outcome = runner.run(config, [point])
        finally:
            sys.setprofile(None)
            threading.setprofile(None)  # type: ignore[arg-type]
    if outcome.status != "complete":
        raise SystemExit(f"the point was not measured: {outcome.status}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    recorder = PathRecorder()
    run_one_point(recorder)
    order = layers()
    calls = recorder.calls
    upward = [f"{a} -> {b}" for a, b in calls if layer_of(b, order) < layer_of(a, order)]
    entered = [callee for _, callee in calls]
    figures = {
        "visits": len(calls),
        "modules": len({m for call in calls for m in call}),
        "upward": len(upward),
        "upward_calls": sorted(set(upward)),
        "entered": {m: entered.count(m) for m in sorted(set(entered), key=entered.index)},
    }
    if args.json:
        print(json.dumps(figures, indent=2))
        return 0
    print(
        f"one point's path: {figures['visits']} visits, {figures['modules']} modules, "
        f"{figures['upward']} of the visits upward"
    )
    for name, count in figures["entered"].items():
        print(f"  {count:3d}  {name}")
    for call in figures["upward_calls"]:
        print(f"  upward: {call}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
