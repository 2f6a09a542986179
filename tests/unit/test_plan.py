"""Matrix and variant expansion, engine-arg rendering, shipped sweeps."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import REPO
from tunebench.spec.loading import load_spec, validate_spec
from tunebench.spec.plan import build_plan, engine_arg_list

BASE = {
    "name": "t",
    "model": "org/base",
    "deployment": {"kind": "local"},
    "load": {
        "data": {"kind": "synthetic", "prompt_tokens": 8, "output_tokens": 8},
        "profiles": [
            {"kind": "concurrent", "streams": [1, 2], "max_seconds": 5},
            {"kind": "poisson", "rate": [0.5, 2], "max_seconds": 5},
            {"kind": "sweep", "max_seconds": 5},
        ],
    },
}


def plan_of(**server):
    spec = validate_spec({**BASE, "server": server}, Path("x.yaml"))
    return build_plan(spec, Path("x.yaml"))


def test_engine_args_render_as_vllm_flags():
    args = {
        "max-num-seqs": 8,
        "enforce-eager": True,
        "enable-prefix-caching": False,
        "gpu-memory-utilization": 0.9,
        "max-model-len": 2048.0,
        "quantization": None,
        "speculative-config": {"method": "ngram", "num_speculative_tokens": 3},
        "served-model-name": ["a", "b"],
    }
    assert engine_arg_list(args) == [
        "--max-num-seqs",
        "8",
        "--enforce-eager",
        "--no-enable-prefix-caching",
        "--gpu-memory-utilization",
        "0.9",
        "--max-model-len",
        "2048",
        "--speculative-config",
        '{"method":"ngram","num_speculative_tokens":3}',
        "--served-model-name",
        "a",
        "b",
    ]


def test_matrix_product_in_file_order():
    plan = plan_of(
        args={"max-model-len": 512},
        matrix={"max-num-seqs": [2, 8], "kv-cache-dtype": ["auto", "fp8"]},
    )
    assert [c.label for c in plan.configs] == [
        "max-num-seqs=2, kv-cache-dtype=auto",
        "max-num-seqs=2, kv-cache-dtype=fp8",
        "max-num-seqs=8, kv-cache-dtype=auto",
        "max-num-seqs=8, kv-cache-dtype=fp8",
    ]
    assert [c.config_id for c in plan.configs] == ["c1", "c2", "c3", "c4"]
    assert plan.configs[3].args == {
        "max-model-len": 512,
        "max-num-seqs": 8,
        "kv-cache-dtype": "fp8",
    }
    assert plan.configs[3].varied == {"max-num-seqs": 8, "kv-cache-dtype": "fp8"}


def test_matrix_may_vary_the_model():
    plan = plan_of(matrix={"model": ["org/base", "org/base-w8a8"], "max-num-seqs": [4]})
    assert [c.model for c in plan.configs] == ["org/base", "org/base-w8a8"]
    assert all("model" not in c.args for c in plan.configs)


def test_variants_times_matrix():
    plan = plan_of(
        args={"max-num-seqs": 4},
        variants=[
            {"name": "base"},
            {"name": "w4a16", "model": "org/base-w4a16", "args": {"max-num-seqs": 2}},
        ],
        matrix={"enforce-eager": [True, False]},
    )
    assert len(plan.configs) == 4
    w4 = plan.configs[2]
    assert w4.model == "org/base-w4a16" and w4.args["max-num-seqs"] == 2
    assert w4.varied == {"variant": "w4a16", "enforce-eager": True}


def test_load_points():
    plan = plan_of()
    assert [p.point_id for p in plan.points] == [
        "concurrent-1",
        "concurrent-2",
        "poisson-0.5",
        "poisson-2",
        "sweep",
    ]
    assert len(plan.configs) == 1 and plan.configs[0].label == "base"


def test_relative_model_path_resolves_from_the_spec(tmp_path):
    (tmp_path / "models" / "m").mkdir(parents=True)
    spec_path = tmp_path / "sweeps" / "s.yaml"
    spec_path.parent.mkdir()
    spec = validate_spec({**BASE, "model": "../models/m"}, spec_path)
    assert build_plan(spec, spec_path).configs[0].model == str(
        (tmp_path / "models" / "m").resolve()
    )


# batch-*.yaml are batch specs (tests/unit/test_batch.py), not sweeps
SHIPPED = sorted(p for p in (REPO / "sweeps").glob("*.yaml") if not p.name.startswith("batch-"))


def test_the_shipped_sweeps_exist():
    names = {p.name for p in SHIPPED}
    assert {"cpu-demo.yaml", "latency.yaml", "quantization.yaml", "speculative.yaml"} <= names


@pytest.mark.parametrize("path", SHIPPED, ids=[p.name for p in SHIPPED])
def test_shipped_sweeps_pass_dry_run(cli, path):
    spec = load_spec(path)
    command = "tune" if spec.tune else "sweep"
    result = cli(command, str(path.relative_to(REPO)), "--dry-run")
    assert result.returncode == 0, result.stderr
    assert "estimated time" in result.stdout
    plan = build_plan(spec, path)
    # a tune spec has one base configuration; the study makes the others
    assert (
        (len(plan.configs) == 1 and len(spec.tune.space) >= 2)
        if spec.tune
        else len(plan.configs) >= 2
    )
    assert plan.points


def test_cpu_demo_is_the_embedded_default():
    plan = build_plan(load_spec(REPO / "sweeps/cpu-demo.yaml"), REPO / "sweeps/cpu-demo.yaml")
    assert plan.configs[0].model == "builtin:tiny-llama"
    assert {c.args["max-num-seqs"] for c in plan.configs} >= {2, 8}
    kinds = [p.point_id for p in plan.points]
    assert {"concurrent-1", "concurrent-4", "concurrent-8"} <= set(kinds)
    assert any(k.startswith("poisson") for k in kinds)


def test_repeats_are_planned_alternating_and_estimated():
    from tunebench.sweep.estimate import estimate_seconds
    from tunebench.sweep.run import plan_work

    spec = validate_spec(
        {**BASE, "server": {"matrix": {"max-num-seqs": [2, 8]}}, "repeats": 3}, Path("x.yaml")
    )
    plan = build_plan(spec, Path("x.yaml"))
    work = plan_work(plan)
    assert [(w.config.config_id, w.repeat) for w in work] == [
        ("c1", 1),
        ("c2", 1),
        ("c1", 2),
        ("c2", 2),
        ("c1", 3),
        ("c2", 3),
    ]
    once = validate_spec({**BASE, "server": {"matrix": {"max-num-seqs": [2, 8]}}}, Path("x.yaml"))
    single = estimate_seconds(once, build_plan(once, Path("x.yaml")))
    assert estimate_seconds(spec, plan) == pytest.approx(3 * single)


def test_warmup_and_cooldown_are_carried_to_every_point_and_probe():
    profile = {"kind": "poisson", "rate": [1, 2], "max_seconds": 30, "warmup": 0.1, "cooldown": 3}
    spec = validate_spec({**BASE, "load": {**BASE["load"], "profiles": [profile]}}, Path("x.yaml"))
    points = build_plan(spec, Path("x.yaml")).points
    assert [(p.warmup, p.cooldown) for p in points] == [(0.1, 3), (0.1, 3)]
    with pytest.raises(Exception, match="cooldown"):
        validate_spec(
            {**BASE, "load": {**BASE["load"], "profiles": [{**profile, "cooldown": -1}]}},
            Path("x.yaml"),
        )


def test_a_local_start_on_a_gpu_is_estimated_at_minutes(monkeypatch):
    from tunebench.sweep import estimate

    spec = validate_spec({**BASE, "server": {"matrix": {"max-num-seqs": [2, 8]}}}, Path("x.yaml"))
    plan = build_plan(spec, Path("x.yaml"))
    monkeypatch.setattr(estimate, "gpu_visible", lambda: False)
    on_cpu = estimate.estimate_seconds(spec, plan)
    monkeypatch.setattr(estimate, "gpu_visible", lambda: True)
    on_gpu = estimate.estimate_seconds(spec, plan)
    # two configurations, each a GPU start (180 s) instead of a CPU box's (60 s)
    assert on_gpu - on_cpu == pytest.approx(2 * (180 - 60))


def test_a_capacity_search_is_estimated_with_the_windows_it_sizes():
    """A search's probes stretch at low rates until the SLO's percentile has its requests
    (p90: 36 x the sample margin), and it takes its probes up to max_probes: the estimate
    counts those windows, not max_seconds per probe."""
    from tunebench.sweep.estimate import POINT_OVERHEAD_S, search_seconds

    profile = {"kind": "capacity", "max_seconds": 10, "start_rate": 2, "max_probes": 6}
    spec = validate_spec(
        {**BASE, "load": {**BASE["load"], "profiles": [profile]}, "slo": {"ttft_ms": {"p90": 60}}},
        Path("x.yaml"),
    )
    (point,) = build_plan(spec, Path("x.yaml")).points
    seconds = search_seconds(point, 0.9)
    # at least its bracketing window at the start rate (2.5 x 36 / 2 = 45 s), once per probe
    assert seconds >= 4 * (45 + POINT_OVERHEAD_S), seconds
    # and at most max_probes windows at their cap (10 x max_seconds)
    assert seconds <= 6 * (100 + POINT_OVERHEAD_S), seconds
    # without a percentile to feed, each window is max_seconds
    bare = search_seconds(point, None)
    assert bare <= 6 * (10 + POINT_OVERHEAD_S) and bare >= 2 * (10 + POINT_OVERHEAD_S)


def test_a_plan_with_a_search_gives_its_estimate_as_a_range():
    from tunebench.report.tables import duration_text
    from tunebench.sweep.estimate import estimate_range

    profile = {"kind": "capacity", "max_seconds": 10, "start_rate": 2, "max_probes": 6}
    spec = validate_spec(
        {**BASE, "load": {**BASE["load"], "profiles": [profile]}, "slo": {"ttft_ms": {"p90": 60}}},
        Path("x.yaml"),
    )
    low, high = estimate_range(spec, build_plan(spec, Path("x.yaml")))
    # a capacity under half the start rate: the search halves its rate, its windows stretch
    assert high > 1.1 * low, (low, high)
    assert duration_text((low, high)).endswith("if capacities lie below half their start rates")
    assert duration_text((300.0, 300.0)) == "about 5 min (300 s)"
