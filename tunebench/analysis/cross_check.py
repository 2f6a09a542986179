"""Two load drivers on the same points (load.driver cross-check): how far they disagree, and
which side the client holds back.

The table is `compare` applied inside one run: the GuideLLM rows are side A, the vllm-bench
rows side B, aligned on configuration and load point, with the same interval methods
(analysis/stats.py). The two measured the same server start in alternation, so no run-to-run
spread is added (`run_cv` 0): the intervals cover the request-to-request variability.

The verdict rests on one fact: a load generator can only under-deliver. At the same offered
load, the side that drove significantly less output from the same server is client-bound;
where the throughputs agree, the side that measured significantly longer time to first token
adds client delay (its requests waited in the client, or its clock saw them late). Where
neither differs significantly, that is not yet agreement (absence of evidence): the two
agree only when an equivalence test passes, i.e. the intervals of output tok/s and TTFT p50
both lie inside +-`EQUIVALENCE_MARGIN_PCT`; otherwise the point is undecided, with about how
many requests a point would settle it. A side's own client check (dispatch lag, CPU) is
quoted as corroboration, never as the verdict. On a replayed trace both sides played the
same schedule, and each one's arrival lag p95 is quoted beside it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from tunebench.analysis.compare import (
    ALL_POINTS,
    LOAD_KEY,
    NO_CHANGE,
    SIGNIFICANT_BETTER,
    SIGNIFICANT_WORSE,
    Side,
    align_key,
    compare_sides,
)
from tunebench.analysis.compare_metrics import resolve_metrics
from tunebench.analysis.frames import load_requests, load_run
from tunebench.load.cross_check import split_point_id

if TYPE_CHECKING:
    from tunebench.store.run import RunStore

DRIVER_ORDER = ("guidellm", "vllm-bench")  # side A, side B (B vs A in the table)
METRICS = ("output_tok_s", "achieved_rps", "ttft_p50", "ttft_p95", "itl_p50", "tpot_p50", "e2e_p50")
# The verdict asks two questions (throughput, then time to first token), each at 97.5%: together
# they wrongly name a culprit on identical servers at most about 5% of the time.
CONFIDENCE = 0.975
VERDICT_COLUMNS = ("config_label", "point", "verdict", "client_bound", "evidence")
AGREE = "agree"
UNDECIDED = "undecided"
# Two drivers "agree" when the difference is shown to be inside this margin (an equivalence
# test: the whole interval inside +-margin), not merely when no difference was shown.
EQUIVALENCE_MARGIN_PCT = 10.0


@dataclass
class CrossCheck:
    drivers: tuple[str, str]
    table: pd.DataFrame  # compare rows: one per (configuration, point, metric), B vs A
    verdicts: pd.DataFrame  # VERDICT_COLUMNS, one per (configuration, point)


def crossed_points(points: pd.DataFrame) -> pd.DataFrame:
    """The rows measured by a cross-check (point ids `<point>@<driver>`)."""
    if points.empty or "load_driver" not in points or "point_id" not in points:
        return points.iloc[0:0]
    mask = points["point_id"].astype(str).map(lambda p: split_point_id(p)[1] is not None)
    return points[mask]


def drivers_of(points: pd.DataFrame) -> tuple[str, str] | None:
    found = [str(d) for d in dict.fromkeys(crossed_points(points)["load_driver"].dropna())]
    if len(found) < 2:
        return None
    ordered = sorted(found, key=lambda d: DRIVER_ORDER.index(d) if d in DRIVER_ORDER else 99)
    return ordered[0], ordered[1]


def cross_check(
    points: pd.DataFrame,
    requests: pd.DataFrame,
    confidence: float = CONFIDENCE,
    seed: int = 0,
    metrics: tuple[str, ...] = METRICS,
) -> CrossCheck | None:
    """The disagreement table and verdicts of a run's cross-checked points (None: none)."""
    drivers = drivers_of(points)
    if drivers is None:
        return None
    crossed = _one_point_id(crossed_points(points))
    sides = [
        Side(name, crossed[crossed["load_driver"] == name], _requests_of(requests, name))
        for name in drivers
    ]
    comparison = compare_sides(
        sides,
        resolve_metrics(list(metrics)),
        (*LOAD_KEY, "config_label"),
        confidence=confidence,
        min_change_pct=1.0,
        seed=seed,
        run_cv=0.0,
    )
    table = comparison.rows
    cautions = _request_mismatch(crossed, drivers)
    for key, said in _replay_arrivals(crossed, drivers).items():
        cautions[key] = cautions.get(key, "") + said
    return CrossCheck(drivers, table, judge(table, drivers, cautions))


