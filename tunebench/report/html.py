"""`reports/<run>/report.html`: one self-contained file (images inline, no network)."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import jinja2
import pandas as pd

from tunebench.analysis.best import best_config, headline
from tunebench.analysis.cross_check import run_cross_check
from tunebench.analysis.crossovers import crossovers_between
from tunebench.analysis.frames import load_requests, load_run, read_manifest
from tunebench.analysis.plots import run_figures
from tunebench.analysis.point_evidence import DEFAULT_RUN_CV
from tunebench.analysis.quality import quality_table
from tunebench.analysis.sides import LOAD_KEY, Side
from tunebench.analysis.standings import Standing, capacities, capacity_bound, capacity_text
from tunebench.numbers import to_float
from tunebench.points import trust
from tunebench.points.diagnosis import CANNOT_DIAGNOSE, blind_spots, client_cores, diagnose_run
from tunebench.points.offered import is_replay, rate_text, speed_text
from tunebench.report.compare import crossover_at, crossover_load
from tunebench.report.formats import cell as format_cell
from tunebench.report.formats import readable, sig, signed_pct
from tunebench.report.points_table import OPTIONAL_COLUMNS
from tunebench.report.quality_tables import quality_vs
from tunebench.report.replayed_points import replay_section
from tunebench.report.tables import CROSS_CHECK_SHOWN, sentinel_notes
from tunebench.report.text import describe_capacity, describe_trial_value
from tunebench.spec.load_kind import LoadKind
from tunebench.store.files import write_atomic
from tunebench.store.layout import RunLayout
from tunebench.store.manifest import ConfigEntry, ConfigStatus, Manifest, RunKind

SUMMARY = [
    ("config", "config_label", None),
    ("point", "point_id", None),
    ("target", "target", 2),
    ("req/s", "achieved_rps", 2),
    ("concurrency", "achieved_concurrency", 1),
    ("TTFT p50 ms", "ttft_p50_ms", 1),
    ("TTFT p95 ms", "ttft_p95_ms", 1),
    ("ITL p50 ms", "itl_p50_ms", 2),
    ("ITL p95 ms", "itl_p95_ms", 2),
    ("e2e p95 s", "e2e_p95_s", 3),
    ("out tok/s", "output_tok_s", 0),
    ("KV max %", "kv_usage_max", 2),
    ("queue depth", "queue_depth_mean", 2),
    ("queue ms", "queue_time_mean_s", 1),
    ("ok", "requests_ok", 0),
    ("failed", "requests_failed", 0),
]

# The page itself: tunebench/report/templates/report.html.j2 (package data).
_TEMPLATES = jinja2.Environment(
    loader=jinja2.PackageLoader("tunebench.report", "templates"),
    autoescape=True,  # always: select_autoescape() would not match a .j2 name
    trim_blocks=True,
    lstrip_blocks=True,
)


def _capacity_row(config: dict) -> dict:
    capacity = config["capacity"]
    arrival = capacity.get("arrival")
    return {
        "config_id": config["config_id"],
        "label": config.get("label", ""),
        "rate": capacity_text(capacity.get("rate"), capacity_bound(capacity), arrival),
        # a search over replay speed missed at a speed, which says so
        "upper": rate_text(capacity.get("upper"), arrival)
        if is_replay(arrival)
        else sig(capacity.get("upper")),
        "probes": capacity.get("probes"),
        "note": describe_capacity(capacity),
    }


def _summary_cell(row: dict, column: str, digits: int | None) -> str:
    """A cell of the points table: a replay point's target is a speed ("2x trace")."""
    if column == "target" and is_replay(row.get("load_kind")):
        return speed_text(row.get("target"))
    return format_cell(row.get(column), digits)


def _quality_rows(run_path: Path) -> list[dict]:
    """The quality table (analysis/quality.py) as display cells."""
    table = quality_table(run_path)

    def share(value: object) -> str:
        number = to_float(value)
        return "-" if number is None else f"{number:.0%}"

    return [
        {
            "config_id": r["config_id"],
            "config": f"{r['config_id']} {r['label']}",
            "vs": quality_vs(r),
            "prompts": format_cell(r["prompts"], 0),
            "exact": share(r["exact_match"]),
            "agree": share(r["token_agreement"]),
            "top1": share(r["top1_agreement"]),
            "kl": sig(r["mean_kl"]),
            "tv": sig(r["mean_tv"]),
            "ties": format_cell(r["near_ties"], 0),
            "lm_eval": sig(r["lm_eval_score"]),
            "seconds": format_cell(r["seconds"], 1),
            "verdict": r["verdict"],
            "reasons": r["reasons"] or "",
        }
        for r in table.to_dict(orient="records")
    ]


