"""Console tables other than the points table: runs, plans, batch phases, tune trials."""

from __future__ import annotations

import os
from typing import Any

from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from tunebench.points.offered import is_replay, speed_text
from tunebench.report.formats import plural, sig, signed_pct
from tunebench.report.text import describe_capacity, describe_trial_value
from tunebench.spec.cores import cores_line


def starts_text(starts: Any) -> str:
    """Where the estimate's server starts came from (a sweep.estimate.MeasuredStarts)."""
    if starts is None:
        return ""
    return (
        f"; server starts as {starts.run_id} measured them "
        f"({starts.seconds:.0f} s, the median of {starts.count})"
    )


def measured_text(seconds: float | tuple[float, float], same: Any) -> str:
    """The estimate when an earlier run of the very same spec measured it whole (a
    sweep.estimate.MeasuredRun): its wall time, the parts' model beside it."""
    low = seconds[0] if isinstance(seconds, tuple) else seconds
    return (
        f"{duration_text(same.seconds)}, what {same.run_id} of the same spec took "
        f"(the parts' estimate: {low:.0f} s)"
    )


def duration_text(seconds: float | tuple[float, float]) -> str:
    """An estimate as a person reads it: seconds under two minutes, minutes above; a range
    (low, high) adds its high end when it is 5% or more above the low."""
    low, high = seconds if isinstance(seconds, tuple) else (seconds, seconds)
    text = (
        f"about {max(1, round(low))} s" if low < 120 else f"about {low / 60:.0f} min ({low:.0f} s)"
    )
    if high > 1.05 * low:
        text += f", up to {high / 60:.0f} min if capacities lie below half their start rates"
    return text


def wide_console(stderr: bool = False, soft_wrap: bool = False) -> Console:
    """The terminal's width; when output is piped, COLUMNS if set, else 200 columns (so a
    file or a CI log gets every column instead of rich's 80). With `soft_wrap`, piped text
    is never cut into lines (progress: one event a line however long)."""
    console = Console(highlight=False, stderr=stderr)
    if console.is_terminal:
        return console
    width = None if os.environ.get("COLUMNS", "").isdigit() else 200
    return Console(highlight=False, stderr=stderr, width=width, soft_wrap=soft_wrap)


def runs_table(entries: list[tuple[str, Any]]) -> Table:
    """(run directory name, manifest or the error that made it unreadable) per run."""
    table = Table(header_style="bold")
    for header in ("run", "kind", "status", "configs", "points", "started (UTC)"):
        table.add_column(header)
    for name, entry in entries:
        if isinstance(entry, Exception):
            table.add_row(name, "", f"unreadable: {entry}", "", "", "")
            continue
        manifest, points = entry
        table.add_row(
            name,
            manifest.kind.value,
            manifest.status.value,
            str(len(manifest.configs)),
            str(points),
            manifest.started_at,
        )
    return table


def capacity_lines(configs: list[Any]) -> list[str]:
    return [
        f"{c.config_id} ({c.label}): {describe_capacity(c.capacity)}" for c in configs if c.capacity
    ]


def failure_lines(configs: list[Any]) -> list[Text]:
    return [
        Text(f"{c.config_id} failed: ", style="red") + Text(str(c.error))
        for c in configs
        if c.error
    ]


def sentinel_notes(configs: list[Any]) -> list[str]:
    """Every sentinel that judged nothing (not measured, not compared), per configuration and
    repeat: its points were not checked for a drift between them, and the run says so."""
    notes = []
    for config in configs:
        records = config.sentinels or ([config.sentinel] if config.sentinel else [])
        for record in records:
            if record.get("note"):
                notes.append(
                    f"{config.config_id} repeat {record.get('repeat', 1)}: {record['note']} "
                    "(whether the machine held its speed over its points is not checked)"
                )
    return notes


def arg_check_lines(configs: list[Any]) -> list[Text]:
    """Per configuration, how many requested args the server showed, and every arg it could
    not read back (never silently "ok"); mismatches are in the points' invalid reasons."""
    lines = []
    for config in configs:
        checks = config.arg_checks or []
        if not checks:
            continue
        states = [c.get("state") for c in checks]
        line = Text(f"{config.config_id} args: {states.count('verified')} verified")
        if states.count("mismatch"):
            line += Text(f", {states.count('mismatch')} not in effect", style="red")
        unverified = [c for c in checks if c.get("state") == "unverified"]
        if unverified:
            line += Text(f", {len(unverified)} unverified: ", style="yellow")
            line += Text("; ".join(str(c.get("reason")) for c in unverified))
        lines.append(line)
    return lines


