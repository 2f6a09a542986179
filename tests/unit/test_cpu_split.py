"""A local CPU server and its load generator get CPUs of their own unless the spec says
otherwise (spec/cores.py), and the dry-run plan says which and warns where they share."""

from __future__ import annotations

from pathlib import Path

import pytest

from tunebench.spec import cores
from tunebench.spec.cores import cores_line, cpu_list, with_cpu_split
from tunebench.spec.loading import validate_spec


def _spec(deployment: dict | None = None, load: dict | None = None, **extra):
    data = {
        "name": "s",
        "model": "builtin:tiny-llama-random",
        "deployment": {"kind": "local", **(deployment or {})},
        "load": {
            "data": {"kind": "synthetic", "prompt_tokens": 8, "output_tokens": 8},
            "profiles": [{"kind": "concurrent", "streams": [1], "max_seconds": 5}],
            **(load or {}),
        },
        **extra,
    }
    return data


@pytest.fixture
def no_gpu_four_cpus(monkeypatch):
    monkeypatch.delenv(cores.SWITCH, raising=False)
    monkeypatch.setattr(cores, "host_has_gpu", lambda: False)
    monkeypatch.setattr(cores, "host_cpus", lambda: {0, 1, 2, 3})


def _split(data: dict) -> tuple[str | None, str | None]:
    spec = validate_spec(data, Path("s.yaml"))
    return getattr(spec.deployment, "cpus", None), spec.load.client_cpus


def test_a_local_cpu_server_leaves_the_last_cpu_to_its_load(no_gpu_four_cpus):
    assert _split(_spec()) == ("0-2", "3")


def test_on_two_cpus_the_split_is_the_demos(monkeypatch):
    monkeypatch.delenv(cores.SWITCH, raising=False)
    monkeypatch.setattr(cores, "host_has_gpu", lambda: False)
    monkeypatch.setattr(cores, "host_cpus", lambda: {0, 1})
    assert _split(_spec()) == ("0", "1")


def test_one_side_named_gives_the_other_the_rest(no_gpu_four_cpus):
    assert _split(_spec(load={"client_cpus": "1"})) == ("0,2-3", "1")
    assert _split(_spec(deployment={"cpus": "0-1"})) == ("0-1", "2-3")


def test_both_named_are_kept_as_written(no_gpu_four_cpus):
    assert _split(_spec({"cpus": "0-3"}, {"client_cpus": "3"})) == ("0-3", "3")


@pytest.mark.parametrize(
    "deployment",
    [{"cpu": "off"}, {"parallel": 2}],
    ids=["gpu-server", "parallel-servers"],
)
def test_gpu_and_parallel_servers_keep_what_the_spec_says(no_gpu_four_cpus, deployment):
    assert _split(_spec(deployment)) == (None, None)


def test_sweeps_side_by_side_can_turn_the_split_off(no_gpu_four_cpus, monkeypatch):
    monkeypatch.setenv(cores.SWITCH, "off")
    assert _split(_spec()) == (None, None)


def test_a_host_with_a_gpu_does_not_split(monkeypatch):
    monkeypatch.delenv(cores.SWITCH, raising=False)
    monkeypatch.setattr(cores, "host_has_gpu", lambda: True)
    monkeypatch.setattr(cores, "host_cpus", lambda: {0, 1})
    assert _split(_spec()) == (None, None)


def test_a_server_elsewhere_does_not_split(no_gpu_four_cpus):
    data = _spec()
    data["deployment"] = {"kind": "endpoint", "url": "http://127.0.0.1:8000"}
    assert _split(data) == (None, None)


def test_a_side_that_takes_every_cpu_is_left_and_the_plan_warns(no_gpu_four_cpus):
    spec = validate_spec(_spec({"cpus": "0-3"}), Path("s.yaml"))
    assert (spec.deployment.cpus, spec.load.client_cpus) == ("0-3", None)
    line = cores_line(spec)
    assert line is not None and line.startswith("warning: the server and the load generator")


def test_the_plan_names_the_cpus_and_warns_where_both_use_one(no_gpu_four_cpus):
    spec = validate_spec(_spec(), Path("s.yaml"))
    assert cores_line(spec) == "CPUs: server 0-2, load generator 3"
    shared = validate_spec(_spec({"cpus": "0-2"}, {"client_cpus": "2-3"}), Path("s.yaml"))
    line = cores_line(shared)
    assert line is not None and "warning: both use CPU 2" in line
    spec = with_cpu_split(validate_spec(_spec({"cpu": "off"}), Path("s.yaml")))
    assert cores_line(spec) is None


def test_cpu_lists_are_written_as_linux_writes_them():
    assert cpu_list({0}) == "0"
    assert cpu_list({0, 1, 2, 5, 7, 8}) == "0-2,5,7-8"