def _cross_check_section(run_path: Path) -> dict | None:
    """The two drivers' disagreement (analysis/cross_check.py) as display cells."""
    check = run_cross_check(run_path)
    if check is None:
        return None
    a, b = check.drivers

    def interval(row: dict) -> str:
        if to_float(row["ci_low_pct"]) is None:
            return "-"
        return f"[{signed_pct(row['ci_low_pct'])}, {signed_pct(row['ci_high_pct'])}]"

    shown = check.table[check.table["metric"].isin(CROSS_CHECK_SHOWN)]
    return {
        "a": a,
        "b": b,
        "rows": [
            {
                "config": r["config_label"],
                "point": r["point"],
                "metric": r["label"],
                "a": sig(r["a"]),
                "b": sig(r["b"]),
                "change": signed_pct(r["change_pct"]),
                "interval": interval(r),
            }
            for r in shown.to_dict(orient="records")
        ],
        "verdicts": check.verdicts.to_dict(orient="records"),
    }


def _tune_section(run_path: Path) -> dict | None:
    path = RunLayout(run_path).tune_result
    if not path.exists():
        return None
    try:
        result = json.loads(path.read_text())
    except ValueError:
        return None
    best = result.get("best")
    if best:
        result["best_text"] = describe_trial_value(result.get("objective_names", []), best)
    result.setdefault("exports", {})
    for trial in result.get("trials", []):
        trial["params_text"] = ", ".join(f"{k}={v}" for k, v in (trial.get("params") or {}).items())
    return result


def summary_notes(raw: pd.DataFrame, manifest: Manifest) -> list[str]:
    """Configurations measured side by side, why the energy column is absent, what each
    configuration's roofline rests on, and every sentinel that judged nothing."""
    notes = []
    parallel = manifest.parallel or {}
    if parallel.get("note"):
        notes.append(f"fair comparison: {parallel['note']}")
    if "joules_per_output_token" not in raw or raw["joules_per_output_token"].isna().all():
        if "energy_note" in raw:
            notes += [f"J/out tok not shown: {n}" for n in raw["energy_note"].dropna().unique()[:2]]
    for config in manifest.configs:
        roofline = config.roofline or {}
        if roofline.get("bandwidth_gbs"):
            notes.append(
                f"roofline of {config.config_id}: "
                f"{roofline['weight_bytes'] / 1e6:.1f} MB of weights per decode step, "
                f"{roofline['bandwidth_gbs']:g} GB/s per device ({roofline.get('note', '')})"
            )
        elif roofline.get("note"):
            notes.append(f"no roofline for {config.config_id}: {roofline['note']}")
    return notes + sentinel_notes(manifest.configs)


def _requests_of(requests: pd.DataFrame | None, points: pd.DataFrame) -> pd.DataFrame:
    """The requests of one configuration's points (none read: an empty frame)."""
    if requests is None or requests.empty or "config_id" not in points:
        return pd.DataFrame()
    return requests[requests["config_id"].isin(set(points["config_id"].astype(str)))]


