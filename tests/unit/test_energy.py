"""Energy per point: window arithmetic, the RAPL, NVML and DCGM readers, the choice of meter,
and the columns (never 0 J for "unknown"). GPU inputs are recorded captures
(tests/fixtures/energy/README.md names their sources)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tunebench.energy.choose import make_meter
from tunebench.energy.dcgm import DcgmMeter, readings_of
from tunebench.energy.nvml import nvml_meter, visible_devices
from tunebench.energy.rapl import package_zones, rapl_meter
from tunebench.energy.sampler import SamplingMeter
from tunebench.energy.window import Reading, counter_joules, power_joules
from tunebench.kinds import KINDS
from tunebench.metrics.parse import parse_samples
from tunebench.points.energy import EnergyReading, energy_columns
from tunebench.points.row import PointId, build_row
from tunebench.spec.models import Energy

LOCAL, RECORDED, HELM = (KINDS[k].whereabouts for k in ("local", "recorded", "helm"))

FIXTURES = Path(__file__).parents[1] / "fixtures" / "energy"


# -- window arithmetic -------------------------------------------------------------------
def test_a_counter_is_read_at_the_window_edges_between_readings():
    readings = [Reading(0.0, {"a": 0.0, "b": 100.0}), Reading(10.0, {"a": 1000.0, "b": 600.0})]
    joules, inside = counter_joules(readings, 2.0, 7.0)
    # a: 100 J/s for 5 s; b: 50 J/s for 5 s
    assert joules == pytest.approx(500 + 250)
    assert inside == 0


def test_a_counter_without_a_reading_after_the_window_gives_a_reason_not_a_number():
    readings = [Reading(0.0, {"a": 0.0}), Reading(5.0, {"a": 50.0})]
    result = counter_joules(readings, 1.0, 6.0)
    assert isinstance(result, str) and "window's end" in result
    assert "reset" in counter_joules([Reading(0, {"a": 9.0}), Reading(9, {"a": 1.0})], 1, 8)


def test_power_samples_give_mean_power_times_the_window_and_need_two_per_device():
    readings = [Reading(t, {"gpu0": 100.0 + t, "gpu1": 50.0}) for t in range(0, 11)]
    joules, inside = power_joules(readings, 2.0, 6.0)
    assert joules == pytest.approx((104.0 + 50.0) * 4.0)
    assert inside == 5
    few = power_joules(readings, 2.2, 2.9)
    assert isinstance(few, str) and "0 power sample(s) of gpu0" in few


def test_the_sampling_meter_reads_on_mark_and_reports_a_window():
    clock = iter([100.0, 101.0, 103.0])
    counter = iter([{"pkg": 0.0}, {"pkg": 40.0}, {"pkg": 120.0}])
    meter = SamplingMeter(
        lambda: next(counter), "counter", "rapl", "package-0", clock=lambda: next(clock)
    )
    for _ in range(3):
        meter.mark()
    reading = meter.window(100.0, 103.0)
    assert isinstance(reading, EnergyReading)
    assert reading.joules == pytest.approx(120.0)
    assert reading.mean_watts == pytest.approx(40.0)
    assert (reading.source, reading.method, reading.samples) == ("rapl", "counter", 3)


def test_a_failed_read_costs_a_sample_and_is_named_when_the_window_cannot_be_measured():
    def broken() -> dict[str, float]:
        raise OSError("device gone")

    meter = SamplingMeter(broken, "counter", "nvml", "1 GPU")
    meter.mark()
    result = meter.window(0.0, 1.0)
    assert isinstance(result, str) and "device gone" in result and meter.failures == 1


# -- RAPL -----------------------------------------------------------------------------------
def _powercap(root: Path, energy_uj: int, max_uj: int = 1000_000_000) -> Path:
    zone = root / "intel-rapl:0"
    zone.mkdir(parents=True)
    (zone / "name").write_text("package-0\n")
    (zone / "energy_uj").write_text(f"{energy_uj}\n")
    (zone / "max_energy_range_uj").write_text(f"{max_uj}\n")
    (root / "intel-rapl:0:0").mkdir()  # a sub-zone (core): not a package, not counted
    return zone


def test_rapl_is_absent_with_a_reason_on_a_machine_without_powercap(tmp_path):
    reason = package_zones(tmp_path / "powercap")
    assert isinstance(reason, str) and "no RAPL" in reason
    assert isinstance(rapl_meter(root=tmp_path / "powercap"), str)


def test_rapl_counts_microjoules_across_the_counter_wrapping(tmp_path):
    zone = _powercap(tmp_path, energy_uj=999_000_000)
    meter = rapl_meter(root=tmp_path)
    assert isinstance(meter, SamplingMeter)
    meter.mark()
    (zone / "energy_uj").write_text("4000000\n")  # wrapped: 1 J to the top, then 4 J
    meter.mark()
    first, last = meter.readings()
    assert last.values["package-0"] - first.values["package-0"] == pytest.approx(5.0)
    assert "whole CPU package" in meter.devices


def test_rapl_that_cannot_be_read_is_named(tmp_path):
    zone = _powercap(tmp_path, 1)
    (zone / "energy_uj").write_text("not a number\n")
    reason = package_zones(tmp_path)
    assert isinstance(reason, str) and "cannot be read" in reason


# -- NVML (a stand-in module; names and power from the recorded nvidia-smi table) ------------
class _NVMLError(Exception):
    pass


class FakeNvml:
    """pynvml's calls that the meter makes, answering like the H100 of the recorded table."""

    NVMLError = _NVMLError

    def __init__(self, count=2, energy_counter=True, init_error=None):
        self.count = count
        self.energy_counter = energy_counter
        self.init_error = init_error
        self.energy_mj = {i: 1_000_000 * (i + 1) for i in range(count)}
        self.power_mw = {i: 67_000 + i * 2_000 for i in range(count)}  # 67 W, 69 W: the table

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
        return int(uuid.rsplit("-", 1)[-1])

    def nvmlDeviceGetName(self, handle):
        return b"NVIDIA H100 80GB HBM3"

    def nvmlDeviceGetTotalEnergyConsumption(self, handle):
        if not self.energy_counter:
            raise _NVMLError("Not Supported")
        return self.energy_mj[handle]

    def nvmlDeviceGetPowerUsage(self, handle):
        return self.power_mw[handle]


