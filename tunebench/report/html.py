"""`reports/<run>/report.html`: one self-contained file (images inline, no network)."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import jinja2
import pandas as pd

from tunebench.analysis.compare import LOAD_KEY, Side, crossovers_between
from tunebench.analysis.frames import load_manifest, load_run
from tunebench.analysis.plots import run_figures
from tunebench.report.formats import cell as format_cell
from tunebench.report.formats import sig
from tunebench.report.text import describe_capacity
from tunebench.store.files import write_atomic
from tunebench.store.layout import RunLayout

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

TEMPLATE = jinja2.Template(
    """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>tunebench {{ m.run_id }}</title>
<style>
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2rem;color:#1d1d1f;max-width:1200px}
h1{font-size:1.5rem;margin-bottom:.2rem} h2{font-size:1.15rem;margin-top:2rem;border-bottom:1px solid #ddd}
table{border-collapse:collapse;font-size:.85rem;margin:.5rem 0} th,td{padding:.25rem .5rem;border-bottom:1px solid #eee;text-align:right}
th{background:#f5f5f7} td.l,th.l{text-align:left} .bad{color:#b00020} .ok{color:#0a7d32} .muted{color:#666}
.status-complete{color:#0a7d32} .status-failed,.status-interrupted{color:#b00020}
figure{display:inline-block;margin:.5rem 1rem 1rem 0} figcaption{font-size:.85rem;color:#444}
img{max-width:100%;border:1px solid #eee} pre{background:#f7f7f7;padding:.5rem;font-size:.75rem;overflow-x:auto}
code{font-size:.8rem}
</style></head><body>
<h1>{{ m.name }} <span class="muted">· {{ m.run_id }}</span></h1>
<p>Status <b class="status-{{ m.status }}">{{ m.status }}</b> · started {{ m.started_at }} · ended {{ m.ended_at or "-" }}
{% if m.spec and m.spec.description %}<br>{{ m.spec.description }}{% endif %}</p>

{% if failures %}<h2>Failures</h2>
{% for c in failures %}<p class="bad"><b>{{ c.config_id }} ({{ c.label }})</b>: {{ c.error }}</p>
{% if c.log_tail %}<pre>{{ c.log_tail }}</pre>{% endif %}{% endfor %}{% endif %}

<h2>Summary</h2>
{% if rows %}<table><tr>{% for h in headers %}<th class="{{ 'l' if loop.index <= 2 else '' }}">{{ h }}</th>{% endfor %}<th class="l">valid</th></tr>
{% for r in rows %}<tr>{% for cell in r.cells %}<td class="{{ 'l' if loop.index <= 2 else '' }}">{{ cell }}</td>{% endfor %}
<td class="l {{ 'ok' if r.valid else 'bad' }}">{{ 'yes' if r.valid else 'no: ' ~ r.reason }}{% if r.client_limited %} <span class="muted" title="{{ r.client_reason }}">(client-limited)</span>{% endif %}{% if r.slo %} · SLO {{ r.slo }}{% endif %}</td></tr>{% endfor %}</table>
{% else %}<p class="muted">No points were measured.</p>{% endif %}

{% if crossovers %}<h2>Crossovers</h2><ul>
{% for x in crossovers %}<li>{{ x.metric }} ({{ x.load_kind }}): <b>{{ x.baseline }}</b> and <b>{{ x.candidate }}</b> cross at target ≈ {{ '%.2f'|format(x.target) }}; below it {{ x.better_below }} is lower, above it {{ x.better_above }}.</li>{% endfor %}
</ul>{% endif %}

{% if batch %}<h2>Batch phases and throughput</h2>
<table><tr><th class="l">config</th>{% for h in batch.headers %}<th>{{ h }}</th>{% endfor %}</tr>
{% for r in batch.rows %}<tr><td class="l">{{ r.label }}</td>{% for cell in r.cells %}<td>{{ cell }}</td>{% endfor %}</tr>{% endfor %}</table>
<p class="muted">{{ batch.records }} records, {{ batch.shards }} shard(s). Phases of the slowest shard; tokens/s over the generation span of all shards.</p>{% endif %}

{% if capacities %}<h2>Capacity at SLO</h2>
<table><tr><th class="l">config</th><th>capacity req/s</th><th>missed at</th><th>probes</th><th class="l">note</th></tr>
{% for c in capacities %}<tr><td class="l">{{ c.config_id }}: {{ c.label }}</td><td>{{ c.rate }}</td><td>{{ c.upper }}</td><td>{{ c.probes }}</td><td class="l">{{ c.note }}</td></tr>{% endfor %}</table>{% endif %}

{% if tune %}<h2>Tuning</h2>
<p>{{ tune.deployments }} deployments ({{ tune.failed }} failed, {{ tune.pruned }} pruned); objective {{ tune.objective }}.
{% if tune.best %}Best: <b>trial {{ tune.best.trial }}</b> ({{ tune.best_text }}){% if tune.improvement_pct is not none %}, {{ '%+.1f'|format(tune.improvement_pct) }}% over the baseline (vLLM defaults){% endif %}.{% endif %}</p>
{% if tune.importances %}<p>Parameter importance: {% for k, v in tune.importances.items() %}{{ k }} {{ '%.2f'|format(v) }}{% if not loop.last %}, {% endif %}{% endfor %}</p>{% endif %}
{% if tune.exports.serve_command %}<p><code>{{ tune.exports.serve_command }}</code></p>{% endif %}
<table><tr><th>trial</th><th class="l">state</th><th class="l">params</th><th>value</th><th class="l">note</th></tr>
{% for t in tune.trials %}{% if not t.note.startswith('same args') %}<tr><td>{{ t.trial }}</td><td class="l">{{ t.state }}</td><td class="l">{{ 'baseline' if t.baseline else t.params_text }}</td><td>{{ t['values']|join(', ') if t['values'] else '-' }}</td><td class="l">{{ t.note }}</td></tr>{% endif %}{% endfor %}</table>{% endif %}

<h2>Server configurations</h2>
{% for c in configs %}<h3>{{ c.config_id }}: {{ c.label }} <span class="muted">({{ c.status }})</span></h3>
<p>model <code>{{ c.model }}</code><br>args <code>{{ c.command }}</code>{% if c.start_s %}<br>start-up {{ c.start_s }} s{% endif %}</p>
{% if c.invalid_reasons %}<p class="bad">Not in effect: {{ c.invalid_reasons|join('; ') }}</p>{% endif %}
{% if c.effective %}<table>{% for k, v in c.effective.items() %}<tr><td class="l">{{ k }}</td><td class="l">{{ v }}</td></tr>{% endfor %}</table>{% endif %}
{% endfor %}

<h2>Plots</h2>
{% for title, data in figures %}<figure><img src="data:image/png;base64,{{ data }}" alt="{{ title }}"><figcaption>{{ title }}</figcaption></figure>
{% endfor %}

<h2>Versions and host</h2>
<table>{% for k, v in m.versions.items() %}<tr><td class="l">{{ k }}</td><td class="l">{{ v }}</td></tr>{% endfor %}
{% for k, v in m.host.items() %}<tr><td class="l">{{ k }}</td><td class="l">{{ v }}</td></tr>{% endfor %}</table>
<p class="muted">Generated by tunebench from {{ m.run_id }}/points.csv. Gauge columns are 1 s samples; queue depth is a time average from the queue-time histogram.</p>
</body></html>
""",
    autoescape=True,
)


def _capacity_row(config: dict) -> dict:
    capacity = config["capacity"]
    return {
        "config_id": config["config_id"],
        "label": config.get("label", ""),
        "rate": sig(capacity.get("rate")),
        "upper": sig(capacity.get("upper")),
        "probes": capacity.get("probes"),
        "note": describe_capacity(capacity),
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
        result["best_text"] = ", ".join(
            f"{n} {v:.4g}" for n, v in zip(result.get("objective_names", []), best["values"])
        )
    result.setdefault("exports", {})
    for trial in result.get("trials", []):
        trial["params_text"] = ", ".join(f"{k}={v}" for k, v in (trial.get("params") or {}).items())
    return result


def report_context(run_path: Path) -> dict:
    raw = load_run(run_path)
    manifest = load_manifest(run_path)
    points = raw  # display units below; plots use the raw frame
    if "kv_usage_max" in points:
        points = points.assign(kv_usage_max=points["kv_usage_max"] * 100)
    if "queue_time_mean_s" in points:
        points = points.assign(queue_time_mean_s=points["queue_time_mean_s"] * 1000)
    rows = [
        {
            "cells": [format_cell(r.get(col), d) for _, col, d in SUMMARY],
            "valid": bool(r.get("valid")),
            "reason": r.get("invalid_reason") or "",
            "client_limited": r.get("client_limited") is True or r.get("client_limited") == 1,
            "client_reason": r.get("client_limited_reason") or "",
            "slo": {True: "met", False: "missed"}.get(r.get("slo_met"), ""),
        }
        for r in points.to_dict(orient="records")
    ]
    configs = [
        {
            **c,
            "command": " ".join(c.get("command_args") or []),
            "effective": {k: v for k, v in (c.get("effective") or {}).items() if v is not None},
        }
        for c in manifest.get("configs", [])
    ]
    sides = (
        [
            Side(label, group, pd.DataFrame())
            for label, group in points.groupby("config_label", sort=False)
        ]
        if not points.empty
        else []
    )
    crossovers = crossovers_between(sides, LOAD_KEY) if len(sides) > 1 else []
    figures = run_figures(raw, run_path) if not raw.empty else []
    tune = _tune_section(run_path)
    batch = None
    if manifest.get("kind") == "batch":
        columns = [
            ("load s", "load_s", 1),
            ("init s", "init_s", 1),
            ("compile s", "compile_s", 1),
            ("generate s", "generate_s", 1),
            ("write s", "write_s", 2),
            ("req/s", "achieved_rps", 2),
            ("input tok/s", "input_tok_s", 0),
            ("output tok/s", "output_tok_s", 0),
            ("schema valid", "schema_valid_fraction", 3),
        ]
        batch = {
            "headers": [c[0] for c in columns],
            "records": manifest.get("records"),
            "shards": manifest.get("shards"),
            "rows": [
                {
                    "label": r.get("config_label"),
                    "cells": [format_cell(r.get(key), digits) for _, key, digits in columns],
                }
                for r in raw.to_dict(orient="records")
            ],
        }
    return {
        "batch": batch,
        "capacities": [_capacity_row(c) for c in configs if c.get("capacity")],
        "tune": tune,
        "m": {
            **manifest,
            "versions": manifest.get("versions", {}),
            "host": manifest.get("host", {}),
        },
        "headers": [h for h, _, _ in SUMMARY],
        "rows": rows,
        "configs": configs,
        "failures": [c for c in configs if c.get("error")],
        "crossovers": crossovers,
        "figures": [(title, base64.b64encode(png).decode()) for title, png in figures],
    }


def write_report(run_path: Path) -> Path:
    target = RunLayout(Path(run_path)).report
    write_atomic(target, TEMPLATE.render(**report_context(Path(run_path))))
    return target
