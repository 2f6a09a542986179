"""A run's quality table: each configuration's divergence from its reference and the gate's
verdict, by the rule in tunebench/quality/verdicts.py."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from tunebench.analysis.frames import read_manifest, run_path
from tunebench.quality.divergence import compare
from tunebench.quality.verdicts import (
    COLUMNS,
    blocking_reason,
    figures,
    judge_configs,
    lm_eval_score,
    load_completions,
)
from tunebench.store.layout import RunLayout
from tunebench.store.manifest import ConfigEntry


def quality_table(run: str | Path, root: str | Path = "reports") -> pd.DataFrame:
    """One row per configuration of a run with a quality check (an empty frame otherwise)."""
    path = run_path(run, root)
    manifest = read_manifest(path)
    quality = (manifest.spec or {}).get("quality")
    if quality is None:  # `quality: {}` is a check with every default, not none
        return pd.DataFrame(columns=COLUMNS)
    configs = manifest.configs
    rows = judge_configs(configs, load_completions(RunLayout(path), configs), quality)
    return pd.DataFrame(rows, columns=COLUMNS)


def failing(run: str | Path, root: str | Path = "reports") -> dict[str, str]:
    """config_id -> why it fails the quality gate: it failed, or could not be checked."""
    table = quality_table(run, root)
    found = {}
    for row in table.to_dict(orient="records"):
        why = blocking_reason(row)
        if why is not None:
            found[str(row["config_id"])] = why
    return found


def quality_between(runs: list[str], root: str | Path = "reports") -> list[dict]:
    """Each later run's configurations against the first run's (paired by label, else by
    position): how far their answers moved, and the lm-eval score change. Empty when the
    first run has no quality check."""
    base_path = run_path(runs[0], root)
    base_configs = read_manifest(base_path).configs
    base = load_completions(RunLayout(base_path), base_configs)
    if not base:
        return []
    out = []
    for run in runs[1:]:
        path = run_path(run, root)
        configs = read_manifest(path).configs
        mine = load_completions(RunLayout(path), configs)
        for position, config in enumerate(configs):
            partner = _partner(base_configs, config, position)
            if partner is None or partner.config_id not in base:
                continue
            if config.config_id not in mine:
                continue
            found = compare(base[partner.config_id], mine[config.config_id])
            before, after = lm_eval_score(partner), lm_eval_score(config)
            out.append(
                {
                    "run": path.name,
                    "config_id": config.config_id,
                    "label": config.label,
                    "baseline_config": partner.config_id,
                    **figures(found),
                    "lm_eval_baseline": before,
                    "lm_eval": after,
                    "lm_eval_change": None
                    if before is None or after is None
                    else round(after - before, 4),
                }
            )
    return out


def _partner(
    base_configs: list[ConfigEntry], config: ConfigEntry, position: int
) -> ConfigEntry | None:
    label = config.label
    same = [c for c in base_configs if label and c.label == label]
    if same:
        return same[0]
    return base_configs[position] if position < len(base_configs) else None
