"""Every configuration of a run judged against its reference: the one rule that the
quality table (analysis/quality.py), `results` and the tuner share.

The reference is `quality.reference` (a config id or label), else the first configuration
that collected completions (a tune run's baseline trial). A configuration with speculative
decoding is held to its non-speculative twin (the configuration whose args are the same
without `speculative-config`) when the run has one, else to the reference, and must match
it exactly (gate.py).
"""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any

from tunebench.quality.collect import Completion, read_completions
from tunebench.quality.divergence import Divergence, compare
from tunebench.quality.gate import Thresholds, judge
from tunebench.store.files import write_atomic
from tunebench.store.layout import RunLayout
from tunebench.store.manifest import ConfigEntry, ConfigStatus
from tunebench.store.run import RunStore

SPECULATIVE_KEYS = ("speculative-config", "speculative_config")
COLUMNS = [
    "config_id",
    "label",
    "compared_with",
    "prompts",
    "exact_match",
    "token_agreement",
    "top1_agreement",
    "mean_kl",
    "mean_tv",
    "median_divergence",
    "median_agreement",
    "near_ties",
    "margin_noise",
    "lm_eval_score",
    "seconds",
    "verdict",
    "reasons",
]


def is_speculative(args: dict[str, Any]) -> bool:
    return any(args.get(key) not in (None, False, "") for key in SPECULATIVE_KEYS)


def thresholds_of(quality: dict[str, Any]) -> Thresholds:
    defaults = Thresholds()
    return Thresholds(
        **{
            name: quality.get(name, getattr(defaults, name))
            for name in Thresholds.__dataclass_fields__
        }
    )


def load_completions(layout: RunLayout, configs: list[ConfigEntry]) -> dict[str, list[Completion]]:
    found = {}
    for config in configs:
        path = layout.quality(config.config_id)
        if path.is_file():
            found[config.config_id] = read_completions(path)
    return found


def judge_configs(
    configs: list[ConfigEntry],
    completions: dict[str, list[Completion]],
    quality: dict[str, Any],
) -> list[dict[str, Any]]:
    """One row per configuration of the manifest: compared_with, the figures
    of divergence.py, `verdict` (pass | fail | reference | not-checked) and `reasons`."""
    reference = _reference(configs, quality.get("reference"), completions)
    thresholds = thresholds_of(quality)
    rows = []
    for config in configs:
        config_id, args = config.config_id, config.args
        info = config.quality or {}
        row: dict[str, Any] = {
            "config_id": config_id,
            "label": config.label or config_id,
            "seconds": info.get("seconds"),
        }
        if config_id not in completions:
            why = info.get("error") or (
                "the server did not start" if config.status == ConfigStatus.FAILED else "not run"
            )
            rows.append(row | {"verdict": "not-checked", "reasons": why})
            continue
        speculative = is_speculative(args)
        other = (_twin(configs, args, completions) if speculative else None) or reference
        if other is None:
            named = quality.get("reference") or "the first configuration"
            rows.append(row | {"verdict": "not-checked", "reasons": f"{named} has no answers"})
            continue
        if other == config_id:
            why = "the reference: no non-speculative twin to hold it to" if speculative else ""
            rows.append(row | {"verdict": "reference", "reasons": why})
            continue
        found = compare(completions[other], completions[config_id])
        reasons = judge(found, thresholds, speculative)
        reasons += lm_eval_reasons(config, _entry(configs, other), quality.get("lm_eval"))
        rows.append(
            row
            | figures(found)
            | {
                "compared_with": other,
                "verdict": "fail" if reasons else "pass",
                "reasons": "; ".join(reasons),
            }
        )
    for row in rows:
        row["lm_eval_score"] = lm_eval_score(_entry(configs, row["config_id"]))
    return rows


def blocking_reason(row: dict[str, Any]) -> str | None:
    """Why a configuration's quality row keeps it from being a candidate: it failed, or it
    could not be checked (fail closed: an unchecked configuration is not a passing one).
    None for `pass` and `reference`."""
    if row["verdict"] == "fail":
        return str(row["reasons"])
    if row["verdict"] == "not-checked":
        return f"quality not checked: {row['reasons']}"
    return None


