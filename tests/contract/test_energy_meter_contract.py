"""The EnergyMeter contract (tunebench/seams/energy.py), run against every meter through its
own reading code: NVML with an energy counter and NVML with power samples only (a stand-in
of pynvml answering with the GPUs and power of the recorded nvidia-smi table), RAPL from a
powercap tree (its microjoule counter wrapping), and DCGM through a stand-in Prometheus
that holds the recorded DCGM_FI_DEV_POWER_USAGE answers of one 8 x H100 node as its scrapes
(tests/fixtures/energy/README.md names the captures).

Each meter is used as the runner uses it: start() once, mark() after each point, window()
of the point's epoch-second window, stop() at the end. A reading is joules over the window
(the units each source reports, mJ, uJ or W, turned into J); a window that cannot be
measured is a reason, never a reading of 0.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pytest

from tests.fakes.fake_prometheus import FakePrometheus
from tunebench.energy.dcgm import DcgmMeter
from tunebench.energy.nvml import nvml_meter
from tunebench.energy.rapl import rapl_meter
from tunebench.points.energy import EnergyReading
from tunebench.seams.energy import EnergyMeter

FIXTURES = Path(__file__).parents[1] / "fixtures" / "energy"
TABLE = (FIXTURES / "nvidia-smi-table-aicr-h100-20260224.txt").read_text()
# the same node's power, 4 days apart: the exporter shows the first, then (once the
# hardware draws) the second
CAPTURES = [
    FIXTURES / "prometheus-aicr-h100x8-power-20260302.json",
    FIXTURES / "prometheus-aicr-h100x8-power-20260306.json",
]
SERVER_NAMESPACE = "dynamo-workload"  # the vLLM pod's, on one GPU of that node
SERVER_PODS = f'namespace="{SERVER_NAMESPACE}"'
DRAW_S = 10.0  # a counter's step: the GPUs' power of the table drawn for this long
RAPL_MAX_UJ = 262_143_328_850  # a package zone's max_energy_range_uj
RAPL_DRAW_UJ = 5_000_000
NO_SAMPLING = 3600.0  # an interval no test outlives: readings come from mark() alone


def table_gpus() -> list[tuple[str, float]]:
    """(name, watts) of each GPU in the recorded nvidia-smi table (Name, Pwr:Usage)."""
    names = re.findall(r"^\|\s+\d+\s+(NVIDIA .+?)\s{2,}", TABLE, re.M)
    watts = [float(w) for w in re.findall(r"(\d+)W /\s+\d+W", TABLE)]
    assert len(names) == len(watts) == 2
    return list(zip(names, watts))


def server_watts(capture: Path) -> float:
    """The recorded power of the server's GPUs (SERVER_PODS) in one capture, in watts."""
    series = json.loads(capture.read_text())["data"]["result"]
    return sum(float(s["value"][1]) for s in series if s["metric"]["namespace"] == SERVER_NAMESPACE)


class StandInNvml:
    """The calls of pynvml that nvml_meter makes, answering like the GPUs of the recorded
    nvidia-smi table: their names, their power (mW), and an energy counter (mJ) on GPUs that
    keep one. `lost` makes every read fail as NVML does when a GPU falls off the bus."""

    class NVMLError(Exception):
        pass

    def __init__(self, counter: bool):
        self.gpus = table_gpus()
        self.counter = counter
        self.energy_mj = [3_600_000_000 + 1_000 * i for i in range(len(self.gpus))]
        self.lost = False

    def _read(self) -> None:
        if self.lost:
            raise self.NVMLError("GPU is lost")

    def nvmlInit(self):  # noqa: N802 - pynvml's names
        pass

    def nvmlDeviceGetCount(self):  # noqa: N802
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index):  # noqa: N802
        if index >= len(self.gpus):
            raise self.NVMLError("Invalid Argument")
        return index

    def nvmlDeviceGetHandleByUUID(self, uuid):  # noqa: N802
        raise self.NVMLError("Not Found")

    def nvmlDeviceGetName(self, handle):  # noqa: N802
        return self.gpus[handle][0].encode()

    def nvmlDeviceGetTotalEnergyConsumption(self, handle):  # noqa: N802
        self._read()
        if not self.counter:
            raise self.NVMLError("Not Supported")
        return self.energy_mj[handle]

    def nvmlDeviceGetPowerUsage(self, handle):  # noqa: N802
        self._read()
        return round(self.gpus[handle][1] * 1000)


