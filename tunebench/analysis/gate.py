"""The regression gate of `tunebench compare --fail-on-regression PCT`: its rule and verdict.

The rule, in its own words: the gate fails when some metric of some aligned point (or of
all aligned points together, where compare has such a row) is worse than the baseline by
more than PCT with the comparison's confidence, after correcting for testing many rows at
once. Each gated row gets the one-sided p-value of "not worse by more than the threshold"
(latencies: B/A - 1 <= PCT; throughput: B/A - 1 >= -PCT; the error rate, in percentage
points with a threshold of its own: B - A <= PP); Holm's step-down over all gated rows
keeps the chance that an A/A comparison fails at 1 - confidence or less, however many rows
there are.

It fails closed: a gate that could not look is not a pass. It also fails (verdict
`unverified`) when

- a point of the baseline is missing from a candidate (a configuration that did not start,
  a point that failed): unless `allow_missing`;
- a compared point of a candidate is invalid (args not in effect, outputs cut, too many
  failed requests, ...): unless `allow_invalid`;
- a compared point of a candidate is unverified (no server metrics, args the server gave
  no read-back of, an imported run): unless `allow_unverified`;
- the machine changed speed under a compared point of either side (points/machine.py): a
  change there is the machine's as much as the candidate's, so such rows are *undecided
  (machine drift)*, neither a regression nor a pass: unless `allow_drift`, which judges
  them as any other row;
- it could judge no row at all.

An opt-out is named in the gate's own lines. Rows without a verdict (too few samples, a
baseline point that is invalid) are listed with what they would need. Every gate states
the smallest change it could have detected per metric, so a pass says how much it saw.
The verdict is written into `compare --json` and read back by `tunebench results
--compare-json`.
"""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

import numpy as np
import pandas as pd

from tunebench.analysis import stats
from tunebench.analysis.compare import ALL_POINTS, EXCLUDED, NOT_AVAILABLE, Comparison
from tunebench.analysis.compare_metrics import METRICS
from tunebench.analysis.gate_reading import reconcile_line, worse_not_failing
from tunebench.points.machine import is_drift

REGRESSION = "regression"
UNVERIFIED = "unverified"  # the gate could not see what it needed: it fails, saying what
DRIFT = "machine-drift"  # undecided: the machine changed speed under what it compared
NOTHING_GATED = "no row could be judged: nothing was compared"
PASSED = "no-regression"
DEFAULT_ERROR_RATE_PP = 1.0
DETECTION_POWER = 0.8  # the minimum detectable change is the one caught 80% of the time


