"""Re-validating a study's winner: the verdict's calibration over many seeds, the choice of
contenders, and a whole `tunebench tune --revalidate` on a noisy recorded run."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests.conftest import invoke
from tunebench.analysis.stats import repeats_change
from tunebench.testing.runs import make_repeats_grid_run
from tunebench.tune.revalidate import Contender, judge


def _judged(best: list[float], runner: list[float]) -> str:
    entries = [
        Contender("best", 3, "t3", "best", {}, 9.0, values=best),
        Contender("runner-up", 2, "t2", "runner", {}, 8.0, values=runner),
    ]
    return judge(entries, repeats_change)["verdict"]


@pytest.mark.parametrize("repeats", [2, 3])
def test_two_equal_configurations_are_a_tie_nearly_always(repeats):
    """A/A from independent draws (between-start sd 5%): "confirmed" means the interval
    excluded no change with the best ahead, a one-sided 2.5% error; allowed up to 5%."""
    rng = np.random.default_rng(11)
    confirmed = 0
    for _ in range(400):
        a = 4.0 * np.exp(rng.normal(0.0, 0.05, repeats))
        b = 4.0 * np.exp(rng.normal(0.0, 0.05, repeats))
        confirmed += _judged(list(b), list(a)) == "confirmed"
    assert confirmed / 400 <= 0.05, confirmed


def test_a_real_lead_is_confirmed_with_three_runs_each():
    rng = np.random.default_rng(12)
    confirmed = 0
    for _ in range(400):
        runner = 4.0 * np.exp(rng.normal(0.0, 0.05, 3))
        best = 5.2 * np.exp(rng.normal(0.0, 0.05, 3))  # +30%
        confirmed += _judged(list(best), list(runner)) == "confirmed"
    assert confirmed / 400 >= 0.80, confirmed


def test_two_configurations_capped_at_max_rate_are_a_tie_said_plainly():
    entries = [
        Contender("best", 0, "t0", "baseline", {}, 4.5, values=[4.5, 4.5]),
        Contender("runner-up", 2, "t2", "mns7", {}, 4.5, values=[4.5, 4.5]),
    ]
    judged = judge(entries, repeats_change)
    assert judged["verdict"] == "tie" and "at max_rate" in judged["verdict_text"]


def test_one_run_a_side_is_inconclusive_not_a_verdict():
    assert _judged([5.0], [4.0]) == "inconclusive"


@pytest.fixture
def noisy_grid(tmp_path):
    return make_repeats_grid_run(
        tmp_path / "recorded",
        {
            "defaults": ({"max-model-len": 512}, 2.0),
            "mns2": ({"max-model-len": 512, "max-num-seqs": 2}, 4.0),
            "mns4": ({"max-model-len": 512, "max-num-seqs": 4}, 6.0),
        },
        rates=(1, 2, 3, 4, 5),
        repeats=3,
        window_s=60.0,
    ).path


def test_tune_on_a_noisy_recorded_run_revalidates_its_winner(tmp_path, noisy_grid):
    spec = tmp_path / "tune.yaml"
    spec.write_text(f"""
name: tune-noisy
model: builtin:tiny-llama-random
deployment: {{kind: recorded, run: {noisy_grid}, noisy: true, seed: 3}}
server:
  args: {{max-model-len: 512}}
load:
  data: {{kind: synthetic, prompt_tokens: 256, output_tokens: 32}}
  profiles:
    - {{kind: capacity, max_seconds: 10, start_rate: 1}}
slo: {{ttft_ms: {{p90: 300}}}}
tune:
  trials: 3
  space:
    max-num-seqs: {{choices: [2, 4]}}
""")
    root = tmp_path / "runs"
    result = invoke(
        "tune",
        str(spec),
        "--root",
        str(root),
        "--helm-dir",
        str(tmp_path / "h"),
        "--revalidate",
        "2",
    )
    assert result.returncode == 0, result.stderr
    (run,) = list(root.iterdir())
    summary = json.loads((run / "tune-result.json").read_text())
    check = summary["revalidation"]
    roles = [c["role"] for c in check["contenders"]]
    assert roles == ["best", "runner-up", "baseline"]
    assert all(len(c["values"]) == 2 and not c["failures"] for c in check["contenders"])
    # mns4 saturates at 6 req/s, the baseline at 2: the lead over the baseline holds
    over_baseline = next(g for g in check["gains"] if g["over"] == "baseline")
    assert over_baseline["holds"] and over_baseline["low"] > 0.5, over_baseline
    assert check["verdict"] in ("confirmed", "tie")
    assert "re-validation:" in result.stdout
    manifest = json.loads((run / "manifest.json").read_text())
    checks = [c for c in manifest["configs"] if "-check" in c["config_id"]]
    assert len(checks) == 6  # 3 contenders x 2 runs, alternated
    assert [c["config_id"].rsplit("-", 1)[1] for c in checks] == ["check1"] * 3 + ["check2"] * 3
    # the noisy recorded run's probes were drawn requests: the probes have samples and windows
    # sized for the p90 (36 requests x 1.25 at the probe's rate)
    requests = (run / "requests").iterdir()
    assert any(path.stat().st_size > 1000 for path in requests)
    assert "Re-validation" in (run / "report.html").read_text()