@dataclass
class Rig:
    """A meter and the hardware it reads."""

    meter: EnergyMeter
    source: str  # what the meter and its readings name
    method: str  # counter | power
    devices: str  # part of what a reading says it measured
    tick: Callable[[], None]  # a reading is taken now: mark(), and for DCGM a scrape
    draw: Callable[[], None]  # the hardware draws (a counter steps; the exporter's next capture)
    expected: Callable[[float, float], float]  # joules drawn over [start, end] by `draw`
    fail: Callable[[], None]  # the source can no longer be read
    why: str  # what a reason names once the source cannot be read
    close: Callable[[], None] = lambda: None


def nvml_rig(tmp_path: Path, interval_s: float, counter: bool) -> Rig:
    nvml = StandInNvml(counter)
    meter = nvml_meter("0,1", interval_s, nvml=nvml)
    assert not isinstance(meter, str), meter
    watts = sum(w for _, w in nvml.gpus)

    def expected(start: float, end: float) -> float:
        # a counter: the step draw() made; power samples: the table's power over the window
        return watts * (DRAW_S if counter else end - start)

    def draw() -> None:
        for i, (_, w) in enumerate(nvml.gpus):
            nvml.energy_mj[i] += round(w * DRAW_S * 1000)

    def fail() -> None:
        nvml.lost = True

    return Rig(
        meter,
        "nvml",
        "counter" if counter else "power",
        "2 GPU(s) 0,1 (NVIDIA H100 80GB HBM3)",
        meter.mark,
        draw,
        expected,
        fail,
        "GPU is lost",
    )


def nvml_counter_rig(tmp_path: Path, interval_s: float) -> Rig:
    return nvml_rig(tmp_path, interval_s, counter=True)


def nvml_power_rig(tmp_path: Path, interval_s: float) -> Rig:
    return nvml_rig(tmp_path, interval_s, counter=False)


def rapl_rig(tmp_path: Path, interval_s: float) -> Rig:
    """A package zone 1 J short of its counter's wrap, and its core sub-zone (not counted)."""
    root = tmp_path / "powercap"
    package, core = root / "intel-rapl:0", root / "intel-rapl:0:0"
    for zone, name in ((package, "package-0"), (core, "core")):
        zone.mkdir(parents=True)
        (zone / "name").write_text(f"{name}\n")
        (zone / "energy_uj").write_text(f"{RAPL_MAX_UJ - 1_000_000}\n")
        (zone / "max_energy_range_uj").write_text(f"{RAPL_MAX_UJ}\n")
    meter = rapl_meter(interval_s, root=root)
    assert not isinstance(meter, str), meter

    def draw() -> None:
        for zone in (package, core):
            raw = int((zone / "energy_uj").read_text())
            (zone / "energy_uj").write_text(f"{(raw + RAPL_DRAW_UJ) % RAPL_MAX_UJ}\n")

    def fail() -> None:
        (package / "energy_uj").unlink()

    return Rig(
        meter,
        "rapl",
        "counter",
        "package-0",
        meter.mark,
        draw,
        lambda start, end: RAPL_DRAW_UJ / 1e6,
        fail,
        "No such file or directory",
    )


def dcgm_rig(tmp_path: Path, interval_s: float) -> Rig:
    prometheus = FakePrometheus(CAPTURES)
    meter = DcgmMeter(prometheus.url, SERVER_PODS, timeout_s=5)
    before, after = (server_watts(c) for c in CAPTURES)

    def tick() -> None:
        meter.mark()
        prometheus.scrape()

    def draw() -> None:
        prometheus.capture = 1

    def fail() -> None:
        prometheus.down = True

    def close() -> None:
        meter.stop()
        prometheus.close()

    return Rig(
        meter,
        "dcgm",
        "power",
        "1 GPU(s) (NVIDIA H100 80GB HBM3)",
        tick,
        draw,
        # one sample of each capture in the window: their mean power over its length
        lambda start, end: (before + after) / 2 * (end - start),
        fail,
        "503",
        close,
    )


RIGS = {
    "nvml-counter": nvml_counter_rig,
    "nvml-power": nvml_power_rig,
    "rapl": rapl_rig,
    "dcgm": dcgm_rig,
}
# The meters that sample on their own between start() and stop(); DCGM asks Prometheus
# afterwards, so its start() may do nothing (the contract allows it).
SAMPLING = ["nvml-counter", "nvml-power", "rapl"]