def regression_gate(
    result: Comparison,
    threshold_pct: float,
    confidence: float = 0.95,
    *,
    error_rate_pp: float = DEFAULT_ERROR_RATE_PP,
    allow_missing: bool = False,
    allow_invalid: bool = False,
    allow_unverified: bool = False,
    allow_drift: bool = False,
) -> dict[str, Any]:
    rows = result.rows
    drifted: dict[tuple[str, str], str] = {}  # (candidate, point) -> how the machine moved
    drifted_rows: set[int] = set()
    gated: list[int] = []
    p_values: list[float] = []
    invalid: dict[tuple[str, str], str] = {}  # (candidate, point) -> why
    unverified: dict[tuple[str, str], str] = {}  # (candidate, point) -> what was not checked
    unjudged: list[int] = []
    for index, change in enumerate(result.changes):
        row = rows.iloc[index]
        verdict = str(row["verdict"])
        if verdict.startswith(EXCLUDED):
            reasons = _candidate_reasons(str(row["note"]))
            if reasons:
                invalid.setdefault((str(row["candidate"]), _point_name(row)), reasons)
            else:
                unjudged.append(index)
            continue
        key = (str(row["candidate"]), _point_name(row))
        drift_b, others = _drift_apart(row.get("unverified_b"))
        drift_a, _ = _drift_apart(row.get("unverified_a"))
        if drift_a or drift_b:
            # also a row too thin to judge: the machine's move may be what thinned it (a
            # spell of another speed makes a window's requests strongly autocorrelated)
            side = "candidate" if drift_b else "baseline"
            drifted.setdefault(key, f"{side}: {(drift_b or drift_a)[0]}")
            drifted_rows.add(index)
        if verdict.startswith(NOT_AVAILABLE):
            unjudged.append(index)
            continue
        if others:
            unverified.setdefault(key, "; ".join(others))
        metric = METRICS[row["metric"]]
        threshold = error_rate_pp if metric.kind == "proportion" else threshold_pct
        gated.append(index)
        p_values.append(change.p_worse(threshold / 100, not metric.higher_is_better))
    alpha = 1 - confidence
    rejected = stats.holm(p_values, alpha)
    failing = [index for index, hit in zip(gated, rejected) if hit]
    # a drifted row decides nothing either way: a pass there may be the machine's speed-up
    undecided = [] if allow_drift else sorted(drifted_rows)
    failing = [i for i in failing if i not in undecided]
    causes = _causes(
        result,
        gated,
        {} if allow_invalid else invalid,
        {} if allow_unverified else unverified,
        allow_missing,
    )
    if undecided:
        first = drifted[
            (str(rows.iloc[undecided[0]]["candidate"]), _point_name(rows.iloc[undecided[0]]))
        ]
        causes.append(
            f"undecided (machine drift): {len(undecided)} compared row(s) rest on points measured "
            f"while the machine changed speed (first: {first}); --allow-drift judges them as "
            "measured"
        )
    opted_out = [
        name
        for name, used, seen in (
            ("--allow-missing", allow_missing, result.missing),
            ("--allow-invalid", allow_invalid, invalid),
            ("--allow-unverified", allow_unverified, unverified),
            ("--allow-drift", allow_drift, drifted),
        )
        if used and seen
    ]
    # nothing judged because every row left unjudged rests on a drifted point: the drift is
    # the one cause (a spell of another speed thinned those windows)
    drift_only = len(causes) == 1 or (
        len(causes) == 2
        and not gated
        and bool(unjudged)
        and set(unjudged) <= set(undecided)
        and NOTHING_GATED in causes
    )
    if failing:
        verdict = REGRESSION
    elif undecided and drift_only:
        verdict = DRIFT
    elif causes:
        verdict = UNVERIFIED
    else:
        verdict = PASSED
    gate: dict[str, Any] = {
        "threshold_pct": threshold_pct,
        "error_rate_threshold_pp": error_rate_pp,
        "rule": f"worse by more than {threshold_pct:g}% (error rate: {error_rate_pp:g} "
        f"percentage points) with {confidence:.0%} confidence, Holm-corrected over the gated "
        "rows; a missing or invalid candidate point, or nothing gated, fails it",
        "rows_gated": len(gated),
        "rows_not_gated": len(rows) - len(gated),
        "client_limited_rows": int((rows.iloc[gated]["client_limited"] != "").sum())
        if gated
        else 0,
        "regressions": len(failing),
        "verdict": verdict,
        "passed": verdict == PASSED,
        "causes": causes,
        "opted_out": opted_out,
        "missing_points": [describe_missing(m) for m in result.missing],
        "invalid_points": [f"{c} {p}: {why}" for (c, p), why in invalid.items()],
        "unverified_points": [f"{c} {p}: {why}" for (c, p), why in unverified.items()],
        "drifted_points": [f"{c} {p}: {why}" for (c, p), why in drifted.items()],
        "undecided_rows": len(undecided),
        "not_judged": _not_judged(rows, unjudged),
        "detectable": _detectable(
            result, gated, alpha, {"pct": threshold_pct, "pp": error_rate_pp}
        ),
        # the rows that failed it, for whoever shows the gate per point (compare --html)
        "failing_rows": [
            {
                "candidate": str(rows.iloc[i]["candidate"]),
                "point": str(rows.iloc[i]["point"]),
                "metric": str(rows.iloc[i]["metric"]),
                **(
                    {"config_label": str(rows.iloc[i]["config_label"])}
                    if "config_label" in rows.columns
                    else {}
                ),
            }
            for i in failing
        ],
        "within_run_only": bool(gated)
        and all(rows.iloc[i]["repeats_a"] < 2 or rows.iloc[i]["repeats_b"] < 2 for i in gated),
    }
    gate["worse_not_failing"] = worse_not_failing(
        rows, gated, set(failing) | set(undecided), threshold_pct, error_rate_pp
    )
    if failing:
        worst = rows.iloc[failing].assign(_p=[p_values[gated.index(i)] for i in failing])
        worst = worst.loc[worst["_p"].idxmin()]
        gate["worst"] = {
            "candidate": worst["candidate"],
            "label": worst["label"],
            "point": worst["point"],
            "load_kind": worst["load_kind"],
            "target": _number(worst["target"]),
            "change_pct": float(worst["change_pct"]),
            "unit": worst["unit"],
            "ci_low_pct": float(worst["ci_low_pct"]),
            "ci_high_pct": float(worst["ci_high_pct"]),
        }
    return gate