def _one_point_id(frame: pd.DataFrame) -> pd.DataFrame:
    """The rows with their point ids without the driver (`replay-azure-2@vllm-bench` ->
    `replay-azure-2`): a replay point aligns by its id (the trace it names), so both sides'
    rows of one point must carry the same one."""
    if frame.empty or "point_id" not in frame:
        return frame
    return frame.assign(point_id=frame["point_id"].astype(str).map(lambda p: split_point_id(p)[0]))


def _requests_of(requests: pd.DataFrame, driver: str) -> pd.DataFrame:
    """One side's per-request samples, under the point ids its rows now carry."""
    if requests.empty or "point_id" not in requests:
        return requests
    mine = requests["point_id"].astype(str).map(lambda p: split_point_id(p)[1] == driver)
    return _one_point_id(requests[mine])


def run_cross_check(run: str | Path, root: str | Path = "reports") -> CrossCheck | None:
    points = load_run(run, root)
    if crossed_points(points).empty:
        return None
    return cross_check(points, load_requests(points.attrs["run_path"], root))


def _request_mismatch(
    crossed: pd.DataFrame, drivers: tuple[str, str], tolerance: float = 0.05
) -> dict[tuple[str, str], str]:
    """(label, point) -> a caution where the two sides sent requests of different lengths
    (then their throughputs are not the same measure)."""
    out: dict[tuple[str, str], str] = {}
    frame = crossed.assign(_point=crossed.apply(align_key, axis=1))
    for (label, point), group in frame.groupby(["config_label", "_point"], sort=False):
        for column, name in (("prompt_tokens_mean", "prompt"), ("output_tokens_mean", "output")):
            if column not in group:
                continue
            means = [
                pd.to_numeric(group[group["load_driver"] == d][column], errors="coerce").mean()
                for d in drivers
            ]
            if all(pd.notna(m) and m > 0 for m in means) and (
                abs(means[1] / means[0] - 1) > tolerance
            ):
                out[(str(label), str(point))] = (
                    f"; caution: the sides sent different requests ({name} tokens "
                    f"{means[0]:.4g} vs {means[1]:.4g})"
                )
                break
    return out


def _replay_arrivals(crossed: pd.DataFrame, drivers: tuple[str, str]) -> dict[tuple[str, str], str]:
    """(label, point) -> each side's arrival lag p95 on a replayed trace: both sides played
    the same schedule, so how late each one sent is its client's own account (quoted, as
    the client checks are; a side without send times says so)."""
    if crossed.empty or "load_kind" not in crossed:
        return {}
    replays = crossed[crossed["load_kind"].astype(str) == "replay"]
    if replays.empty:
        return {}
    frame = replays.assign(_point=replays.apply(align_key, axis=1))
    out: dict[tuple[str, str], str] = {}
    for (label, point), group in frame.groupby(["config_label", "_point"], sort=False):
        lags = []
        for driver in drivers:
            mine = group[group["load_driver"] == driver]
            column = mine.get("arrival_lag_p95_ms")
            value = pd.to_numeric(column, errors="coerce").mean() if column is not None else None
            lags.append(
                f"{value:.4g} ms" if value is not None and pd.notna(value) else "not checked"
            )
        out[(str(label), str(point))] = f"; arrival lag p95 {lags[0]} vs {lags[1]}"
    return out


def _row(group: pd.DataFrame, metric: str) -> pd.Series | None:
    found = group[group["metric"] == metric]
    return found.iloc[0] if len(found) else None


def _change(row: pd.Series) -> str:
    return (
        f"{row['change_pct']:+.1f}% [{row['ci_low_pct']:+.1f}%, {row['ci_high_pct']:+.1f}%]"
        if pd.notna(row.get("ci_low_pct"))
        else "no interval"
    )


def _flags(group: pd.DataFrame, drivers: tuple[str, str]) -> str:
    """Which side's own client check flagged the point ("A", "B" in compare's rows)."""
    marks = ",".join(str(v) for v in group["client_limited"].dropna() if v)
    flagged = [name for side, name in zip("AB", drivers) if side in marks]
    return f"; its own client check flagged {' and '.join(flagged)}" if flagged else ""


def _not_equivalent(throughput: pd.Series, ttft: pd.Series | None) -> str:
    """'' when every interval lies inside +-EQUIVALENCE_MARGIN_PCT; else why not, with about
    how many requests a point would narrow the widest one enough (the half-width shrinks as
    1/sqrt(requests))."""
    margin = EQUIVALENCE_MARGIN_PCT
    requests = _requests_per_side(ttft)
    for name, row in (("output tok/s", throughput), ("TTFT p50", ttft)):
        if row is None:
            continue
        low, high = row.get("ci_low_pct"), row.get("ci_high_pct")
        if pd.isna(low) or pd.isna(high):
            return f"but {name} has no interval: cannot show they agree"
        if -margin <= low and high <= margin:
            continue
        centre, half = float(row["change_pct"]), (float(high) - float(low)) / 2
        room = margin - abs(centre)
        if room <= 0 or requests is None:
            need = "more requests a point"
        else:
            need = f"about {int(requests * (half / room) ** 2) + 1} requests a point"
        return (
            f"but the {name} interval is not inside +-{margin:g}%: undecided ({need} would decide)"
        )
    return ""


