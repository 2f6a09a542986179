"""The one best configuration of a run, and a run's verdict, small enough for a pipeline result.

The rule, in order (a tune run's own answer comes first):
  1. a tune run: the best trial of `tune-result.json` (its objective, e.g. capacity at SLO;
     with the re-validation's verdict on its lead when the study ran one);
  2. a capacity search: the configuration with the highest capacity (req/s at the SLO);
  3. a run with an SLO and fixed request rates (poisson, constant): the configuration that
     sustains the highest rate within the SLO, by the rule the replay, the benchmarks and
     the capacity search share (points/capacity.py `sustained_capacity`: the SLO must hold
     at every rate up to it; the median over repeats);
  4. a run with an SLO: the configuration whose best point has the highest goodput_rps
     (requests/s that met every threshold; output tok/s when the run has no per-request
     samples, e.g. a replay), among points that met the SLO below the configuration's
     first miss (if none did: among all, flagged `slo_met: false`);
  5. otherwise: the configuration whose best point has the highest output tok/s.
A configuration that fails the run's quality gate (analysis/quality.py) is never best, by
any rule: it is fast at answering wrong. Rules 3 to 5 use valid points the client did not
hold back; when every valid point was client-limited rules 4 and 5 fall back to those, and
say so (`client_limited: true`).

Verdicts: a sweep or tune run's is its status (complete, failed, interrupted); a
comparison's is `regression` or `no-regression` (see `compare_verdict`).
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

import pandas as pd

from tunebench.analysis.frames import load_manifest, load_run, run_path
from tunebench.analysis.quality import failing
from tunebench.numbers import to_float
from tunebench.points import trust
from tunebench.points.capacity import RatePoint, sustained_capacity
from tunebench.points.cost import at_rate, replica_price

RATE_KINDS = ("poisson", "constant")

# Tekton keeps all results of a step in one 4 KB termination message, with JSON quoting.
MAX_BEST_CONFIG_BYTES = 1500


def _config(manifest: dict, config_id: str) -> dict:
    return next((c for c in manifest.get("configs", []) if c.get("config_id") == config_id), {})


def _from_tune(path: Path, manifest: dict) -> dict[str, Any] | None:
    result_file = path / "tune-result.json"
    if not result_file.is_file():
        return None
    result = json.loads(result_file.read_text())
    best = result.get("best")
    if not best:
        return None
    names = result.get("objective_names") or [result.get("objective")]
    values = best.get("values") or []
    config = _config(manifest, best.get("config_id") or "")
    out = {
        "config_id": best.get("config_id"),
        "label": config.get("label", f"t{best.get('trial')}"),
        "model": config.get("model"),
        "args": best.get("args") or config.get("args") or {},
        "rule": "tune",
        "metric": names[0] if names else None,
        "value": _round(values[0]) if values else None,
        "trial": best.get("trial"),
    }
    if result.get("improvement_pct") is not None:
        out["improvement_pct"] = _round(result["improvement_pct"])
    check = result.get("revalidation")
    if check:  # the re-runs' verdict on the lead: confirmed, tie or inconclusive
        out["revalidation"] = check.get("verdict")
    return out


def _from_capacity(manifest: dict, excluded: set[str]) -> dict[str, Any] | None:
    found = [
        c
        for c in manifest.get("configs", [])
        if (c.get("capacity") or {}).get("rate") is not None and c["config_id"] not in excluded
    ]
    if not found:
        return None
    best = max(found, key=lambda c: c["capacity"]["rate"])
    out = _describe(best, "capacity", "capacity_rps", best["capacity"]["rate"])
    if best["capacity"].get("client_bound"):
        out["client_bound"] = True
    return out


def _from_rates(points: pd.DataFrame, manifest: dict) -> dict[str, Any] | None:
    """Rule 3: the highest sustained rate within the SLO (median over repeats)."""
    rates = points[points["load_kind"].isin(RATE_KINDS) & points["target"].notna()]
    found: dict[str, float] = {}
    for config_id, rows in rates.groupby("config_id", sort=False):
        per_repeat = []
        group_by = ["load_kind", "repeat"] if "repeat" in rows else ["load_kind"]
        for _key, window in rows.groupby(group_by, sort=False, dropna=False):
            counted = [
                RatePoint(
                    float(r["target"]),
                    r["slo_met"] == True,  # noqa: E712
                    to_float(r.get("slo_ratio")),
                    r.get("client_limited") == True,  # noqa: E712
                )
                for _, r in window.iterrows()
                if r["valid"] == True  # noqa: E712
            ]
            capacity = sustained_capacity(counted)
            if capacity is not None:
                per_repeat.append(0.0 if capacity.kind == "below" else capacity.rate)
        if per_repeat:
            found[str(config_id)] = statistics.median(per_repeat)
    if not found or max(found.values()) <= 0:
        return None
    best = max(found, key=lambda c: found[c])
    config = _config(manifest, best) or {"config_id": best}
    return _describe(config, "slo-capacity", "capacity_rps", found[best])


def _below_first_miss(points: pd.DataFrame) -> pd.DataFrame:
    """The points that count under an SLO: for each configuration, load kind and repeat,
    those at targets below its first miss (a pass above a miss is luck, not capacity)."""
    keep = []
    keys = [k for k in ("config_id", "load_kind", "repeat") if k in points]
    for _key, group in points.groupby(keys, sort=False, dropna=False):
        ordered = group.sort_values("target", na_position="first")
        missed = False
        for index, row in ordered.iterrows():
            if pd.isna(row["target"]):
                keep.append(index)
                continue
            missed = missed or row["slo_met"] == False  # noqa: E712
            if not missed:
                keep.append(index)
    return points.loc[keep]


def _from_points(path: Path, manifest: dict, excluded: set[str]) -> dict[str, Any] | None:
    points = load_run(path)
    if excluded and not points.empty:
        points = points[~points["config_id"].isin(excluded)]
    if points.empty or "valid" not in points or "output_tok_s" not in points:
        return None
    has_slo = bool((manifest.get("spec") or {}).get("slo")) and "slo_met" in points
    # Object columns of True/False/None: compare with == True, not truthiness.
    valid = points[points["valid"] == True]  # noqa: E712
    if has_slo:
        by_rate = _from_rates(valid, manifest)
        if by_rate is not None:
            return by_rate
    server_bound = valid[valid["client_limited"] != True] if "client_limited" in valid else valid  # noqa: E712
    candidates = server_bound if not server_bound.empty else valid
    met = candidates[candidates["slo_met"] == True] if has_slo else candidates  # noqa: E712
    if has_slo:
        met = met.loc[met.index.intersection(_below_first_miss(candidates).index)]
    pool = met if not met.empty else candidates
    goodput = pool["goodput_rps"].notna().any() if has_slo and "goodput_rps" in pool else False
    metric = "goodput_rps" if goodput else "output_tok_s"
    rule = ("slo-goodput" if goodput else "slo-throughput") if has_slo else "throughput"
    pool = pool[pool[metric].notna()]
    if pool.empty:
        return None
    row = pool.loc[pool[metric].idxmax()]
    config = _config(manifest, row["config_id"]) or {
        "config_id": row["config_id"],
        "label": row["config_label"],
    }
    out = {**_describe(config, rule, metric, row[metric]), "point": row["point_id"]}
    if met.empty:
        out["slo_met"] = False
    if server_bound.empty:
        out["client_limited"] = True
    return out


def _describe(config: dict, rule: str, metric: str, value: Any) -> dict[str, Any]:
    return {
        "config_id": config.get("config_id"),
        "label": config.get("label"),
        "model": config.get("model"),
        "args": config.get("args") or {},
        "rule": rule,
        "metric": metric,
        "value": _round(value),
    }


def _round(value: Any) -> Any:
    number = to_float(value)
    return None if number is None else float(f"{number:.4g}")


def best_config(run: str | Path, root: str | Path = "reports") -> dict[str, Any] | None:
    """The best configuration of a run by the rule in this module's docstring; None if no point."""
    path = run_path(run, root)
    manifest = load_manifest(path)
    excluded = failing(path)
    best = (
        _from_tune(path, manifest)
        or _from_capacity(manifest, set(excluded))
        or _from_points(path, manifest, set(excluded))
    )
    if best is not None and excluded:
        best["quality_excluded"] = excluded  # config_id -> why it failed the quality gate
    if best is not None:
        unchecked = _unverified_of(path, str(best.get("config_id")))
        if unchecked:
            # never "best" without saying what of it no check confirmed
            best["unverified"] = unchecked
        cost = _cost_of(best, manifest, path)
        if cost:
            best["cost"] = cost
    return best