def _candidate_reasons(note: str) -> str:
    """The candidate's (B's) invalid reasons in an excluded row's note; '' when only the
    baseline's point is invalid (then the row is not judged, and the candidate not blamed)."""
    parts = [p.split("B invalid: ", 1)[1] for p in note.split("; ") if p.startswith("B invalid: ")]
    return "; ".join(dict.fromkeys(parts))


def _point_name(row: pd.Series) -> str:
    label = row.get("config_label")
    return f"{label} {row['point']}" if isinstance(label, str) and label else str(row["point"])


def _causes(
    result: Comparison,
    gated: list[int],
    invalid: dict[tuple[str, str], str],
    unverified: dict[tuple[str, str], str],
    allow_missing: bool,
) -> list[str]:
    """One line per reason the gate cannot pass, beside a regression (`invalid` and
    `unverified`: the candidate points not accepted by name)."""
    causes = []
    if result.missing and not allow_missing:
        causes.append(
            f"{len(result.missing)} baseline point(s) missing from the candidate "
            f"({', '.join(describe_missing(m) for m in result.missing[:4])}"
            f"{', ...' if len(result.missing) > 4 else ''}); --allow-missing accepts that"
        )
    for found, what, option in (
        (invalid, "invalid", "--allow-invalid"),
        (unverified, "unverified", "--allow-unverified"),
    ):
        if found:
            (candidate, point), why = next(iter(found.items()))
            causes.append(
                f"{len(found)} candidate point(s) {what} (first: {candidate} {point}: {why}); "
                f"{option} accepts that"
            )
    if not gated:
        causes.append(NOTHING_GATED)
    return causes


def _drift_apart(text: Any) -> tuple[list[str], list[str]]:
    """A point's unverified reasons split into machine drift and the rest."""
    reasons = [r for r in str(text).split("; ") if r] if isinstance(text, str) else []
    return [r for r in reasons if is_drift(r)], [r for r in reasons if not is_drift(r)]


def describe_missing(missing: dict[str, Any]) -> str:
    label = missing.get("config_label")
    point = f"{label} {missing['point']}" if label else str(missing["point"])
    return f"{missing['candidate']} {point}"


def _not_judged(rows: pd.DataFrame, unjudged: list[int]) -> list[str]:
    """Rows without a verdict, grouped by metric and reason: '8 x TTFT p95: too few samples:
    need 72 per side for p95 (have 49 and 50)'."""
    grouped: Counter[tuple[str, str]] = Counter()
    for index in unjudged:
        row = rows.iloc[index]
        grouped[(str(row["label"]), _reason(str(row["verdict"])))] += 1
    return [f"{count} x {label}: {reason}" for (label, reason), count in grouped.items()]


def _reason(verdict: str) -> str:
    for prefix in (NOT_AVAILABLE, EXCLUDED):
        if verdict.startswith(prefix + " ("):
            return verdict[len(prefix) + 2 : -1]
    return verdict