def _requests_per_side(ttft: pd.Series | None) -> int | None:
    if ttft is None or pd.isna(ttft.get("n_a")) or pd.isna(ttft.get("n_b")):
        return None
    found = min(int(ttft["n_a"]), int(ttft["n_b"]))
    return found or None


def judge(
    table: pd.DataFrame,
    drivers: tuple[str, str],
    cautions: dict[tuple[str, str], str] | None = None,
) -> pd.DataFrame:
    """One verdict per configuration and point from the table (B vs A)."""
    a, b = drivers
    out = []
    points = table[table["point"] != ALL_POINTS]
    for (label, point), group in points.groupby(["config_label", "point"], sort=False):
        throughput, ttft = _row(group, "output_tok_s"), _row(group, "ttft_p50")
        flags = _flags(group, drivers) + (cautions or {}).get((str(label), str(point)), "")
        why = str(throughput.get("note") or "") if throughput is not None else "not measured"
        verdict, bound = UNDECIDED, ""
        evidence = "no interval for output tok/s" + (f" ({why})" if why else "") + flags
        if throughput is not None and throughput["verdict"] in (
            SIGNIFICANT_BETTER,
            SIGNIFICANT_WORSE,
        ):
            bound = a if throughput["verdict"] == SIGNIFICANT_BETTER else b
            other = b if bound == a else a
            verdict = f"{bound} client-bound"
            evidence = (
                f"{b} vs {a} output tok/s {_change(throughput)} "
                f"({throughput['a']:.4g} vs {throughput['b']:.4g}): {other} drove more from "
                f"the same server{flags}"
            )
        elif throughput is not None and throughput["verdict"] == NO_CHANGE:
            if ttft is not None and ttft["verdict"] in (SIGNIFICANT_BETTER, SIGNIFICANT_WORSE):
                # lower is better for TTFT: "worse" means B measured longer
                bound = b if ttft["verdict"] == SIGNIFICANT_WORSE else a
                verdict = f"{bound} adds client delay"
                evidence = (
                    f"no significant difference in output tok/s ({_change(throughput)}), but "
                    f"{b} vs {a} TTFT p50 "
                    f"{_change(ttft)} ({ttft['a']:.4g} vs {ttft['b']:.4g} ms){flags}"
                )
            else:
                measured = f"output tok/s {_change(throughput)}" + (
                    f", TTFT p50 {_change(ttft)}" if ttft is not None else ""
                )
                unsettled = _not_equivalent(throughput, ttft)
                if unsettled:
                    evidence = f"{measured}: no significant difference, {unsettled}" + flags
                else:
                    verdict = AGREE
                    evidence = (
                        f"{measured}: both within +-{EQUIVALENCE_MARGIN_PCT:g}%, both "
                        "describe the server" + flags
                    )
        out.append(
            {
                "config_label": label,
                "point": point,
                "verdict": verdict,
                "client_bound": bound,
                "evidence": evidence,
            }
        )
    return pd.DataFrame(out, columns=list(VERDICT_COLUMNS))


TABLE_COLUMNS = (
    "config_label",
    "point",
    "metric",
    "label",
    "a",
    "b",
    "change_pct",
    "ci_low_pct",
    "ci_high_pct",
    "verdict",
    "method",
    "client_limited",
    "n_a",
    "n_b",
)


def table_csv(check: CrossCheck) -> str:
    """The table as stored in the run: `a` is the first driver's value, `b` the second's."""
    a, b = check.drivers
    frame = check.table.reindex(columns=list(TABLE_COLUMNS))
    return frame.rename(columns={"a": a, "b": b}).to_csv(index=False)


def verdicts_csv(check: CrossCheck) -> str:
    return check.verdicts.to_csv(index=False)


def write_cross_check(store: RunStore) -> CrossCheck | None:
    """A cross-check run's disagreement table and verdicts, written into the run (a
    RunStore); the check, or None when the run is no cross-check."""
    check = run_cross_check(store.path)
    if check is not None:
        store.write_text(store.layout.cross_check_table, table_csv(check))
        store.write_text(store.layout.cross_check_verdicts, verdicts_csv(check))
    return check
