"""The quality tables at 100 columns: every configuration's label is whole (short arg names
and a legend, the other columns wrap), and the lm-eval column is explained, including a 0 in
every configuration (a random-weights model answers nothing right)."""

from __future__ import annotations

import io

import pandas as pd
from rich.console import Console

from tunebench.quality.verdicts import COLUMNS
from tunebench.report.quality_tables import quality_change_table, quality_view

LABELS = {
    "c1": "max-num-seqs=8, kv-cache-dtype=auto, max-num-batched-tokens=2048",
    "c2": "max-num-seqs=8, kv-cache-dtype=fp8, max-num-batched-tokens=2048",
    "c3": "max-num-seqs=8, kv-cache-dtype=fp8, max-num-batched-tokens=4096",
}
LM_EVAL = {"task": "tunebench_arithmetic", "metric": "exact_match", "samples": 20}


def _frame(score: float) -> pd.DataFrame:
    rows = []
    for config_id, label in LABELS.items():
        reference = config_id == "c1"
        rows.append(
            {
                **dict.fromkeys(COLUMNS),
                "config_id": config_id,
                "label": label,
                "compared_with": "" if reference else "c1",
                "prompts": 16,
                "exact_match": 1.0 if reference else 0.06,
                "token_agreement": 1.0 if reference else 0.26,
                "top1_agreement": 1.0 if reference else 0.93,
                "mean_kl": 0.0 if reference else 8.91e-05,
                "mean_tv": 0.0 if reference else 0.002,
                "near_ties": 3,
                "lm_eval_score": score,
                "seconds": 5.2,
                "verdict": "reference" if reference else "fail",
                "reasons": "" if reference else "token agreement 26% < 50%",
            }
        )
    return pd.DataFrame(rows, columns=COLUMNS)


def _printed(renderable) -> str:
    out = io.StringIO()
    Console(file=out, width=100, highlight=False).print(renderable)
    return out.getvalue()


def test_labels_are_whole_at_100_columns():
    text = _printed(quality_view(_frame(0.0), LM_EVAL))
    for config_id, kv, mnbt in (("c1", "auto", 2048), ("c2", "fp8", 2048), ("c3", "fp8", 4096)):
        assert f"{config_id} mns=8,kv={kv},mnbt={mnbt}" in text
    assert "config: mns = max-num-seqs; kv = kv-cache-dtype" in text
    assert "c2 mns=8,kv=fp8,mnbt=2048: fail: token agreement 26% < 50%" in text
    header = next(line for line in text.splitlines() if "config" in line and "gate" in line)
    assert "lm-eval" in header  # a score's column is kept: the note below is about it
    assert all(len(line) <= 100 for line in text.splitlines())


def test_an_lm_eval_of_0_everywhere_is_explained():
    text = " ".join(_printed(quality_view(_frame(0.0), LM_EVAL)).split())
    assert "lm-eval: exact_match on tunebench_arithmetic of 20 questions, 0 to 1" in text
    assert "0 in every configuration: the model answered none right" in text
    other = " ".join(_printed(quality_view(_frame(0.85), LM_EVAL)).split())
    assert "lm-eval: exact_match" in other and "none right" not in other


def test_the_change_table_keeps_labels_whole_too():
    rows = [
        {
            "run": "after",
            "config_id": config_id,
            "label": label,
            "baseline_config": config_id,
            "exact_match": 0.5,
            "token_agreement": 0.6,
            "top1_agreement": 0.9,
            "mean_kl": 1e-4,
            "lm_eval_change": 0.0,
        }
        for config_id, label in LABELS.items()
    ]
    text = _printed(quality_change_table(rows))
    assert "c3 mns=8,kv=fp8,mnbt=4096" in text