def detectable_change(
    change: stats.Change,
    alpha: float,
    threshold: float = 0.0,
    higher_is_worse: bool = True,
    power: float = DETECTION_POWER,
) -> float | None:
    """The smallest worsening (a positive fraction; percentage points as a fraction for
    proportions) that this row's test of "worse by more than `threshold`" at one-sided
    `alpha` catches with probability `power`."""
    if not change.available or change._t is None:
        return None
    _, se, df = change._t
    return _reach(change.additive, se, df, alpha, threshold, higher_is_worse, power)


def projected_with_repeats(
    change: stats.Change,
    points: int,
    repeats: int,
    alpha: float,
    threshold: float = 0.0,
    higher_is_worse: bool = True,
    power: float = DETECTION_POWER,
) -> float | None:
    """About what the row over all `points` of a comparison with `repeats` per side could
    detect. With repeats each repeat's geometric mean over the points is one observation:
    per side the variance of the assumed run-to-run spread (`shared_var`, which points
    cannot average) plus the within-run part over the points, divided by the repeats;
    Welch's t with 2(repeats - 1) degrees of freedom. A projection, not a measurement: the
    real spread between repeats decides."""
    if not change.available or change._t is None or change.additive:
        return None
    _, se, _ = change._t
    within = max(se * se - change.shared_var, 0.0)
    projected_se = math.sqrt((change.shared_var + within / max(points, 1)) / repeats)
    return _reach(
        False, projected_se, 2.0 * (repeats - 1), alpha, threshold, higher_is_worse, power
    )


def _reach(
    additive: bool,
    se: float,
    df: float,
    alpha: float,
    threshold: float,
    higher_is_worse: bool,
    power: float,
) -> float:
    reach = float(_t_reach(se, df, alpha, power))
    return _beyond_threshold(additive, reach, threshold, higher_is_worse)


def _t_reach(se: Any, df: Any, alpha: float, power: float = DETECTION_POWER) -> Any:
    """How far beyond a threshold a t-distributed estimate's true value must lie to be
    caught at one-sided `alpha` with probability `power` (scalars or arrays)."""
    t = stats.scipy_stats().t
    return (t.ppf(1 - alpha, df) + t.ppf(power, df)) * np.maximum(se, 0.0)


def _beyond_threshold(
    additive: bool, reach: float, threshold: float, higher_is_worse: bool
) -> float:
    """The true worsening whose estimate lies `reach` beyond the threshold."""
    if additive:
        return threshold + reach
    if higher_is_worse:
        return math.expm1(math.log1p(threshold) + reach)
    return -math.expm1(math.log1p(-min(threshold, 0.99)) - reach)


REPEAT_CHOICES = (3, 5, 10)


def _detectable(
    result: Comparison, gated: list[int], alpha: float, thresholds: dict[str, float]
) -> dict[str, dict[str, Any]]:
    """Per metric: the smallest worsening the most sensitive gated row would fail the gate on
    (80% power, at the alpha Holm gives one row among all gated, beyond the threshold), in %
    (error rate: pp); for single runs, the fewest repeats (3, 5 or 10) that would detect
    less, projected (`projected_with_repeats`)."""
    if not gated:
        return {}
    per_row_alpha = alpha / len(gated)
    records = result.rows.iloc[gated].to_dict(orient="records")
    points = Counter(r["metric"] for r in records if r["point"] != ALL_POINTS)
    usable = [
        (record, result.changes[index])
        for record, index in zip(records, gated)
        if result.changes[index].available and result.changes[index]._t is not None
    ]
    if not usable:
        return {}
    # one vectorised t quantile for every row (thousands of rows: one call, not thousands)
    se = np.array([change._t[1] for _, change in usable])  # type: ignore[index]
    df = np.array([change._t[2] for _, change in usable])  # type: ignore[index]
    reach = _t_reach(se, df, per_row_alpha)
    best: dict[str, tuple[float, dict[str, Any], stats.Change, float, bool]] = {}
    for (record, change), distance in zip(usable, reach):
        metric = METRICS[record["metric"]]
        threshold = (thresholds["pp"] if metric.kind == "proportion" else thresholds["pct"]) / 100
        worse_up = not metric.higher_is_better
        now = _beyond_threshold(change.additive, float(distance), threshold, worse_up)
        if record["metric"] not in best or now < best[record["metric"]][0]:
            best[record["metric"]] = (now, record, change, threshold, worse_up)
    found: dict[str, dict[str, Any]] = {}
    for name, (now, record, change, threshold, worse_up) in best.items():
        entry: dict[str, Any] = {
            "label": record["label"],
            "unit": record["unit"],
            "now": round(now * 100, 1),
        }
        if record["repeats_a"] < 2 or record["repeats_b"] < 2:
            for repeats in REPEAT_CHOICES:
                projected = projected_with_repeats(
                    change, points.get(name, 1), repeats, per_row_alpha, threshold, worse_up
                )
                if projected is not None and projected < now:
                    entry["repeats"], entry["with_repeats"] = repeats, round(projected * 100, 1)
                    break
        found[name] = entry
    return found