def sweep_plan(
    spec: Any,
    plan: Any,
    seconds: float | tuple[float, float],
    server_args: dict[str, list[str]] | None = None,
    starts: Any = None,
    same: Any = None,
) -> Group:
    """The plan a dry-run prints. `server_args`: per configuration, the args its server will
    run with where they are not the spec's alone (a helm chart's values files add theirs).
    `starts`: the earlier run whose server starts the estimate took (MeasuredStarts);
    `same`: an earlier whole run of the very same spec (MeasuredRun), whose wall time is
    the estimate."""
    configs = Table(
        title=f"plan for {spec.name}: {plural(len(plan.configs), 'configuration')} x "
        f"{plural(len(plan.points), 'point')}"
        + (f" x {plan.repeats} repeats" if plan.repeats > 1 else "")
    )
    configs.add_column("config")
    for header in ("model", "engine args"):  # whole, over lines: two models may differ at the end
        configs.add_column(header, overflow="fold")
    for config in plan.configs:
        configs.add_row(
            f"{config.config_id}: {config.label}",
            config.model,
            " ".join((server_args or {}).get(config.config_id, config.command_args())),
        )
    points = Table(title="load points (each configuration)")
    replays = any(is_replay(point.kind) for point in plan.points)
    for header in (
        "point",
        "kind",
        # a replay's target is a speed of its trace
        "target (streams, req/s or speed)" if replays else "target (streams or req/s)",
        "limit",
        "warmup / cooldown (s or share)",
    ):
        points.add_column(header)
    for point in plan.points:
        limit = ", ".join(
            x
            for x in (
                f"{point.max_seconds:g} s" if point.max_seconds else "",
                f"{point.max_requests} requests" if point.max_requests else "",
            )
            if x
        )
        crop = " / ".join(sig(x) if x is not None else "-" for x in (point.warmup, point.cooldown))
        target = speed_text(point.target) if is_replay(point.kind) else sig(point.target)
        points.add_row(point.point_id, point.kind, target, limit, crop)
    lines: list[Table | Text] = [configs, points]
    quality = getattr(spec, "quality", None)
    if quality is not None:
        lines.append(Text(_quality_plan(quality, plan.configs)))
    cores = cores_line(spec)
    if cores is not None:
        lines.append(Text(cores))
    lines.append(
        Text(
            f"deployment: {spec.deployment.kind}; estimated time: "
            + (
                measured_text(seconds, same)
                if same
                else duration_text(seconds) + starts_text(starts)
            )
        )
    )
    return Group(*lines)


def _quality_plan(quality: Any, configs: list[Any]) -> str:
    """What the quality check will ask every configuration, and what it compares with."""
    prompts = "the 16 shipped prompts" if quality.prompts == "default" else quality.prompts
    wanted = quality.reference
    reference = next(
        (c for c in configs if wanted in (c.config_id, c.label)), configs[0] if configs else None
    )
    named = f"{reference.config_id} ({reference.label})" if reference is not None else "-"
    line = (
        f"quality check: {prompts}, {quality.max_tokens} greedy tokens each, before the load "
        f"of every configuration; compared with {named}"
    )
    if quality.lm_eval is not None:
        line += f"; lm-eval {quality.lm_eval.task} (limit {quality.lm_eval.limit})"
    return line


def tune_summary(summary: dict[str, Any], exports: dict[str, str]) -> Group:
    from tunebench.spec.plan import format_value

    names = summary["objective_names"]
    table = Table(
        title=f"trials ({summary['deployments']} deployments, {summary['failed']} "
        f"failed, {summary['pruned']} pruned)"
    )
    for column in ("trial", "state", "params", *names, "note"):
        table.add_column(column)
    repeats = [r for r in summary["trials"] if r["note"].startswith("same args as trial")]
    # a hint the study queued for a trial the trial limit left out: not a trial that ran
    queued = [r for r in summary["trials"] if r["state"] == "WAITING"]
    for row in summary["trials"]:
        if row in repeats or row in queued:
            continue
        params = ", ".join(f"{k}={format_value(v)}" for k, v in row["params"].items())
        values = row["values"] or [None] * len(names)
        table.add_row(
            str(row["trial"]),
            row["state"],
            "baseline" if row["baseline"] else params,
            *(sig(v, 4) for v in values),
            row["note"][:70],
        )
    parts: list[Any] = [table]
    for row in queued:
        what = f": {row['note']}" if row["note"] else ""
        parts.append(Text(f"queued, not run (the trial limit came first){what}", style="dim"))
    if repeats:
        parts.append(
            Text(
                f"{len(repeats)} proposal(s) repeated measured args and were not deployed again",
                style="dim",
            )
        )
    best = summary["best"]
    if best is None:
        parts.append(Text("no trial completed", style="red"))
        return Group(*parts)
    value = describe_trial_value(names, best)
    parts.append(Text(f"best: trial {best['trial']} ({value})", style="bold"))
    if summary.get("improvement_pct") is not None:
        base = summary["baseline"]["values"][0]
        parts.append(
            Text(
                f"  vs baseline (vLLM defaults, {sig(base, 4)}): {summary['improvement_pct']:+.1f}%"
            )
        )
    if summary.get("pareto"):
        parts.append(
            Text(
                "  Pareto front: "
                + "; ".join(
                    f"trial {p['trial']} ({', '.join(sig(v, 4) for v in p['values'])})"
                    for p in summary["pareto"]
                )
            )
        )
    check = summary.get("revalidation")
    if check:
        style = {"confirmed": "bold green", "tie": "bold yellow"}.get(check["verdict"], "yellow")
        parts.append(Text(f"  re-validation: {check['verdict_text']}", style=style))
        for entry in check["contenders"]:
            runs = ", ".join(sig(v, 4) for v in entry["values"]) or "none"
            failed = f"; {len(entry['failures'])} failed" if entry["failures"] else ""
            parts.append(
                Text(
                    f"    {entry['role']} (trial {entry['trial']}, {entry['label']}): tuned "
                    f"{sig(entry['tuned'], 4)}, re-runs {runs}{failed}"
                )
            )
    if summary["importances"]:
        parts.append(
            Text(
                "  importance: "
                + ", ".join(f"{k} {v:.2f}" for k, v in summary["importances"].items())
            )
        )
    if exports.get("helm_values"):
        parts.append(Text(f"  helm values: {exports['helm_values']}"))
    if exports.get("serve_command"):
        parts.append(Text(f"  vllm serve: {exports['serve_command']}"))
    return Group(*parts)