def test_nvml_table_names_the_gpu_the_fake_answers_with():
    table = (FIXTURES / "nvidia-smi-table-aicr-h100-20260224.txt").read_text()
    assert "NVIDIA H100 80GB HBM3" in table and "67W /  700W" in table


def test_nvml_uses_the_energy_counter_of_the_servers_gpus():
    nvml = FakeNvml(count=4)
    meter = nvml_meter("1,3", nvml=nvml)
    assert isinstance(meter, SamplingMeter) and meter.kind == "counter"
    assert meter.devices.startswith("2 GPU(s) 1,3 (NVIDIA H100 80GB HBM3)")
    meter.mark()
    nvml.energy_mj[1] += 70_000  # 70 J
    nvml.energy_mj[3] += 30_000
    meter.mark()
    first, last = meter.readings()
    assert sum(last.values.values()) - sum(first.values.values()) == pytest.approx(100.0)
    assert set(last.values) == {"gpu1", "gpu3"}


def test_nvml_falls_back_to_power_samples_without_the_counter():
    meter = nvml_meter(None, nvml=FakeNvml(count=2, energy_counter=False))
    assert isinstance(meter, SamplingMeter) and meter.kind == "power"
    meter.mark()
    assert meter.readings()[0].values == {"gpu0": 67.0, "gpu1": 69.0}


def test_nvml_without_a_driver_or_gpu_says_why():
    reason = nvml_meter(None, nvml=FakeNvml(init_error="NVML Shared Library Not Found"))
    assert isinstance(reason, str) and "Shared Library Not Found" in reason
    assert nvml_meter(None, nvml=FakeNvml(count=0)) == "NVML sees no GPU"
    assert "could not open" in nvml_meter("7", nvml=FakeNvml(count=2))
    assert visible_devices(" 0, GPU-abc ") == ["0", "GPU-abc"] and visible_devices("") is None


def test_nvml_as_installed_here_reports_its_own_failure_not_a_reading():
    import pynvml  # noqa: F401  (nvidia-ml-py is a dependency)

    result = nvml_meter(None)
    if isinstance(result, str):  # no NVIDIA driver on this machine: the reason is NVML's own
        assert "NVML" in result
    else:
        result.mark()
        assert result.readings() and all(v >= 0 for v in result.readings()[0].values.values())


