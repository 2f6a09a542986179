"""The one best configuration of a run, and a run's verdict, small enough for a pipeline result.

The rule, in order (a tune run's own answer comes first):
  1. a tune run: the best trial of `tune-result.json` (its objective, e.g. capacity at SLO;
     with the re-validation's verdict on its lead when the study ran one);
  2. a capacity search: the configuration with the highest capacity (req/s at the SLO);
  3. a run with an SLO and fixed request rates (poisson, constant): the configuration that
     sustains the highest rate within the SLO, by the rule the recorded deployment, the
     benchmarks and the capacity search share (points/sustained.py `sustained_capacity`: the
     SLO must hold at every rate up to it; the median over repeats);
  4. a run with an SLO: the configuration whose best point has the highest goodput_rps
     (requests/s that met every threshold; output tok/s when the run has no per-request
     samples, e.g. a recorded run), among points that met the SLO below the configuration's
     first miss (if none did: among all, flagged `slo_met: false`);
  5. otherwise: the configuration whose best point has the highest output tok/s.
A configuration that fails the run's quality gate (analysis/quality.py) is never best, by
any rule: it is fast at answering wrong. Rules 3 to 5 use valid points the client did not
hold back; when every valid point was client-limited rules 4 and 5 fall back to those, and
say so (`client_limited: true`).

What a "best" rests on is part of it. A capacity that is only a lower bound (the SLO never
missed up to the highest rate tested, the search capped at max_rate, the client unable to
drive more, a search that did not converge before any miss) carries `lower_bound` (why) and
prints as ">= 4 req/s (not reached)". When the runner-up cannot be told apart from the best
by the rule's own evidence (both capacities lower bounds at the rate the best proved, their
brackets overlap, or their throughputs at the best point lie within compare's interval) the
result is a `tie`: the configurations, what they tie on, the next figure that separates them
(the largest significant difference compare finds between their points) and what would
decide it. The figure's winner is named best. `headline()` is the one text of all this that
`results`, `show` and the report print.

Verdicts: a sweep or tune run's is its status (complete, failed, interrupted); a
comparison's is `regression` or `no-regression` (see `compare_verdict`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd

from tunebench.analysis.compare import (
    ALL_POINTS,
    NO_CHANGE,
    compare_sides,
)
from tunebench.analysis.compare_metrics import METRICS
from tunebench.analysis.frames import load_run, read_manifest, run_path
from tunebench.analysis.quality import failing
from tunebench.analysis.standings import (
    Standing,
    capacity_bound,
    capacity_text,
    config_names,
    joined_names,
    rate_standings,
    standing_out,
    unconverged,
)
from tunebench.analysis.tie_break import config_sides, load_text, separating_figure
from tunebench.errors import TunebenchError
from tunebench.numbers import to_float
from tunebench.points import trust
from tunebench.points.cost import at_rate, replica_price
from tunebench.points.offered import REPLAY, is_replay
from tunebench.points.records import CapacityRecord
from tunebench.store.manifest import ConfigEntry, Manifest

# Tekton keeps all results of a step in one 4 KB termination message, with JSON quoting.
MAX_BEST_CONFIG_BYTES = 1500


def _config(manifest: Manifest, config_id: str, label: str | None = None) -> ConfigEntry:
    """The configuration's entry; one with only its id and `label` when the manifest has
    none (a point whose configuration entry was lost)."""
    entry = manifest.config(config_id)
    return entry if entry is not None else ConfigEntry(config_id=config_id, label=label or "")


def _from_tune(path: Path, manifest: Manifest) -> dict[str, Any] | None:
    result_file = path / "tune-result.json"
    if not result_file.is_file():
        return None
    result = json.loads(result_file.read_text())
    best = result.get("best")
    if not best:
        return None
    names = result.get("objective_names") or [result.get("objective")]
    values = best.get("values") or []
    config = manifest.config(best.get("config_id") or "")
    out = {
        "config_id": best.get("config_id"),
        "label": config.label if config is not None else f"t{best.get('trial')}",
        "model": config.model if config is not None else None,
        "args": best.get("args") or (config.args if config is not None else {}),
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
    capacity: CapacityRecord = best.get("capacity") or CapacityRecord()
    if capacity and str(out["metric"]).startswith("capacity"):
        why = capacity_bound(capacity)
        if why:
            out["lower_bound"] = why
        if unconverged(capacity):
            out["converged"] = False
        if capacity.get("drift"):
            out["drift"] = capacity["drift"]
    return out


# Why a capacity is only a lower bound (`lower_bound`).
def _from_capacity(manifest: Manifest, excluded: set[str]) -> dict[str, Any] | None:
    standings = []
    for config in manifest.configs:
        capacity: CapacityRecord = config.capacity or {}
        rate = capacity.get("rate")
        if rate is None or config.config_id in excluded:
            continue
        interval = capacity.get("interval") or [rate, capacity.get("upper")]
        low = interval[0] if interval[0] is not None else rate
        why = capacity_bound(capacity)
        high = None if why or len(interval) < 2 else interval[1]
        standings.append(
            Standing(config.config_id, rate, min(low, rate), high, why, capacity.get("arrival"))
        )
    if not standings:
        return None
    ranked = sorted(standings, key=lambda s: -s.value)
    best = _config(manifest, ranked[0].config_id)
    capacity = best.capacity or {}
    out = _describe(best, "capacity", "capacity_rps", capacity["rate"])
    if is_replay(capacity.get("arrival")):
        out["arrival"] = REPLAY  # the value is a speed of the trace, not req/s
    if capacity.get("client_bound"):
        out["client_bound"] = True
    if unconverged(capacity):
        out["converged"] = False
    if capacity.get("drift"):
        out["drift"] = capacity["drift"]
    return standing_out(out, ranked, "capacity search", manifest)


def _from_rates(points: pd.DataFrame, manifest: Manifest) -> dict[str, Any] | None:
    """Rule 3: the highest sustained rate within the SLO (median over repeats)."""
    standings = rate_standings(points)
    if not standings or max(s.value for s in standings) <= 0:
        return None
    ranked = sorted(standings, key=lambda s: -s.value)
    config = _config(manifest, ranked[0].config_id)
    out = _describe(config, "slo-capacity", "capacity_rps", ranked[0].value)
    return standing_out(out, ranked, "fixed rates", manifest)


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


def _from_points(path: Path, manifest: Manifest, excluded: set[str]) -> dict[str, Any] | None:
    points = load_run(path)
    if excluded and not points.empty:
        points = points[~points["config_id"].isin(excluded)]
    if points.empty or "valid" not in points or "output_tok_s" not in points:
        return None
    has_slo = bool((manifest.spec or {}).get("slo")) and "slo_met" in points
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
    config = _config(manifest, str(row["config_id"]), str(row["config_label"]))
    out = {**_describe(config, rule, metric, row[metric]), "point": row["point_id"]}
    if met.empty:
        out["slo_met"] = False
    if server_bound.empty:
        out["client_limited"] = True
    others = pool[pool["config_id"] != row["config_id"]]
    if not others.empty:
        runner = others.loc[others[metric].idxmax()]
        tie = _throughput_tie(path, row, runner, config_names(manifest))
        if tie is not None:
            out["tie"] = tie
            out["_standings"] = {
                str(r["config_id"]): Standing(str(r["config_id"]), float(r[metric]), 0.0, None)
                for r in (row, runner)
            }
            out["_points"] = {str(r["config_id"]): str(r["point_id"]) for r in (row, runner)}
    return out


def _throughput_tie(
    path: Path, row: pd.Series, runner: pd.Series, names: dict[str, str]
) -> dict[str, Any] | None:
    """Rules 4 and 5: the runner-up's output tok/s at the best's point, compared as
    `compare` does; a tie when its interval includes no change."""
    if pd.isna(row.get("target")):
        return None
    sides = config_sides(path, [str(row["config_id"]), str(runner["config_id"])])
    for side in sides:
        side.points = side.points[
            (side.points["load_kind"] == row["load_kind"])
            & (side.points["target"] == row["target"])
        ]
    if any(side.points.empty for side in sides):
        return None
    try:
        result = compare_sides(sides, [METRICS["output_tok_s"]])
    except TunebenchError:
        return None
    found = result.rows[result.rows["point"] != ALL_POINTS]
    if found.empty or found.iloc[0]["verdict"] != NO_CHANGE:
        return None
    first = found.iloc[0]
    where = load_text(row["load_kind"], row["target"], str(row["point_id"]))
    between = joined_names(
        [names.get(str(r["config_id"]), str(r["config_id"])) for r in (row, runner)]
    )
    return {
        "configs": [str(row["config_id"]), str(runner["config_id"])],
        "on": f"tie on output tok/s at {where} between {between}"
        " within compare's interval "
        f"({first['change_pct']:+.1f}%, CI [{first['ci_low_pct']:+.1f}, "
        f"{first['ci_high_pct']:+.1f}]%)",
        "hint": "measure with repeats or longer windows to decide",
    }


def _describe(config: ConfigEntry, rule: str, metric: str, value: Any) -> dict[str, Any]:
    return {
        "config_id": config.config_id,
        "label": config.label,
        "model": config.model,
        "args": config.args,
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
    manifest = read_manifest(path)
    excluded = failing(path)
    best = (
        _from_tune(path, manifest)
        or _from_capacity(manifest, set(excluded))
        or _from_points(path, manifest, set(excluded))
    )
    if best is not None and "tie" in best:
        best = _decide(path, manifest, best)
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


def _decide(path: Path, manifest: Manifest, best: dict[str, Any]) -> dict[str, Any]:
    """Name the next figure that separates the tied configurations (analysis/tie_break.py).
    Its winner is named best when compare confirmed it; the tie stays on record."""
    tie = best["tie"]
    standings: dict[str, Standing] = best.pop("_standings", {})
    points_of: dict[str, str] = best.pop("_points", {})
    figure = separating_figure(path, tie["configs"])
    if figure is None:
        tie["decider"] = "no measured figure separates them"
        return best
    tie["decider"] = (
        figure.text
        if figure.confirmed
        else f"{figure.text} (unconfirmed: no per-request samples for an interval)"
    )
    tie["decided"] = figure.confirmed
    winner = figure.winner_id or best["config_id"]
    if figure.confirmed and winner != best["config_id"] and winner in standings:
        standing = standings[winner]
        config = _config(manifest, winner, figure.winner_label)
        kept = ("tie", "slo_met", "client_limited", "arrival")
        keep: dict[str, Any] = {k: best[k] for k in kept if k in best}
        best = {**_describe(config, best["rule"], best["metric"], standing.value), **keep}
        if standing.lower_bound:
            best["lower_bound"] = standing.lower_bound
        if winner in points_of:
            best["point"] = points_of[winner]
        capacity = config.capacity or {}
        if best["rule"] == "capacity" and capacity.get("client_bound"):
            best["client_bound"] = True
    return best


def headline(best: dict[str, Any] | None) -> str:
    """The one line that says which configuration is best and what that rests on, printed
    by `results`, `show` and the report alike."""
    if best is None:
        return "no configuration: no valid point was measured"
    name = f"{best.get('config_id')} {best.get('label') or ''}".strip()
    metric = str(best.get("metric") or "")
    if metric.startswith("capacity"):
        figure = "capacity at the SLO " + capacity_text(
            best.get("value"), best.get("lower_bound"), best.get("arrival")
        )
        if best.get("lower_bound"):
            figure += f": {best['lower_bound']}"
    else:
        figure = f"{metric} {best.get('value')}"
        if best.get("point"):
            figure += f" at {best['point']}"
    if best.get("converged") is False:
        figure += " (search not converged: raise max_probes)"
    if best.get("drift"):
        figure += f" ({best['drift']}: not an answer of record)"
    notes = [f"rule {best.get('rule')}"]
    if best.get("slo_met") is False:
        notes.append("no point met the SLO")
    if best.get("client_limited"):
        notes.append("every valid point was client-limited")
    if best.get("revalidation"):
        notes.append(f"re-validation: {best['revalidation']}")
    if best.get("quality_excluded"):
        notes.append(f"not considered, quality gate: {', '.join(best['quality_excluded'])}")
    tie = best.get("tie")
    if not tie:
        return f"{name}: {figure} ({'; '.join(notes)})"
    text = tie["on"]
    if tie.get("decider"):
        text += f"; {tie['decider']}"
    chosen = "by that figure" if tie.get("decided") else "by the rule's order"
    return f"{text}: {tie['hint']}. Named best {chosen}: {name}, {figure} ({'; '.join(notes)})"


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


def _cost_of(best: dict[str, Any], manifest: Manifest, path: Path) -> dict[str, Any] | None:
    """With `cost:` in the spec: the best configuration's price per replica-hour and, at its
    capacity@SLO (when the rule measured one), requests per cost unit and cost per million
    output tokens; otherwise the cheapest output tokens among its valid points."""
    cost = (manifest.spec or {}).get("cost")
    if not cost:
        return None
    config = _config(manifest, str(best.get("config_id")))
    price = replica_price(cost, config.args or best.get("args") or {})
    points = load_run(path)
    mine = points[(points["config_id"] == best.get("config_id")) & (points["valid"] == True)]  # noqa: E712
    tokens = pd.to_numeric(mine.get("output_tokens_mean"), errors="coerce").mean()
    rate = (
        best.get("value")
        if best.get("metric") == "capacity_rps"
        else (config.capacity or {}).get("rate")
    )
    if is_replay((config.capacity or {}).get("arrival")):
        rate = None  # a capacity over replay speed is no request rate to price
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
    for key in ("quality_excluded", "model", "label", "tie"):
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
    return read_manifest(run, root).status.value


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