def _number(value: Any) -> float | None:
    return None if value is None or pd.isna(value) else float(value)


def describe_gate(gate: dict[str, Any]) -> str:
    """The gate's verdict in a few lines: the verdict, what it gated, each cause of a
    failure, what it could not judge, and the smallest change it could detect per metric."""
    lines = [_headline(gate)]
    lines += [f"  cannot pass: {cause}" for cause in gate["causes"]]
    lines += [f"  accepted by {name}" for name in gate["opted_out"]]
    if gate["opted_out"]:
        lines += [f"  missing: {m}" for m in gate["missing_points"]] * (
            "--allow-missing" in gate["opted_out"]
        )
        lines += [f"  invalid: {p}" for p in gate["invalid_points"]] * (
            "--allow-invalid" in gate["opted_out"]
        )
        lines += [f"  unverified: {p}" for p in gate["unverified_points"]] * (
            "--allow-unverified" in gate["opted_out"]
        )
        lines += [f"  machine drift: {p}" for p in gate.get("drifted_points", [])] * (
            "--allow-drift" in gate["opted_out"]
        )
    lines += [f"  not judged: {text}" for text in gate["not_judged"]]
    reconciled = reconcile_line(gate)
    if reconciled:
        lines.append(f"  {reconciled}")
    for entry in gate["detectable"].values():
        unit = "pp" if entry["unit"] == "pp" else "%"
        text = f"  can detect {entry['label']} changes >= {entry['now']:g}{unit}"
        if "with_repeats" in entry:
            text += f"; with `repeats: {entry['repeats']}` about {entry['with_repeats']:g}{unit}"
        lines.append(text)
    return "\n".join(lines)


def _headline(gate: dict[str, Any]) -> str:
    gated = f"{gate['rows_gated']} rows gated, {gate['rows_not_gated']} not"
    if gate["verdict"] == REGRESSION:
        worst = gate["worst"]
        unit = "pp" if worst["unit"] == "pp" else "%"
        threshold = (
            f"{gate['error_rate_threshold_pp']:g}pp"
            if unit == "pp"
            else f"{gate['threshold_pct']:g}%"
        )
        return (
            f"gate: FAIL (regression): {gate['regressions']} of {gate['rows_gated']} gated rows "
            f"worse by more than {threshold} (Holm-corrected); worst: {worst['label']} at "
            f"{worst['point']} {worst['change_pct']:+.1f}{unit} [{worst['ci_low_pct']:+.1f}, "
            f"{worst['ci_high_pct']:+.1f}]"
        )
    if gate["verdict"] == DRIFT:
        return (
            f"gate: FAIL (undecided, machine drift: {gate['undecided_rows']} row(s) rest on "
            f"points the machine changed speed under): {gated}"
        )
    if gate["verdict"] == UNVERIFIED:
        return f"gate: FAIL (unverified: it could not check everything): {gated}"
    return (
        f"gate: pass: no row worse by more than {gate['threshold_pct']:g}% (error rate "
        f"{gate['error_rate_threshold_pp']:g}pp) with confidence; {gated}"
    )
