"""tunebench's GPU code paths read real GPU output (tests/fixtures/gpu: an H200 captured by
tools/gpu-capture/capture.py): the nvidia-smi query environment.py parses, and NVML energy
through energy/nvml.py's meter. The truths are the captured numbers themselves, read here
with plain arithmetic, never through the code under test."""

from __future__ import annotations

import csv
import os
import stat

import pytest

from tests.conftest import FIXTURES
from tunebench.energy.nvml import nvml_meter

GPU = FIXTURES / "gpu"


def test_the_host_record_reads_the_real_nvidia_smi_query(tmp_path, monkeypatch):
    from tunebench import environment

    fake = tmp_path / "nvidia-smi"  # prints what the H200's nvidia-smi printed for the query
    fake.write_text(f"#!/bin/sh\ncat '{GPU / 'nvidia-smi-name-mem-driver.csv'}'\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    assert environment.gpus() == [
        {"name": "NVIDIA H200", "memory": "143771 MiB", "driver": "580.159.04"}
    ]


def _samples() -> list[dict[str, str]]:
    with (GPU / "nvml-energy-samples.csv").open() as handle:
        return list(csv.DictReader(handle))


class _ReplayedNvml:
    """pynvml's surface that nvml_meter uses, answering from the captured samples in turn."""

    class NVMLError(Exception):
        pass

    def __init__(self, samples: list[dict[str, str]]):
        self.samples = samples
        self.index = -1

    def advance(self) -> None:
        self.index += 1

    def nvmlInit(self) -> None:
        pass

    def nvmlDeviceGetCount(self) -> int:
        return 1

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:
        return index

    def nvmlDeviceGetName(self, handle: int) -> bytes:
        return b"NVIDIA H200"

    def nvmlDeviceGetTotalEnergyConsumption(self, handle: int) -> int:
        return int(self.samples[max(self.index, 0)]["energy_mj"])

    def nvmlDeviceGetPowerUsage(self, handle: int) -> int:
        return int(self.samples[max(self.index, 0)]["power_mw"])


def test_nvml_energy_over_the_matmul_phase_is_the_counters_own_difference():
    samples = _samples()
    nvml = _ReplayedNvml(samples)
    times = iter(float(s["t_s"]) for s in samples)
    meter = nvml_meter("0", nvml=nvml, clock=lambda: next(times))  # the capture's own clock
    assert not isinstance(meter, str) and meter.kind == "counter"
    for _ in samples:
        nvml.advance()
        meter.mark()
    busy = [s for s in samples if s["phase"] == "matmul"]
    start, end = float(busy[0]["t_s"]), float(busy[-1]["t_s"])
    joules = (int(busy[-1]["energy_mj"]) - int(busy[0]["energy_mj"])) / 1000
    reading = meter.window(start, end)
    assert not isinstance(reading, str), reading
    assert reading.joules == pytest.approx(joules, rel=1e-6)
    assert joules / (end - start) == pytest.approx(693, abs=5)  # the H200 at its 700 W cap
    # the power reading lags about 1 s (an averaged value): integrated over the same window
    # it still lands within 5% of the counter, the idle edges costing most of it
    power = [int(s["power_mw"]) / 1000 for s in busy]
    assert sum(power) / len(power) * (end - start) == pytest.approx(joules, rel=0.05)


def test_gpu_memory_comes_back_after_the_process_group_is_killed():
    """The timeline a wait-for-free-GPU check must handle: NVML's idle 'used' is not 0."""
    with (GPU / "nvml-release-timeline.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    for trial in ("sigkill", "sigterm"):
        mine = [r for r in rows if r["trial"] == trial]
        idle = int(mine[0]["used_mib"])
        signal = next(float(r["t_s"]) for r in mine if r["event"] == trial)
        busy = max(int(r["used_mib"]) for r in mine)
        freed = next(
            float(r["t_s"]) for r in mine
            if float(r["t_s"]) > signal and int(r["used_mib"]) <= idle + 1024
        )  # fmt: skip
        assert idle > 0 and busy > idle + 30_000  # the child held about 30 GiB
        assert 0 < freed - signal < 2.0, (trial, freed - signal)