def report_context(run_path: Path) -> dict:
    raw = load_run(run_path)
    manifest = read_manifest(run_path)
    batch_run = manifest.kind == RunKind.BATCH
    points = raw  # display units below; plots use the raw frame
    if "kv_usage_max" in points:
        points = points.assign(kv_usage_max=points["kv_usage_max"] * 100)
    if "queue_time_mean_s" in points:
        points = points.assign(queue_time_mean_s=points["queue_time_mean_s"] * 1000)
    summary = SUMMARY + [
        (header, column, digits)
        for header, column, digits in OPTIONAL_COLUMNS
        if column in raw and raw[column].notna().any()
    ]
    rows = [
        {
            "cells": [_summary_cell(r, col, d) for _, col, d in summary],
            "valid": bool(r.get("valid")),
            "reason": r.get("invalid_reason") or "",
            "client_limited": r.get("client_limited") is True or r.get("client_limited") == 1,
            "client_reason": r.get("client_limited_reason") or "",
            "slo": {True: "met", False: "missed"}.get(r.get("slo_met"), ""),
        }
        for r in points.to_dict(orient="records")
    ]
    # the page's view of each configuration: its manifest entry as data, with the command
    # line joined and the effective config's unknowns left out
    configs = [
        {
            **c.model_dump(mode="json"),
            "command": " ".join(c.command_args),
            "effective": {k: v for k, v in (c.effective or {}).items() if v is not None},
        }
        for c in manifest.configs
    ]
    # the requests give each crossover its interval (read only where curves are compared)
    several = not points.empty and points["config_label"].nunique() > 1
    requests = load_requests(run_path) if several else None
    sides = (
        [
            Side(label, group, _requests_of(requests, group))
            for label, group in points.groupby("config_label", sort=False)
        ]
        if not points.empty
        else []
    )
    crossovers = (
        crossovers_between(sides, LOAD_KEY, run_cv=DEFAULT_RUN_CV) if len(sides) > 1 else []
    )
    figures = run_figures(raw, run_path) if not raw.empty else []
    tune = _tune_section(run_path)
    batch = None
    if batch_run:
        columns = [
            ("load s", "load_s", 1),
            ("init s", "init_s", 1),
            ("compile s", "compile_s", 1),
            ("generate s", "generate_s", 1),
            ("write s", "write_s", 3),  # a write takes ~1 ms: 0.00 said nothing
            ("req/s", "achieved_rps", 2),
            ("input tok/s", "input_tok_s", 0),
            ("output tok/s", "output_tok_s", 0),
            ("schema valid", "schema_valid_fraction", 3),
        ]
        batch = {
            "headers": [c[0] for c in columns],
            "records": manifest.records,
            "shards": manifest.shards,
            "rows": [
                {
                    "label": r.get("config_label"),
                    "cells": [format_cell(r.get(key), digits) for _, key, digits in columns],
                }
                for r in raw.to_dict(orient="records")
            ],
        }
    best = best_config(run_path) if not batch_run and not raw.empty else None
    quality = _quality_rows(run_path)
    diagnosis = (
        _diagnosis_rows(raw, configs, client_cores(manifest.spec))
        if not batch_run and not raw.empty
        else []
    )
    return {
        "overview": config_summary(raw, manifest, diagnosis, quality, best)
        if not batch_run
        else [],
        "batch": batch,
        "best": best,
        "best_text": headline(best) if best is not None else "",
        "capacities": [_capacity_row(c) for c in configs if c.get("capacity")],
        "quality": quality,
        "diagnosis": diagnosis,
        "cross_check": _cross_check_section(run_path),
        "tune": tune,
        "m": manifest.model_dump(mode="json"),
        "headers": [h for h, _, _ in summary],
        "rows": rows,
        "summary_notes": summary_notes(raw, manifest),
        "configs": configs,
        "failures": [c for c in configs if c.get("error")],
        "crossovers": [{**x, "load": crossover_load(x), "at": crossover_at(x)} for x in crossovers],
        "replay": replay_section(raw, run_path) if not raw.empty else None,
        "figures": [(title, base64.b64encode(png).decode()) for title, png in figures],
    }


def _capacity_cell(
    standing: Standing | None,
    config: ConfigEntry,
    has_slo: bool,
    rows: pd.DataFrame | None = None,
) -> str:
    """The configuration's capacity at the SLO, or why there is none; when it rests on
    fixed-rate points, the concurrent point that held more within the SLO (`rows`)."""
    if not has_slo:
        return "no SLO set"
    capacity = config.capacity or {}
    if capacity and capacity.get("rate") is None:
        return "not reached: no rate tried met the SLO"
    if standing is None:
        return "not probed: no fixed-rate or capacity point"
    if standing.value <= 0:
        missed = rate_text(standing.high, standing.arrival)
        text = f"not reached: missed at {missed}, the lowest rate tested"
    else:
        text = capacity_text(standing.value, standing.lower_bound, standing.arrival)
    if capacity.get("rate") is None and rows is not None:
        text += _closed_loop_note(rows, standing.value)
    return text


# Points whose client sends the next request only when an answer came back: the server
# sets their rate, so holding the SLO there proves no arrival rate (and no capacity).


def _closed_loop_note(rows: pd.DataFrame, capacity: float) -> str:
    """ "; counts fixed-rate points only: concurrent-8 held 24.3 req/s ..." when a
    closed-loop point met the SLO at a higher achieved rate than the capacity shown."""
    if "load_kind" not in rows or "slo_met" not in rows or "achieved_rps" not in rows:
        return ""
    held = [
        row
        for row in rows.to_dict(orient="records")
        if row.get("load_kind") in LoadKind.CLOSED_LOOP
        and trust.is_server_evidence(row)
        and trust.flag(row.get("slo_met"))
        and (to_float(row.get("achieved_rps")) or 0) > capacity
    ]
    if not held:
        return ""
    top = max(held, key=lambda row: to_float(row.get("achieved_rps")) or 0)
    return (
        f"; counts fixed-rate points only: {top['point_id']} held "
        f"{readable(top['achieved_rps'])} req/s within the SLO, a rate the server set (its "
        "streams wait for answers), not one it was offered"
    )


