"""tunebench/machine/gpu.py on real GPU telemetry: the idle H200 `nvidia-smi -q -x` in
tests/fixtures/gpu and the captures with a slowing reason active in tests/fixtures/gpu-clocks
(its README names their sources). The expected values are the numbers printed in those files.
Inputs built by hand are labelled "constructed" where they appear."""

from __future__ import annotations

import sys

import pytest

from tests.conftest import FIXTURES
from tunebench.machine.gpu import (
    SLOWING_REASONS,
    GpuClocks,
    GpuWindow,
    dcgm_violations,
    gpu_slowdown,
    gpu_window,
    nvml_clock_reader,
    parse_nvidia_smi_text,
    parse_nvidia_smi_xml,
    reasons_from_mask,
    violation_slowdown,
)

CLOCKS = FIXTURES / "gpu-clocks"
H200_XML = FIXTURES / "gpu" / "nvidia-smi-q.xml"
H200_UUID = "GPU-db1c061e-730e-7eac-cf2d-2c5f3b99614c"
A40_CAPPED = {  # the two A40s whose capture says `SW Power Cap : Active`
    "GPU-4e65de01-972e-93cf-b077-181a5378972a",
    "GPU-b60642c3-5e0a-4748-ffa6-75a20ab8724f",
}


def h200() -> list[GpuClocks]:
    return parse_nvidia_smi_xml(H200_XML.read_text())


def v100() -> list[GpuClocks]:
    return parse_nvidia_smi_text((CLOCKS / "nvidia-smi-q-v100-sxm2-c4130-excerpt.txt").read_text())


def rtx2080() -> list[GpuClocks]:
    return parse_nvidia_smi_text((CLOCKS / "nvidia-smi-q-rtx2080.txt").read_text())


def a40() -> list[GpuClocks]:
    return parse_nvidia_smi_text((CLOCKS / "nvidia-smi-q-a40x10-20241114.txt").read_text())


# --- parsing the captures -------------------------------------------------------------------


def test_the_idle_h200_is_idle_with_its_clocks_read():
    assert h200() == [GpuClocks(H200_UUID, 345.0, 1980.0, frozenset({"gpu_idle"}))]
    assert h200()[0].slowing == frozenset()


def test_the_older_xml_tag_names_read_the_same():
    # nvidia-smi before r535 wrote clocks_throttle_reason*; here the real H200 capture has its
    # tags renamed to those names (the only change).
    old = H200_XML.read_text().replace("clocks_event_reason", "clocks_throttle_reason")
    assert "<clocks_throttle_reason_gpu_idle>Active<" in old
    assert parse_nvidia_smi_xml(old) == h200()


def test_the_power_braked_v100_in_a_c4130():
    (reading,) = v100()  # no GPU header, no UUID: position 0
    assert reading == GpuClocks(
        "0", 382.0, None, frozenset({"hw_slowdown", "hw_power_brake_slowdown"})
    )
    assert reading.slowing == {"hw_slowdown", "hw_power_brake_slowdown"}


def test_the_rtx2080_under_its_software_power_cap():
    assert rtx2080() == [
        GpuClocks(
            "GPU-3965f0d5-5188-6a1a-0e3f-14666ad9ce20", 300.0, 2130.0, frozenset({"sw_power_cap"})
        )
    ]


def test_every_text_label_is_read():
    # an edited copy of the real RTX 2080 capture: every "Not Active" turned "Active", so each
    # of the nine labels nvidia-smi prints must map to its NVML name
    text = (CLOCKS / "nvidia-smi-q-rtx2080.txt").read_text().replace("Not Active", "Active")
    (reading,) = parse_nvidia_smi_text(text)
    assert reading.reasons == reasons_from_mask(0x1FF)


def test_ten_a40s_two_power_capped_while_idle_in_p8():
    readings = a40()
    assert len(readings) == 10
    assert {r.gpu for r in readings if r.slowing} == A40_CAPPED
    for r in readings:
        assert (r.sm_mhz, r.sm_max_mhz) == (0.0, 1740.0)
        assert r.reasons == ({"sw_power_cap"} if r.gpu in A40_CAPPED else {"gpu_idle"})
    assert readings[0].gpu == "GPU-4e65de01-972e-93cf-b077-181a5378972a"  # bus 4F, first