def tune_space(
    spec: Any, plan: Any, trials: int, seconds: float | tuple[float, float], starts: Any = None
) -> Group:
    baseline = " ".join(plan.configs[0].command_args()) or "vLLM defaults"
    table = Table(
        title=f"tune {spec.name}: objective {spec.tune.objective}, {trials} "
        f"deployments (baseline: {baseline})"
    )
    for column in ("param", "kind", "range / choices", "when"):
        table.add_column(column)
    for name, param in spec.tune.space.items():
        if param.kind == "categorical":
            values = ", ".join("default" if c is None else str(c) for c in param.choices)
        else:
            values = (
                f"{param.low:g} .. {param.high:g}"
                + (" (log)" if param.log else "")
                + (f" step {param.step:g}" if param.step else "")
            )
        when = ", ".join(f"{k}={v}" for k, v in (param.when or {}).items())
        table.add_row(name, param.kind, values, when or "-")
    return Group(
        table,
        Text(
            f"deployment: {spec.deployment.kind}; estimated time for {trials} "
            f"deployment{'s' if trials != 1 else ''}: {duration_text(seconds)}"
            + starts_text(starts)
        ),
    )


CROSS_CHECK_SHOWN = ("output_tok_s", "achieved_rps", "ttft_p50", "ttft_p95", "itl_p50", "e2e_p50")
CROSS_CHECK_STYLES = {"agree": "green", "undecided": "yellow"}


def cross_check_view(check: Any) -> Group | None:
    """A cross-check (analysis/cross_check.py) for the console: the disagreement per point
    and metric, then one verdict per point; None when the run has no cross-checked points."""
    if check is None or check.table.empty:
        return None
    a, b = check.drivers
    table = Table(
        title=f"cross-check: {b} vs {a} on the same server, points alternated (97.5% intervals)",
        title_justify="left",
    )
    for name in ("config", "point", "metric", a, b, f"{b} vs {a}", "interval"):
        table.add_column(name, justify="left" if name in ("config", "point", "metric") else "right")
    rows = check.table[check.table["metric"].isin(CROSS_CHECK_SHOWN)]
    for row in rows.itertuples():
        table.add_row(
            str(row.config_label),
            str(row.point),
            str(row.label),
            sig(row.a),
            sig(row.b),
            signed_pct(row.change_pct),
            "-"
            if row.ci_low_pct != row.ci_low_pct or row.ci_low_pct is None
            else f"[{signed_pct(row.ci_low_pct)}, {signed_pct(row.ci_high_pct)}]",
        )
    lines: list[Any] = [table]
    for verdict in check.verdicts.itertuples():
        style = CROSS_CHECK_STYLES.get(str(verdict.verdict), "red")
        text = Text(f"  {verdict.config_label} {verdict.point}: ")
        text += Text(str(verdict.verdict), style=style)
        text += Text(f" ({verdict.evidence})")
        lines.append(text)
    return Group(*lines)


def diagnosis_lines(
    findings: list[Any], configs: list[dict[str, Any]], blind: dict[str, str] | None = None
) -> list[Text]:
    """`tunebench explain`: each configuration, then its findings ranked, or why there is
    none: nothing limits it, or nothing could be read (`blind`, never a green line)."""
    lines: list[Text] = []
    for config in configs:
        mine = [f for f in findings if f.config_id == config["config_id"]]
        lines.append(Text(f"{config['config_id']} {config.get('label') or ''}", style="bold"))
        unseen = (blind or {}).get(config["config_id"])
        if not mine and unseen:
            lines.append(Text(f"  cannot diagnose: {unseen}", style="yellow"))
            continue
        if not mine:
            lines.append(Text("  no finding: nothing in its metrics limits it", style="green"))
            continue
        for number, finding in enumerate(mine, start=1):
            text = Text(f"  {number}. ")
            text += Text(finding.rule, style="red" if number == 1 else "yellow")
            text += Text(f": {finding.cause}")
            lines.append(text)
            lines.append(Text(f"     try: {finding.suggestion}"))
            lines.append(Text(f"     at: {', '.join(finding.points)}", style="dim"))
    return lines