def _unverified_of(path: Path, config_id: str) -> list[str]:
    """What could not be checked on the configuration's valid points (trust.py)."""
    points = load_run(path)
    if points.empty:
        return []
    found: list[str] = []
    for row in points[points["config_id"] == config_id].to_dict(orient="records"):
        if trust.is_valid(row):
            found += [r for r in trust.unverified_reasons(row) if r not in found]
    return found


def _cost_of(best: dict[str, Any], manifest: dict, path: Path) -> dict[str, Any] | None:
    """With `cost:` in the spec: the best configuration's price per replica-hour and, at its
    capacity@SLO (when the rule measured one), requests per cost unit and cost per million
    output tokens; otherwise the cheapest output tokens among its valid points."""
    cost = (manifest.get("spec") or {}).get("cost")
    if not cost:
        return None
    config = _config(manifest, str(best.get("config_id")))
    price = replica_price(cost, config.get("args") or best.get("args") or {})
    points = load_run(path)
    mine = points[(points["config_id"] == best.get("config_id")) & (points["valid"] == True)]  # noqa: E712
    tokens = pd.to_numeric(mine.get("output_tokens_mean"), errors="coerce").mean()
    rate = (
        best.get("value")
        if best.get("metric") == "capacity_rps"
        else (config.get("capacity") or {}).get("rate")
    )
    if rate:
        out = at_rate(price, float(rate), None if pd.isna(tokens) else float(tokens))
        out["at"] = "capacity"
    else:
        priced = pd.to_numeric(mine.get("cost_per_mtok_output"), errors="coerce").dropna()
        if priced.empty:
            return {"cost_per_hour": price, "currency": cost.get("currency", "USD")}
        row = mine.loc[priced.idxmin()]
        out = {
            "cost_per_hour": price,
            "cost_per_mtok_output": float(row["cost_per_mtok_output"]),
            "requests_per_cost": to_float(row.get("requests_per_cost")),
            "at": str(row["point_id"]),
        }
    out["currency"] = cost.get("currency", "USD")
    return {k: (_round(v) if isinstance(v, float) else v) for k, v in out.items()}