# -- DCGM through Prometheus ------------------------------------------------------------------
def test_the_recorded_prometheus_answers_read_as_one_reading_per_gpu():
    body = json.loads((FIXTURES / "prometheus-aicr-h100x8-power-20260302.json").read_text())
    readings, devices = readings_of(body["data"]["result"])
    assert devices == "8 GPU(s) (NVIDIA H100 80GB HBM3)"
    assert len(readings) == 1 and len(readings[0].values) == 8
    # the same GPUs' power in the exporter's own text of that day
    text = (FIXTURES / "dcgm-aicr-h100x8-vllm-20260302.prom").read_text()
    exported = [value for _, value in parse_samples(text)["DCGM_FI_DEV_POWER_USAGE"]]
    assert len(exported) == 8 and min(exported) > 50 and max(exported) < 700
    assert 8 * 60 < sum(readings[0].values.values()) < 8 * 700


def test_the_dcgm_query_selects_the_window_and_the_servers_pods():
    meter = DcgmMeter("http://127.0.0.1:9/", 'namespace="llm",pod=~"qwen-.*"')
    assert (
        meter.query(100.0, 130.2) == 'DCGM_FI_DEV_POWER_USAGE{namespace="llm",pod=~"qwen-.*"}[31s]'
    )
    assert meter.url == "http://127.0.0.1:9/api/v1/query"
    result = meter.window(100.0, 101.0)  # nothing listens on port 9
    assert isinstance(result, str) and result.startswith("Prometheus query failed")
    meter.stop()


def test_the_bearer_token_is_sent_and_never_part_of_what_the_meter_says(monkeypatch):
    monkeypatch.setenv("TB_PROM_TOKEN", "sha256~secret-value")
    meter = DcgmMeter("http://127.0.0.1:9", bearer_token_env="TB_PROM_TOKEN")
    assert meter._client.headers["Authorization"] == "Bearer sha256~secret-value"
    assert "secret-value" not in str(meter.window(0.0, 1.0))
    meter.stop()


# -- which meter, and the columns --------------------------------------------------------------
def test_the_meter_is_chosen_by_the_spec_and_the_deployment():
    assert make_meter(Energy(source="off"), LOCAL) == "energy: source off in the spec"
    assert "recorded deployment" in make_meter(Energy(), RECORDED)
    assert "energy.prometheus_url" in make_meter(Energy(), HELM)
    meter = make_meter(Energy(prometheus_url="http://127.0.0.1:9090"), HELM)
    assert isinstance(meter, DcgmMeter)
    meter.stop()
    with pytest.raises(ValueError, match="prometheus_url"):
        Energy(source="dcgm")


def test_without_a_reading_the_energy_columns_are_empty_and_say_why_never_zero():
    row = {"output_tok_s": 100.0, "total_tok_s": 300.0}
    out = energy_columns(row, "no CPU energy: /sys/class/powercap is absent")
    assert out["energy_j"] is None and out["joules_per_output_token"] is None
    assert out["energy_note"] == "no energy: no CPU energy: /sys/class/powercap is absent"
    reading = EnergyReading(600.0, 300.0, "nvml", "1 GPU(s)", "counter", 3)
    out = energy_columns(row, reading)
    assert out["joules_per_output_token"] == pytest.approx(3.0)
    assert out["joules_per_token"] == pytest.approx(1.0)
    assert out["energy_note"] is None and out["energy_source"] == "nvml counter: 1 GPU(s)"


def test_a_row_carries_the_energy_columns():
    row = build_row(
        PointId("r", "c1", "base", "concurrent-1", "concurrent"),
        {},
        {"target": 1, "requests_ok": 10, "output_tok_s": 50.0, "total_tok_s": 150.0},
        [],
        {},
        energy=EnergyReading(100.0, 20.0, "rapl", "package-0", "counter", 5),
    ).csv_cells()
    assert row["energy_j"] == 100.0 and row["joules_per_output_token"] == pytest.approx(0.4)


def test_nvml_meters_the_gpus_the_server_holds_not_the_whole_box(monkeypatch):
    from tunebench.energy import choose

    seen = []
    monkeypatch.setattr(choose, "nvml_meter", lambda visible, interval: seen.append(visible) or "x")
    monkeypatch.setattr(choose, "rapl_meter", lambda interval: "no rapl")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    make_meter(Energy(source="nvml"), LOCAL)  # one GPU: vLLM's default is GPU 0
    make_meter(Energy(source="nvml"), LOCAL, gpus=2)  # TP=2: GPUs 0 and 1
    make_meter(Energy(source="nvml"), LOCAL, {"CUDA_VISIBLE_DEVICES": "4,5"}, gpus=2)
    assert seen == ["0", "0,1", "4,5"]