def test_text_without_clock_sections_gives_no_reading():
    table = FIXTURES / "energy" / "nvidia-smi-table-aicr-h100-20260224.txt"  # plain nvidia-smi
    assert parse_nvidia_smi_text(table.read_text()) == []


# --- NVML -----------------------------------------------------------------------------------


def test_reasons_from_nvml_masks():
    assert reasons_from_mask(0) == frozenset()
    assert reasons_from_mask(0x1) == {"gpu_idle"}
    assert reasons_from_mask(0x4) == rtx2080()[0].reasons
    assert reasons_from_mask(0x88) == v100()[0].reasons
    assert reasons_from_mask(0x20 | 0x40) == {"sw_thermal_slowdown", "hw_thermal_slowdown"}
    assert reasons_from_mask(0x2 | 0x10 | 0x100) == {
        "applications_clocks_setting",
        "sync_boost",
        "display_clocks_setting",
    }
    assert len(reasons_from_mask(0x1FF)) == 9
    assert reasons_from_mask(0x1FF) & SLOWING_REASONS == SLOWING_REASONS
    assert reasons_from_mask(0x200 | 0x4 | (1 << 40)) == {"sw_power_cap"}  # unknown bits


class _NVMLError(Exception):
    pass


class FakeNvml:
    """pynvml's calls the reader makes. GPU 0 answers like the RTX 2080 capture and GPU 1 like
    the idle H200."""

    NVMLError = _NVMLError
    NVML_CLOCK_SM = 1

    def __init__(self, count=2, init_error=None, broken=()):
        self.count, self.init_error, self.broken = count, init_error, set(broken)
        self.clock = {0: 300, 1: 345}
        self.max_clock = {0: 2130, 1: 1980}
        self.mask = {0: 0x4, 1: 0x1}

    def nvmlInit(self):
        if self.init_error:
            raise _NVMLError(self.init_error)

    def nvmlDeviceGetCount(self):
        return self.count

    def nvmlDeviceGetHandleByIndex(self, index):
        if index >= self.count:
            raise _NVMLError("Invalid Argument")
        return index

    def nvmlDeviceGetHandleByUUID(self, uuid):
        return {H200_UUID: 1}[uuid]

    def nvmlDeviceGetClockInfo(self, handle, clock):
        assert clock == self.NVML_CLOCK_SM
        if handle in self.broken:
            raise _NVMLError("GPU is lost")
        return self.clock[handle]

    def nvmlDeviceGetMaxClockInfo(self, handle, clock):
        assert clock == self.NVML_CLOCK_SM
        return self.max_clock[handle]

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle):
        return self.mask[handle]


class OldFakeNvml(FakeNvml):
    """An nvidia-ml-py from before the rename: only the Throttle name."""

    nvmlDeviceGetCurrentClocksEventReasons = None

    def nvmlDeviceGetCurrentClocksThrottleReasons(self, handle):
        return self.mask[handle]


def test_nvml_reader_reads_every_gpu():
    read = nvml_clock_reader(nvml=FakeNvml())
    assert callable(read)
    assert read() == [
        GpuClocks("0", 300.0, 2130.0, frozenset({"sw_power_cap"})),
        GpuClocks("1", 345.0, 1980.0, frozenset({"gpu_idle"})),
    ]


def test_nvml_reader_reads_the_servers_gpus_by_index_or_uuid():
    read = nvml_clock_reader(f" {H200_UUID} ", nvml=FakeNvml())
    assert callable(read)
    assert read() == [GpuClocks(H200_UUID, 345.0, 1980.0, frozenset({"gpu_idle"}))]


def test_nvml_reader_falls_back_to_the_throttle_name():
    read = nvml_clock_reader("0", nvml=OldFakeNvml())
    assert callable(read)
    assert read() == [GpuClocks("0", 300.0, 2130.0, frozenset({"sw_power_cap"}))]


def test_nvml_reader_leaves_out_a_gpu_it_cannot_read():
    read = nvml_clock_reader(nvml=FakeNvml(broken={0}))
    assert callable(read)
    assert [r.gpu for r in read()] == ["1"]


