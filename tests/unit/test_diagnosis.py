"""Diagnosis: each rule fires on its cause and stays silent on a healthy point; the ranking
says a cause before its symptom. The recorded CPU runs with planted causes
(tests/fixtures/diagnosis-cpu) must name each planted cause first."""

from __future__ import annotations

import json

import pytest

from tests.conftest import FIXTURES, invoke
from tunebench.points.diagnosis import (
    RULES,
    THRESHOLDS,
    diagnose_point,
    diagnose_run,
    facts_for,
    hints,
)
from tunebench.store.run import read_points

HEALTHY = {
    "point_id": "concurrent-1",
    "valid": "True",
    "client_limited": "False",
    "queue_depth_mean": 0.01,
    "waiting_mean": 0.0,
    "running_max": 1,
    "kv_usage_max": 0.05,
    "preemptions": 0,
    "queue_time_mean_s": 0.001,
    "prefill_time_mean_s": 0.01,
    "decode_time_mean_s": 0.2,
    "prompt_tokens_mean": 256,
}


def _rules(row: dict, args: dict | None = None) -> list[str]:
    config = {"config_id": "c1", "args": args or {}, "effective": {}}
    return [f.rule for f in diagnose_point(facts_for({**HEALTHY, **row}, config))]


def test_a_healthy_point_has_no_finding():
    assert _rules({}, {"max-num-seqs": 2, "max-num-batched-tokens": 2048}) == []


def test_requests_waiting_at_the_max_num_seqs_cap_with_room_in_the_kv_cache():
    row = {"queue_depth_mean": 5.8, "running_max": 2, "kv_usage_max": 0.02}
    assert _rules(row, {"max-num-seqs": 2}) == ["scheduler-limited"]
    assert _rules(row, {"max-num-seqs": 8}) == ["over-capacity"]  # below its cap: not the cap
    assert _rules(row) == ["over-capacity"]  # cap unknown: no claim about it


def test_a_full_kv_cache_is_the_cause_and_the_queue_its_symptom():
    row = {"queue_depth_mean": 4.0, "running_max": 2, "kv_usage_max": 0.98, "preemptions": 3}
    assert _rules(row, {"max-num-seqs": 2}) == ["kv-limited"]
    assert _rules({"preemptions": 1}) == ["kv-limited"]  # preemptions alone suffice


def test_a_kv_cache_too_full_for_the_next_prompt_is_full():
    row = {"queue_depth_mean": 4.0, "running_max": 1, "kv_usage_max": 0.75}
    config = {"config_id": "c1", "args": {}, "effective": {"kv_capacity_tokens": 512}}
    found = diagnose_point(facts_for({**HEALTHY, **row}, config))
    # 128 tokens left, a 256-token prompt waiting
    assert [f.rule for f in found] == ["kv-limited"]
    roomy = {"config_id": "c1", "args": {}, "effective": {"kv_capacity_tokens": 262144}}
    assert [f.rule for f in diagnose_point(facts_for({**HEALTHY, **row}, roomy))] == [
        "over-capacity"
    ]


def test_long_prompts_through_a_small_prefill_budget():
    row = {"prefill_time_mean_s": 0.04, "itl_p50_ms": 3.5, "ttft_p50_ms": 43.0}
    assert _rules(row, {"max-num-batched-tokens": 32}) == ["prefill-limited"]  # 8 steps
    assert _rules(row, {"max-num-batched-tokens": 128}) == []  # 2 steps: ordinary chunking
    assert _rules(row) == []  # budget unknown: no claim about it
    # a prefill far quicker than its steps would take is not held up by them
    assert _rules({**row, "prefill_time_mean_s": 0.005}, {"max-num-batched-tokens": 32}) == []


def test_a_client_bound_point_is_said_alone():
    row = {"client_limited": "True", "client_limited_reason": "client starved", "preemptions": 5}
    assert _rules(row) == ["client-bound"]


def test_wasted_speculation():
    assert _rules({"spec_acceptance_rate": 0.1}) == ["speculation-wasted"]
    assert _rules({"spec_acceptance_rate": 0.8}) == []


def test_every_rule_has_an_id_a_rank_and_documented_reads():
    ids = [rule.id for rule in RULES]
    assert len(ids) == len(set(ids))
    assert all(rule.reads for rule in RULES)
    assert set(THRESHOLDS) == {"queue_depth", "kv_full", "prefill_steps", "spec_acceptance"}


def test_findings_carry_their_numbers_and_hints_point_the_way():
    rows = [
        {
            **HEALTHY,
            "config_id": "c1",
            "point_id": "concurrent-8",
            "queue_depth_mean": 5.8,
            "running_max": 2,
            "kv_usage_max": 0.02,
            "queue_time_mean_s": 0.8,
        },
    ]
    configs = [{"config_id": "c1", "label": "mns2", "args": {"max-num-seqs": 2}}]
    (finding,) = diagnose_run(rows, configs)
    assert finding.rule == "scheduler-limited" and finding.points == ("concurrent-8",)
    assert (
        "5.8 on average, 800 ms each" in finding.cause and "max-num-seqs cap (2)" in finding.cause
    )
    assert "raise max-num-seqs (e.g. to 4)" in finding.suggestion
    assert hints([finding], "c1") == {"max-num-seqs": "up"}


# -- recorded CPU runs with planted causes -------------------------------------------------

DIAGNOSIS = FIXTURES / "diagnosis-cpu"
PLANTED = {"mns2": "scheduler-limited", "kv-small": "kv-limited", "mnbt32": "prefill-limited"}


def _recorded(name: str):
    run = DIAGNOSIS / name
    manifest = json.loads((run / "manifest.json").read_text())
    return read_points(run), manifest["configs"]


