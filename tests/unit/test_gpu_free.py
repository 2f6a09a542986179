"""Before a GPU start, wait until no process holds the server's GPUs (a fake NVML: the seam)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from tunebench.deploy.gpu_free import wait_for_free_gpus
from tunebench.errors import DeploymentError


class FakeNvml:
    """GPUs 0-3; `holders[i]` lists the PIDs on GPU i for each successive query."""

    class NVMLError(Exception):
        pass

    def __init__(self, holders: dict[int, list[list[int]]]):
        self.holders = holders
        self.asked = {i: 0 for i in holders}

    def nvmlInit(self):
        pass

    def nvmlShutdown(self):
        pass

    def nvmlDeviceGetCount(self):
        return 4

    def nvmlDeviceGetHandleByIndex(self, index):
        return index

    def nvmlDeviceGetComputeRunningProcesses(self, index):
        turns = self.holders.get(index, [[]])
        pids = turns[min(self.asked.get(index, 0), len(turns) - 1)]
        self.asked[index] = self.asked.get(index, 0) + 1
        return [SimpleNamespace(pid=pid, usedGpuMemory=1 << 30) for pid in pids]


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds


def test_the_start_waits_while_the_previous_server_still_holds_its_gpu():
    nvml, clock, said = FakeNvml({1: [[4242], [4242], []]}), Clock(), []
    wait_for_free_gpus("1", 60, nvml, clock.sleep, clock, said.append)
    assert clock.now == 2.0 and said == ["waiting for GPU(s) 1 to be freed …"]


def test_only_the_servers_gpus_count():
    nvml, clock = FakeNvml({0: [[99]], 2: [[]]}), Clock()
    wait_for_free_gpus("2", 60, nvml, clock.sleep, clock)  # GPU 0 busy: not ours
    assert clock.now == 0.0


def test_a_gpu_held_past_the_wait_fails_the_start_naming_the_pids():
    nvml, clock = FakeNvml({0: [[4242, 4343]]}), Clock()
    with pytest.raises(DeploymentError, match=r"after 5 s \(GPU 0: PIDs 4242, 4343\): stop"):
        wait_for_free_gpus(None, 5, nvml, clock.sleep, clock)


def test_without_nvml_there_is_nothing_to_wait_for(monkeypatch):
    monkeypatch.setattr("tunebench.deploy.gpu_free._load_nvml", lambda: None)
    wait_for_free_gpus("0", 60)  # returns at once