def test_nvml_reader_says_why_there_is_none(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml raises ImportError
    assert nvml_clock_reader() == "nvidia-ml-py is not installed (pip install nvidia-ml-py)"
    assert nvml_clock_reader(nvml=FakeNvml(init_error="Driver Not Loaded")) == (
        "NVML did not start: Driver Not Loaded (no NVIDIA driver: no GPU here)"
    )
    assert nvml_clock_reader(nvml=FakeNvml(count=0)) == "NVML sees no GPU"
    assert nvml_clock_reader("3", nvml=FakeNvml()) == (
        "NVML could not open the server's GPUs (3): Invalid Argument"
    )
    bare = FakeNvml()
    bare.nvmlDeviceGetCurrentClocksEventReasons = None  # neither name
    assert nvml_clock_reader(nvml=bare) == (
        "this nvidia-ml-py reads no clock-event reasons (pip install -U nvidia-ml-py)"
    )


# --- a point's window -----------------------------------------------------------------------


def series(readings_at):
    """(epoch second, readings) pairs, one per second from t=100."""
    return [(100.0 + i, readings) for i, readings in enumerate(readings_at)]


def test_an_idle_gpu_held_its_clocks():
    window = gpu_window(series([h200()] * 5), 100, 104)
    assert window == GpuWindow(samples=5, slowed_share=0.0, lowest_clock_share=None, reasons=())
    assert gpu_slowdown(window) is None


def test_a_window_with_the_power_brake_in_4_of_10_samples():
    samples = series([h200()] * 3 + [v100()] * 4 + [h200()] * 3)
    window = gpu_window(samples, 100, 109)
    assert window == GpuWindow(10, 0.4, None, ("hw_power_brake_slowdown", "hw_slowdown"))
    assert gpu_slowdown(window) == (
        "GPU clocks held down in 40% of samples (hw_power_brake_slowdown, hw_slowdown)"
    )


def test_a_window_under_the_power_cap_names_how_low_the_sm_clock_went():
    window = gpu_window(series([h200()] * 7 + [rtx2080()] * 3), 100, 109)
    assert isinstance(window, GpuWindow)
    assert (window.samples, window.slowed_share, window.reasons) == (10, 0.3, ("sw_power_cap",))
    assert window.lowest_clock_share == pytest.approx(300 / 2130)
    assert gpu_slowdown(window) == (
        "GPU clocks held down in 30% of samples (sw_power_cap, SM down to 14% of max)"
    )


def test_only_samples_inside_the_window_count():
    samples = series([v100()] * 2 + [h200()] * 4 + [v100()] * 2)  # t=100..107
    window = gpu_window(samples, 102, 105)
    assert window == GpuWindow(4, 0.0, None, ())
    assert gpu_window(samples, 101, 102) == GpuWindow(
        2, 0.5, None, ("hw_power_brake_slowdown", "hw_slowdown")
    )


def test_fewer_than_two_samples_say_why():
    samples = series([h200()] * 3)
    assert gpu_window(samples, 102, 110) == "1 GPU clock sample(s) in the window 102-110; 2 needed"
    assert gpu_window(samples, 0, 50) == "0 GPU clock sample(s) in the window 0-50; 2 needed"
    assert gpu_window([], 0, 50) == "0 GPU clock sample(s) in the window 0-50; 2 needed"


def test_a_low_sm_clock_without_a_reason_counts_unless_the_gpu_is_idle():
    # constructed readings: NVML reporting no reason while the SM clock sits below 75% of max
    low = GpuClocks("0", 1400.0, 1980.0, frozenset())  # 70.7%
    near = GpuClocks("0", 1500.0, 1980.0, frozenset())  # 75.8%
    window = gpu_window(series([h200(), [low], [near], h200()]), 100, 103)
    assert isinstance(window, GpuWindow)
    assert (window.samples, window.slowed_share, window.reasons) == (4, 0.25, ())
    assert window.lowest_clock_share == pytest.approx(1400 / 1980)
    assert gpu_slowdown(window) == "GPU clocks held down in 25% of samples (SM down to 71% of max)"


def test_a_short_slowdown_below_the_least_share_is_no_evidence():
    window = gpu_window(series([h200()] * 19 + [rtx2080()]), 100, 119)
    assert isinstance(window, GpuWindow)
    assert window.slowed_share == 0.05
    assert gpu_slowdown(window) is None
    assert gpu_slowdown(window, least_share=0.05) == (
        "GPU clocks held down in 5% of samples (sw_power_cap, SM down to 14% of max)"
    )


def test_idle_a40s_reporting_the_power_cap_count_as_held_down():
    # What the A40 capture shows: idle GPUs in P8 can report SW Power Cap. A window in which
    # the server's GPUs idle at P8 between requests is counted as held down.
    window = gpu_window(series([a40()] * 3), 100, 102)
    assert window == GpuWindow(3, 1.0, None, ("sw_power_cap",))
    assert gpu_slowdown(window) == "GPU clocks held down in 100% of samples (sw_power_cap)"


# --- DCGM violation counters ----------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(p.name for p in (FIXTURES / "energy").glob("*.prom")))
def test_real_exporter_captures_have_no_violation_counters(name):
    assert dcgm_violations((FIXTURES / "energy" / name).read_text()) == {}


# Constructed exporter text (no real capture with these lines exists: see the README),
# written in the exporter's format with its labels, for the arithmetic only.
CONSTRUCTED_BEFORE = """\
# HELP DCGM_FI_DEV_POWER_VIOLATION Throttling duration due to power constraints (in us).
# TYPE DCGM_FI_DEV_POWER_VIOLATION counter
DCGM_FI_DEV_POWER_VIOLATION{gpu="0",UUID="GPU-a",Hostname="h"} 1000000000
DCGM_FI_DEV_POWER_VIOLATION{gpu="1",UUID="GPU-b",Hostname="h"} 0
DCGM_FI_DEV_THERMAL_VIOLATION{gpu="0",UUID="GPU-a",Hostname="h"} 0
DCGM_FI_DEV_THERMAL_VIOLATION{gpu="1",UUID="GPU-b",Hostname="h"} 5000000000
DCGM_FI_DEV_SYNC_BOOST_VIOLATION{gpu="0",UUID="GPU-a",Hostname="h"} 0
DCGM_FI_DEV_BOARD_LIMIT_VIOLATION{gpu="0",UUID="GPU-a",Hostname="h"} NaN
DCGM_FI_DEV_POWER_USAGE{gpu="0",UUID="GPU-a",Hostname="h"} 300.5
"""


def test_violation_counters_are_read_per_gpu_in_ns():
    assert dcgm_violations(CONSTRUCTED_BEFORE) == {
        "0": {
            "power_violation_ns": 1e9,
            "thermal_violation_ns": 0.0,
            "sync_boost_violation_ns": 0.0,
        },
        "1": {"power_violation_ns": 0.0, "thermal_violation_ns": 5e9},
    }


def test_violation_time_over_5_percent_of_the_window_is_evidence():
    before = dcgm_violations(CONSTRUCTED_BEFORE)
    # 100 s later: GPU 0 power-throttled 12 s more, GPU 1 thermal-throttled 4 s more
    after = {
        "0": {**before["0"], "power_violation_ns": 13e9},
        "1": {**before["1"], "thermal_violation_ns": 9e9},
    }
    assert violation_slowdown(before, after, 100.0) == (
        "DCGM violation counters over the 100 s window: power throttling for 12% of it on GPU 0"
    )
    assert violation_slowdown(before, after, 100.0, least_share=0.03) == (
        "DCGM violation counters over the 100 s window: power throttling for 12% of it on GPU 0;"
        " thermal throttling for 4% of it on GPU 1"
    )


def test_unchanged_reset_or_missing_counters_are_no_evidence():
    before = dcgm_violations(CONSTRUCTED_BEFORE)
    assert violation_slowdown(before, before, 100.0) is None
    reset = {"0": {"power_violation_ns": 0.0}, "1": {"thermal_violation_ns": 0.0}}
    assert violation_slowdown(before, reset, 100.0) is None
    assert violation_slowdown({}, before, 100.0) is None
    assert violation_slowdown(before, {"0": {"power_violation_ns": 99e9}}, 0.0) is None