@pytest.mark.parametrize("label, cause", sorted(PLANTED.items()))
def test_each_planted_cause_is_named_first_on_the_real_cpu_server(label, cause):
    rows, configs = _recorded("planted")
    config = next(c for c in configs if c["label"] == label)
    at_8 = [r for r in rows if r["config_id"] == config["config_id"]]
    at_8 = [r for r in at_8 if r["point_id"] == "concurrent-8"]
    findings = diagnose_point(facts_for(at_8[0], config))
    assert findings and findings[0].rule == cause, [f.cause for f in findings]


def test_the_healthy_configuration_has_no_finding_nor_does_a_cap_that_is_not_reached():
    rows, configs = _recorded("planted")
    healthy = next(c for c in configs if c["label"] == "healthy")
    assert diagnose_run(rows, [healthy]) == []  # at 1 and at 8 streams
    mns2 = next(c for c in configs if c["label"] == "mns2")
    light = [r for r in rows if r["config_id"] == mns2["config_id"]]
    light = [r for r in light if r["point_id"] == "concurrent-1"]
    assert diagnose_point(facts_for(light[0], mns2)) == []  # one stream never meets the cap


def test_a_client_that_shares_the_servers_cores_is_named():
    rows, configs = _recorded("shared-client")
    (finding, *_) = diagnose_run(rows, configs)
    assert finding.rule == "client-bound" and "client starved" in finding.cause


def test_explain_on_an_imported_run_cannot_diagnose_rather_than_call_it_healthy(tmp_path, cli):
    """GuideLLM's report alone: no server metrics, so no green "no finding" line."""
    from tests.conftest import FIXTURES

    report = FIXTURES / "guidellm/v0.8.1-mns2-c1-c8.json"
    assert cli("import", str(report), "--name", "g08", "--root", str(tmp_path)).returncode == 0
    said = cli("explain", "g08", "--root", str(tmp_path))
    assert said.returncode == 0, said.stderr
    assert "cannot diagnose: no server metrics" in said.stdout
    assert "no finding" not in said.stdout
    as_json = json.loads(cli("explain", "g08", "--root", str(tmp_path), "--json").stdout)
    assert [f["rule"] for f in as_json] == ["cannot-diagnose"]


def test_explain_on_a_run_with_server_metrics_reads_them(tmp_path, cli):
    from tunebench.testing import make_synthetic_run

    store = make_synthetic_run(tmp_path, configs=2, streams=(1, 8))
    said = cli("explain", store.path.name, "--root", str(tmp_path))
    assert said.returncode == 0, said.stderr
    assert "cannot diagnose" not in said.stdout
    assert said.stdout.count("c1") >= 1 and said.stdout.count("c2") >= 1


def test_explain_on_a_recorded_run_with_repeats_names_each_point_once():
    # grid-cpu-repeats: 3 starts of every configuration, the same point ids in each
    result = invoke("explain", str(FIXTURES / "grid-cpu-repeats"), "mns1-mnbt32")
    assert result.returncode == 0, result.stderr
    lines = [line.strip() for line in result.stdout.splitlines()]
    at_lines = [line for line in lines if line.startswith("at:")]
    assert at_lines, result.stdout
    for line in at_lines:
        points = line.removeprefix("at:").split(",")
        assert len(points) == len(set(points)), line
    assert "scheduler-limited" in result.stdout and "max-num-seqs" in result.stdout


def test_explain_of_a_directory_that_is_no_run_is_a_one_line_error(tmp_path):
    result = invoke("explain", str(tmp_path))
    assert result.returncode == 2  # a run not found: a wrong path (PathError), as in every command
    assert not result.stdout and "no run" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr


# -- issue 46, item 13: advice that fits the spec, arithmetic that adds up -------------------


def test_a_client_bound_point_of_a_client_with_its_own_cores_is_not_told_to_get_them(tmp_path):
    import csv
    import shutil

    run = tmp_path / "planted"
    shutil.copytree(DIAGNOSIS / "planted", run)  # its spec: load.client_cpus "1"
    with open(run / "points.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    for row in rows:
        if row["point_id"] == "concurrent-8":
            row["client_limited"] = "True"
            row["client_limited_reason"] = "the load generator waited for a CPU 82% of the time"
    with open(run / "points.csv", "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    said = invoke("explain", str(run))
    assert said.returncode == 0, said.stderr
    text = " ".join(said.stdout.split())
    assert "client-bound" in text
    assert "give the client cores of its own" not in text
    assert "the client already has cores of its own (load.client_cpus '1')" in text
    # a spec without them is still told to give them
    rows, configs = _recorded("shared-client")
    (finding, *_) = diagnose_run(rows, configs)
    assert finding.suggestion.startswith("give the client cores of its own")


def test_the_prefill_finding_adds_up():
    import re

    rows, configs = _recorded("planted")
    config = next(c for c in configs if c["label"] == "mnbt32")
    mine = [r for r in rows if r["config_id"] == config["config_id"]]
    (row,) = [r for r in mine if r["point_id"] == "concurrent-8"]
    (finding, *_) = diagnose_point(facts_for(row, config))
    assert finding.rule == "prefill-limited"
    found = re.search(
        r"in (\d+) scheduler steps .*: (\d+) ms of prefill per request, (\d+) ms per step "
        r"\(a decode step takes ([\d.]+) ms\)",
        finding.cause,
    )
    assert found, finding.cause
    steps, total, per_step, _decode = (float(x) for x in found.groups())
    # the figures it prints multiply out to the total it prints (to its rounding)
    assert abs(steps * per_step - total) <= steps, finding.cause
    assert per_step == round(float(row["prefill_time_mean_s"]) * 1000 / steps)
