"""Cost: a replica's price per hour over what it served: at every point, at capacity, in
`results`, `show`, and as the tuner's objective (capacity per cost unit)."""

from __future__ import annotations

import json

import pytest

from tests.unit.test_tune import FakeRunner, _recorded_spec
from tunebench.points.cost import accelerators, at_rate, cost_columns, replica_price
from tunebench.runner import ConfigOutcome
from tunebench.seams.progress import SilentReporter
from tunebench.spec.plan import ServerConfig
from tunebench.testing import make_rate_grid_run
from tunebench.tune.evaluate import RunnerEvaluator

GPU = {"price_per_hour": 4.0, "per": "accelerator", "currency": "USD"}


def test_a_replica_costs_its_accelerators_and_a_node_price_is_the_replica_price():
    assert accelerators(GPU, {}) == 1
    assert accelerators(GPU, {"tensor-parallel-size": 2, "pipeline-parallel-size": 2}) == 4
    # a data-parallel replica holds DP x TP x PP GPUs, as the local kind hands them out
    assert accelerators(GPU, {"tensor-parallel-size": 2, "data-parallel-size": 2}) == 4
    assert accelerators(GPU, {"data_parallel_size": 3}) == 3
    assert replica_price(GPU, {"tensor-parallel-size": 2}) == 8.0
    assert replica_price({**GPU, "accelerators_per_replica": 8}, {"tensor-parallel-size": 2}) == 32
    assert replica_price({"price_per_hour": 30.0, "per": "node"}, {"tensor-parallel-size": 8}) == 30


def test_the_cost_of_a_point_at_the_rate_it_was_measured():
    row = {"output_tok_s": 1000.0, "total_tok_s": 3000.0, "achieved_rps": 10.0}
    found = cost_columns(row, 3.6)
    # 3.6 per hour buys 3.6 M output tokens: 1 per million
    assert found["cost_per_mtok_output"] == pytest.approx(1.0)
    assert found["cost_per_mtok_total"] == pytest.approx(1 / 3)
    assert found["requests_per_cost"] == pytest.approx(10_000)
    assert cost_columns({"output_tok_s": None}, 3.6)["cost_per_mtok_output"] is None
    at_capacity = at_rate(3.6, 10.0, 100.0)
    assert at_capacity["cost_per_mtok_output"] == pytest.approx(1.0)
    assert at_capacity["requests_per_cost"] == pytest.approx(10_000)


def _capacity_outcome(rate: float) -> ConfigOutcome:
    capacity = {
        "rate": rate,
        "client_bound": False,
        "probes": 4,
        "probe_rates": [rate],
        "capped": False,
        "converged": True,
    }
    return ConfigOutcome("t1", "complete", 4, None, capacity, {}, [])


def test_capacity_per_cost_prefers_the_cheaper_replica_that_serves_nearly_as_much():
    def value(rate: float, args: dict) -> float:
        evaluator = RunnerEvaluator(
            FakeRunner(_capacity_outcome(rate)),
            [],
            None,
            "capacity-per-cost",
            SilentReporter(),
            1,
            cost=GPU,
        )
        result = evaluator.evaluate(ServerConfig("t1", "x", "m", None, args))
        assert result.attrs["cost_per_hour"] == replica_price(GPU, args)
        return result.values[0]

    one_gpu = value(10.0, {})
    two_gpus = value(15.0, {"tensor-parallel-size": 2})  # 1.5x the capacity at 2x the price
    assert one_gpu == pytest.approx(10 * 3600 / 4) and one_gpu > two_gpus


def test_a_priced_sweep_and_tune_on_a_recorded_run_carry_cost_everywhere(tmp_path, cli):
    grid = {f"mns{s}": ({"max-num-seqs": s}, 1.0 + s) for s in (1, 2, 4, 8)}
    grid["defaults"] = ({}, 4.0)
    recorded = make_rate_grid_run(tmp_path / "recorded", grid, rates=(1, 2, 4, 8, 12)).path
    spec = _recorded_spec(
        tmp_path,
        recorded,
        """
cost: {price_per_hour: 2.5}
tune:
  objective: capacity-per-cost
  trials: 4
  space:
    max-num-seqs: {choices: [1, 2, 4, 8]}
""",
    )
    tuned = cli("tune", spec, "--no-report", "--helm-dir", str(tmp_path / "helm"))
    assert tuned.returncode == 0, tuned.stderr
    run = next((tmp_path / "runs").iterdir())
    summary = json.loads((run / "tune-result.json").read_text())
    assert summary["objective_names"] == ["requests_per_cost"]
    best = summary["best"]
    manifest = json.loads((run / "manifest.json").read_text())
    config = next(c for c in manifest["configs"] if c["config_id"] == best["config_id"])
    capacity = config["capacity"]["rate"]
    assert best["values"][0] == pytest.approx(capacity * 3600 / 2.5)
    points = (run / "points.csv").read_text().splitlines()
    header = points[0].split(",")
    assert {"cost_per_hour", "cost_per_mtok_output", "requests_per_cost"} <= set(header)
    results = cli("results", str(run))
    assert results.returncode == 0, results.stderr
    line = next(x for x in results.stdout.splitlines() if x.startswith("best-config: "))
    found = json.loads(line.removeprefix("best-config: "))
    assert found["cost"]["cost_per_hour"] == 2.5 and found["cost"]["at"] == "capacity"
    assert found["metric"] == "requests_per_cost"
    assert found["cost"]["requests_per_cost"] == pytest.approx(found["value"], rel=1e-3)
    shown = cli("show", str(run))
    assert "cost/Mtok out" in shown.stdout


def test_capacity_per_cost_without_a_price_is_one_clear_error(tmp_path, cli):
    grid = {"defaults": ({}, 4.0)}
    recorded = make_rate_grid_run(tmp_path / "recorded", grid).path
    spec = _recorded_spec(
        tmp_path,
        recorded,
        "tune: {objective: capacity-per-cost, trials: 1, space: {max-num-seqs: {choices: [1]}}}",
    )
    result = cli("tune", spec, "--dry-run")
    assert result.returncode == 2
    assert "capacity-per-cost needs a price" in result.stderr


def test_the_report_of_a_priced_run_shows_cost(tmp_path, cli):
    grid = {"defaults": ({}, 4.0), "mns8": ({"max-num-seqs": 8}, 9.0)}
    recorded = make_rate_grid_run(tmp_path / "recorded", grid).path
    spec = _recorded_spec(
        tmp_path,
        recorded,
        """
cost: {price_per_hour: 30, per: node, currency: EUR}
server:
  variants:
    - {name: defaults}
    - {name: mns8, args: {max-num-seqs: 8}}
""",
    )
    swept = cli("sweep", spec)
    assert swept.returncode == 0, swept.stderr
    run = next((tmp_path / "runs").iterdir())
    html = (run / "report.html").read_text()
    assert "cost/Mtok out" in html and "30.0 EUR per replica-hour" in html