@pytest.fixture(params=list(RIGS))
def make_rig(request, tmp_path):
    """Makes rigs of one kind (each in its own folder); stops and closes them after the test."""
    made: list[Rig] = []

    def make(interval_s: float = NO_SAMPLING) -> Rig:
        folder = tmp_path / str(len(made))
        folder.mkdir()
        rig = RIGS[request.param](folder, interval_s)
        made.append(rig)
        return rig

    yield make
    for rig in made:
        rig.meter.stop()
        rig.close()


def pause() -> None:
    """Time passes between readings and the window's edges (DCGM stamps to the ms)."""
    time.sleep(0.02)


def is_reason(result: EnergyReading | str) -> bool:
    return isinstance(result, str) and bool(result.strip())


# -- the checks ------------------------------------------------------------------------------


def test_a_window_of_known_draw_is_its_energy_in_joules(make_rig):
    """Readings around both edges of a window in which the hardware drew: the reading is the
    energy drawn in joules, its mean power is joules over the window, and it names the
    meter's source and the readings inside. The last mark() is the runner's, after a point:
    it brackets the window's end."""
    rig = make_rig()
    meter = rig.meter
    meter.start()
    rig.tick()
    pause()
    start = time.time()
    pause()
    rig.tick()
    pause()
    rig.draw()
    rig.tick()
    pause()
    end = time.time()
    pause()
    rig.tick()
    reading = meter.window(start, end)
    assert isinstance(reading, EnergyReading), reading
    assert reading.joules == pytest.approx(rig.expected(start, end), rel=1e-9)
    assert reading.joules > 0
    assert reading.mean_watts == pytest.approx(reading.joules / (end - start), rel=1e-9)
    assert reading.source == meter.source == rig.source
    assert reading.method == rig.method
    assert rig.devices in reading.devices
    # the two readings taken inside (a sampling meter's own first reading may add one)
    assert reading.samples >= 2
    meter.stop()


def test_a_window_it_cannot_measure_is_a_reason_never_zero(make_rig):
    """Windows without readings around both edges, or with too few inside, or empty. The
    readings are mark()'s alone (start() is not called: a sampling meter's own first reading
    could land anywhere in so short a test)."""
    rig = make_rig()
    meter = rig.meter
    now = time.time()
    assert is_reason(meter.window(now - 1.0, now))  # nothing read yet
    rig.tick()
    pause()
    start = time.time()
    pause()
    rig.tick()
    pause()
    end = time.time()
    # no reading after the window's end (no mark() after the point)
    assert is_reason(meter.window(start, end))
    pause()
    later = time.time()
    # readings before the window, none in or after it
    assert is_reason(meter.window(later, later + 1.0))
    # an empty window
    assert is_reason(meter.window(later, later))
    assert is_reason(meter.window(later, later - 1.0))
    meter.stop()


def test_a_source_that_cannot_be_read_is_a_reason_that_names_it(make_rig):
    """A source gone mid-run (a GPU lost, a powercap file gone, Prometheus down): marks go
    on without raising, the window says why it has no energy, and stop() still stops."""
    rig = make_rig()
    meter = rig.meter
    meter.start()
    rig.tick()
    pause()
    start = time.time()
    rig.fail()
    pause()
    rig.tick()
    rig.tick()
    pause()
    end = time.time()
    pause()
    rig.tick()
    result = meter.window(start, end)
    assert is_reason(result) and rig.why in result, result
    meter.stop()
    meter.stop()


def test_stop_is_idempotent_and_never_raises(make_rig):
    never_started = make_rig().meter
    never_started.stop()
    never_started.stop()
    rig = make_rig()
    rig.meter.start()
    rig.tick()
    rig.meter.stop()
    rig.meter.stop()


@pytest.mark.parametrize("make_rig", SAMPLING, indirect=True)
def test_start_samples_on_its_own_until_stop(make_rig):
    """Between start() and stop() a sampling meter reads every interval without being
    asked; after stop() it reads no more."""
    rig = make_rig(interval_s=0.05)
    meter = rig.meter
    meter.start()
    time.sleep(0.2)
    start = time.time()
    time.sleep(0.5)
    end = time.time()
    time.sleep(0.2)
    reading = meter.window(start, end)  # no mark(): the meter's own readings
    assert isinstance(reading, EnergyReading), reading
    assert reading.samples >= 2 and reading.source == rig.source
    meter.stop()
    stopped = time.time()
    time.sleep(0.3)
    later = time.time()
    time.sleep(0.2)  # time for readings after the window, were it still sampling
    assert is_reason(meter.window(stopped, later))