def compact(best: dict[str, Any] | None, limit: int = MAX_BEST_CONFIG_BYTES) -> str:
    """Compact JSON of a best configuration, within `limit` bytes (long values dropped first)."""
    if best is None:
        return "{}"
    data = {k: v for k, v in best.items() if v is not None}
    text = json.dumps(data, separators=(",", ":"), sort_keys=False, default=str)
    for key in ("quality_excluded", "model", "label"):
        if len(text.encode()) <= limit:
            break
        data.pop(key, None)
        text = json.dumps(data, separators=(",", ":"), default=str)
    if len(text.encode()) > limit:
        data = {k: data[k] for k in ("config_id", "rule", "metric", "value") if k in data}
        data["args_truncated"] = True
        text = json.dumps(data, separators=(",", ":"), default=str)
    return text


def run_verdict(run: str | Path, root: str | Path = "reports") -> str:
    """A sweep or tune run's verdict: its status (complete, failed, interrupted, running)."""
    return str(load_manifest(run, root).get("status") or "unknown")


def compare_verdict(comparison: dict[str, Any]) -> str:
    """`regression`, `unverified` or `no-regression` from `tunebench compare --json` output.

    With --fail-on-regression PCT the gate it recorded decides; without one, any metric that
    got significantly worse is a regression.
    """
    gate = comparison.get("gate")
    if gate:
        return str(gate["verdict"])
    rows = comparison.get("rows", [])
    if any(r.get("verdict") == "worse" for r in rows):
        return "regression"
    # fail closed without a gate too: a candidate point that is missing or invalid was not
    # compared, so "no regression" would be a claim nothing checked
    blind = comparison.get("missing") or any(
        str(r.get("verdict", "")).startswith("excluded (") and "B invalid: " in str(r["verdict"])
        for r in rows
    )
    return "unverified" if blind else "no-regression"