def _entry(configs: list[ConfigEntry], config_id: str) -> ConfigEntry | None:
    return next((c for c in configs if c.config_id == config_id), None)


def lm_eval_score(config: ConfigEntry | None) -> float | None:
    if config is None:
        return None
    found = ((config.quality or {}).get("lm_eval") or {}).get("score")
    return float(found) if isinstance(found, (int, float)) else None


def lm_eval_reasons(
    config: ConfigEntry, reference: ConfigEntry | None, settings: dict | None
) -> list[str]:
    """Why the configuration's lm-eval score fails: it did not run, it is under
    `min_score`, or it is more than `max_drop` under the reference's."""
    if not settings:
        return []
    result = (config.quality or {}).get("lm_eval") or {}
    if result.get("error"):
        return [f"lm-eval failed: {result['error']}"]
    score, reference_score = lm_eval_score(config), lm_eval_score(reference)
    if score is None:
        return ["lm-eval did not run"]
    reasons = []
    floor = settings.get("min_score")
    if floor is not None and score < floor:
        reasons.append(f"lm-eval {result.get('metric')} {score:.3f} < {floor:g}")
    drop = settings.get("max_drop", 0.05)
    if drop is not None and reference_score is not None and score < reference_score - drop:
        reasons.append(
            f"lm-eval {result.get('metric')} {score:.3f} is {reference_score - score:.3f} under "
            f"the reference's {reference_score:.3f} (max_drop {drop:g})"
        )
    return reasons


def figures(found: Divergence) -> dict[str, Any]:
    return {
        "prompts": found.prompts,
        "exact_match": round(found.exact_match, 4),
        "token_agreement": round(found.token_agreement, 4),
        "top1_agreement": None if found.top1_agreement is None else round(found.top1_agreement, 4),
        "mean_kl": None if found.mean_kl is None else float(f"{found.mean_kl:.4g}"),
        "mean_tv": None if found.mean_tv is None else float(f"{found.mean_tv:.4g}"),
        "median_divergence": found.median_divergence,
        "median_agreement": None
        if found.median_agreement is None
        else round(found.median_agreement, 4),
        "near_ties": found.near_ties,
        "margin_noise": None if found.margin_noise is None else round(found.margin_noise, 4),
    }


def _reference(
    configs: list[ConfigEntry], named: str | None, completions: dict[str, list[Completion]]
) -> str | None:
    if named is not None:
        for config in configs:
            if named in (config.config_id, config.label):
                return config.config_id if config.config_id in completions else None
        return None
    return next((c.config_id for c in configs if c.config_id in completions), None)


def _twin(
    configs: list[ConfigEntry], args: dict[str, Any], completions: dict[str, list[Completion]]
) -> str | None:
    plain = {k: v for k, v in args.items() if k not in SPECULATIVE_KEYS}
    for config in configs:
        other = config.args
        if not is_speculative(other) and other == plain and config.config_id in completions:
            return config.config_id
    return None


def judge_run(store: RunStore) -> list[dict[str, Any]]:
    """`judge_configs` over a run's manifest and stored answers ([] without a check)."""
    manifest = store.manifest
    quality = (manifest.spec or {}).get("quality")
    if quality is None:  # `quality: {}` is a check with every default, not none
        return []
    configs = manifest.configs
    return judge_configs(configs, load_completions(store.layout, configs), quality)


def gate_failure(store: RunStore, config_id: str) -> str | None:
    """Why this configuration fails the quality gate against the baseline, or could not be
    checked (None: it passes, is the reference, or the run has no quality check); the
    quality table is written on the way."""
    rows = judge_run(store)
    if rows:
        write_table(store)
    mine = next((r for r in rows if r["config_id"] == config_id), None)
    return blocking_reason(mine) if mine else None


def write_table(store: RunStore) -> Path | None:
    """The run's quality table as `quality/summary.csv` (None without a check)."""
    rows = judge_run(store)
    if not rows:
        return None
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=COLUMNS, extrasaction="ignore")
    writer.writeheader()
    writer.writerows(rows)
    path = store.layout.quality_table
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, buffer.getvalue())
    return path