def _best_point_cell(rows: pd.DataFrame, has_slo: bool) -> str:
    """The configuration's best valid point (the most goodput within the SLO, else output
    tok/s) and its numbers."""
    valid = rows[rows["valid"] == True] if "valid" in rows else rows  # noqa: E712
    pool = valid
    metric = "output_tok_s"
    if has_slo and "slo_met" in valid and "goodput_rps" in valid:
        met = valid[valid["slo_met"] == True]  # noqa: E712
        if not met.empty and met["goodput_rps"].notna().any():
            pool, metric = met, "goodput_rps"
    pool = pool[pool[metric].notna()] if metric in pool else pool.iloc[0:0]
    if pool.empty:
        return "no valid point"
    row = pool.loc[pool[metric].idxmax()]
    parts = [
        f"{readable(row.get('achieved_rps'))} req/s",
        f"TTFT p95 {readable(row.get('ttft_p95_ms'))} ms",
        f"ITL p50 {readable(row.get('itl_p50_ms'))} ms",
        f"{readable(row.get('output_tok_s'))} out tok/s",
    ]
    return f"{row['point_id']}: " + ", ".join(parts)


def _untrusted_cell(rows: pd.DataFrame) -> str:
    """Points whose numbers cannot be taken at their word: invalid, client-limited, or
    with something no check confirmed (points/trust.py)."""
    invalid, limited, unchecked = [], [], []
    for row in rows.to_dict(orient="records"):
        point = str(row.get("point_id"))
        if not trust.is_valid(row):
            invalid.append(point)
            continue
        if trust.flag(row.get("client_limited")):
            limited.append(point)
        if trust.unverified_reasons(row):
            unchecked.append(point)
    parts = [
        f"{what}: {', '.join(points)}"
        for what, points in (
            ("invalid", invalid),
            ("client-limited", limited),
            ("unverified", unchecked),
        )
        if points
    ]
    return "; ".join(parts) or "none"


def config_summary(
    raw: pd.DataFrame,
    manifest: Manifest,
    diagnosis: list[dict[str, Any]],
    quality: list[dict[str, Any]],
    best: dict[str, Any] | None,
) -> list[dict[str, Any]]:
    """The table a user reads first: per configuration its capacity at the SLO, its best
    point, what limits it, its quality verdict and the points not to take at their word."""
    has_slo = bool((manifest.spec or {}).get("slo"))
    standings = capacities(raw, manifest)
    verdicts = {str(q["config_id"]): q["verdict"] for q in quality}
    limits: dict[str, str] = {}
    for finding in diagnosis:  # ranked: the first per configuration is the cause
        limits.setdefault(str(finding["config_id"]), str(finding["rule"]))
    tied = set((best or {}).get("tie", {}).get("configs", []))
    out = []
    for config in manifest.configs:
        config_id = config.config_id
        rows = raw[raw["config_id"] == config_id] if not raw.empty else raw
        failed = config.status == ConfigStatus.FAILED or bool(config.error)
        out.append(
            {
                "config": f"{config_id} {config.label}".strip(),
                "best": best is not None and best.get("config_id") == config_id,
                "tied": config_id in tied,
                "capacity": "failed: no point measured"
                if failed and rows.empty
                else _capacity_cell(standings.get(config_id), config, has_slo, rows),
                "point": _best_point_cell(rows, has_slo) if not rows.empty else "-",
                "limits": limits.get(config_id, "nothing found" if not rows.empty else "-"),
                "quality": verdicts.get(config_id, "-"),
                "untrusted": _untrusted_cell(rows) if not rows.empty else "-",
            }
        )
    return out


def _diagnosis_rows(
    raw: Any, configs: list[dict[str, Any]], client_cpus: str | None = None
) -> list[dict[str, Any]]:
    """The findings, and a row per configuration that could not be diagnosed (no finding
    there is no evidence of health)."""
    records = raw.to_dict(orient="records")
    findings = diagnose_run(records, configs, client_cpus)
    rows = [f.__dict__ | {"points": ", ".join(f.points)} for f in findings]
    seen = {f.config_id for f in findings}
    labels = {c["config_id"]: c.get("label") or "" for c in configs}
    for config_id, why in blind_spots(records, configs).items():
        if config_id not in seen:
            rows.append(
                {
                    "config_id": config_id,
                    "label": labels.get(config_id, ""),
                    "rule": CANNOT_DIAGNOSE,
                    "cause": why,
                    "suggestion": "measure it with tunebench sweep (the server's /metrics)",
                    "points": "",
                }
            )
    return rows


def write_report(run_path: Path) -> Path:
    target = RunLayout(Path(run_path)).report
    template = _TEMPLATES.get_template("report.html.j2")
    write_atomic(target, template.render(**report_context(Path(run_path))))
    return target
