"""`tunebench sweep SPEC`: run every server configuration x load point of a sweep file."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

import typer

from tunebench.cli.common import (
    live_progress,
    new_run_root,
    root_of,
    root_option,
    same_spec_run_here,
    starts_here,
    write_report_keeping_the_run,
    writing,
)
from tunebench.errors import UsageError
from tunebench.report.next_steps import resume_hint

if TYPE_CHECKING:
    from tunebench.spec.plan import Plan


def register(app: typer.Typer) -> None:
    @app.command("sweep")
    def sweep(
        spec_path: Optional[Path] = typer.Argument(
            None,
            metavar="SPEC",
            help="A sweep file, e.g. sweeps/cpu-demo.yaml (not with --resume).",
        ),
        root: Optional[Path] = root_option(
            "Where the run is stored (overrides the spec's `output`, default reports/)."
        ),
        dry_run: bool = typer.Option(
            False,
            "--dry-run",
            help="Print the plan and a time estimate (the measured time of an earlier run "
            "of the same spec under the run root, where there is one); start nothing.",
        ),
        report: bool = typer.Option(
            True, "--report/--no-report", help="Write report.html at the end."
        ),
        keep: bool = typer.Option(
            False,
            "--keep",
            help="deployment kind helm: leave the last configuration's release installed.",
        ),
        resume: Optional[str] = typer.Option(
            None,
            "--resume",
            metavar="RUN",
            help="Finish an interrupted or failed run (id, unique part of it, or path): stored "
            "points are kept, the rest measured.",
        ),
        only: Optional[str] = typer.Option(
            None,
            "--only",
            metavar="IDS",
            help="Measure only these configurations of the plan (ids or labels, "
            "comma-separated), keeping their ids: one part of a sweep split over machines or "
            "TaskRuns; `tunebench merge` joins the parts into one run.",
        ),
        ids_json: bool = typer.Option(
            False,
            "--ids-json",
            help="With --dry-run: print only the plan's configuration ids as a JSON array, "
            'e.g. ["c1","c2"] (a Tekton array result for a matrix of `--only` parts).',
        ),
        slurm: Optional[Path] = typer.Option(
            None,
            "--slurm",
            metavar="PATH",
            help="Write a Slurm job array (one task per configuration, each `--only` one), "
            "its merge job and a submit script beside PATH, instead of running.",
        ),
    ) -> None:
        """Deploy each server configuration, drive GuideLLM load at each point, store the run.

        Examples:
          tunebench sweep sweeps/cpu-demo.yaml
          tunebench sweep sweeps/latency.yaml --dry-run
          tunebench sweep sweeps/openshift-latency.yaml --keep
          tunebench sweep --resume 20261121-101500-cpu-demo
          tunebench sweep sweeps/latency.yaml --only c1,c2   # then: tunebench merge RUN RUN
          tunebench sweep sweeps/latency.yaml --dry-run --ids-json   # ["c1","c2","c3"]
          tunebench sweep sweeps/latency.yaml --slurm latency.sbatch  # then: bash latency-submit.sh
        """
        from tunebench import assemble
        from tunebench.report.tables import sweep_plan, wide_console
        from tunebench.spec.loadable import check_sweep
        from tunebench.spec.loading import read_yaml_mapping, validate_spec
        from tunebench.sweep.estimate import estimate_range
        from tunebench.sweep.run import run_sweep

        out = wide_console()
        if resume is not None:
            if spec_path is not None or dry_run:
                raise UsageError(
                    "--resume RUN takes the sweep from the run; give no SPEC and no --dry-run"
                )
            _resume(out, resume, root, report, keep)
            return
        if spec_path is None:
            raise UsageError("give a sweep file (tunebench sweep SPEC) or --resume RUN")
        if ids_json and not dry_run:
            raise UsageError("--ids-json prints the plan: give it with --dry-run")
        spec_data = read_yaml_mapping(spec_path)
        spec = validate_spec(spec_data, spec_path)
        plan = assemble.plan(spec, spec_path)
        if only is not None:
            plan = only_configs(plan, only, spec_path)
        if dry_run and ids_json:
            typer.echo(config_ids_json(plan))
            return
        # a misspelt arg or a model not here fails now, not a server start later (a Slurm
        # job runs where its own vLLM and models are)
        notes = check_sweep(spec, spec_path, dry_run=dry_run) if slurm is None else []
        if dry_run:
            run_root = new_run_root(root, spec.output, spec_path, make=False)  # as the run would
            starts = starts_here(run_root, spec)
            seconds = estimate_range(spec, plan, starts.seconds if starts else None)
            # a part (--only) runs fewer configurations than the whole run measured
            same = same_spec_run_here(run_root, spec_data, spec) if only is None else None
            args = chart_args(spec, spec_path, plan)
            out.print(sweep_plan(spec, plan, seconds, args, starts, same))
            for note in notes:
                out.print(f"note: {note}", highlight=False, soft_wrap=True)
            return
        for note in notes:
            typer.echo(f"note: {note}", err=True)
        if slurm is not None:
            from tunebench.sweep.slurm import write_sweep_array

            with writing(slurm, "--slurm"):
                scripts = write_sweep_array(
                    spec,
                    spec_path,
                    [c.config_id for c in plan.configs],
                    slurm,
                    root_of(root, spec.output),
                )
            typer.echo(f"sbatch array: {scripts.array} ({len(plan.configs)} configurations)")
            typer.echo(f"merge job:    {scripts.merge}")
            typer.echo(f"submit with:  bash {scripts.submit}   (--wait: until the merge ends)")
            return
        output = new_run_root(root, spec.output, spec_path)
        stores: list = []
        where = lambda: resume_hint(stores[0].path) if stores else None  # noqa: E731
        with live_progress(where) as reporter:
            result = run_sweep(
                spec,
                spec_path,
                spec_data,
                plan,
                output,
                reporter,
                on_store=stores.append,
                keep=keep,
                only=only is not None,
            )
        _finish(out, result, report)


def config_ids_json(plan: Plan) -> str:
    """The plan's configuration ids in plan order, as one compact JSON array."""
    return json.dumps([c.config_id for c in plan.configs], separators=(",", ":"))


def only_configs(plan, only: str, spec_path: Path):
    """The plan with only the configurations `only` names (ids or labels), ids kept."""
    import dataclasses

    wanted = [w.strip() for w in only.split(",") if w.strip()]
    known = {c.config_id: c for c in plan.configs} | {c.label: c for c in plan.configs}
    unknown = [w for w in wanted if w not in known]
    if unknown or not wanted:
        names = ", ".join(f"{c.config_id} ({c.label})" for c in plan.configs)
        raise UsageError(
            f"{spec_path}: --only {', '.join(unknown) or repr(only)}: not a configuration of the "
            f"plan; it has {names}"
        )
    chosen = {known[w].config_id for w in wanted}
    return dataclasses.replace(plan, configs=[c for c in plan.configs if c.config_id in chosen])


def _resume(out, ref: str, root: Optional[Path], report: bool, keep: bool) -> None:
    from tunebench.store.run import resolve_run
    from tunebench.sweep.resume import resume_sweep

    path = resolve_run(ref, root_of(root))
    with live_progress(lambda: resume_hint(path)) as reporter:
        result = resume_sweep(path, path.parent, reporter, keep=keep)
    if result is None:
        out.print(f"run {path.name} is complete; nothing to resume")
        return
    _finish(out, result, report)


def _finish(out, result, report: bool) -> None:
    from tunebench.analysis.cross_check import write_cross_check
    from tunebench.report.next_steps import sweep_best_line, sweep_next_step
    from tunebench.report.points_table import points_table
    from tunebench.report.replayed_points import stored_replay_view
    from tunebench.report.tables import capacity_lines, cross_check_view, failure_lines

    store = result.store
    check = write_cross_check(store)
    if report and store.rows:
        write_report_keeping_the_run(out, store.path)
    manifest = store.manifest
    out.print(
        points_table(
            store.rows,
            {c.config_id: c.varied for c in manifest.configs},
            title=f"run {store.run_id}",
            width=out.width,
        )
    )
    replayed = stored_replay_view(store, out.width)
    if replayed is not None:
        out.print(replayed)
    for line in capacity_lines(manifest.configs):
        out.print(line)
    failed = {o.config_id for o in result.failed}
    for line in failure_lines([c for c in manifest.configs if c.config_id in failed]):
        out.print(line)
    view = cross_check_view(check)
    if view is not None:
        out.print(view)
    if store.rows:
        out.print(sweep_best_line(store.path), highlight=False)
    out.print(f"run: {store.path}  (status: {manifest.status.value})")
    out.print(sweep_next_step(store.path, manifest.varied_args, len(failed)), highlight=False)
    if result.failed:
        raise typer.Exit(1)


def chart_args(spec: Any, spec_path: Path, plan: Plan) -> dict[str, list[str]] | None:
    """A helm sweep's configurations run the chart's args (its values files' and the
    spec's, merged as the release will have them), not the spec's alone: a variant that
    drops a values file's arg (`speculative-config: null`) showed an empty cell."""
    from tunebench.spec.deployments import HelmSettings
    from tunebench.spec.kserve_chart import chart_values

    if not isinstance(spec.deployment, HelmSettings):
        return None
    return {
        config.config_id: list(
            chart_values(
                spec.deployment,
                config,
                spec.name,
                spec.served_model_name,
                spec_path.parent,
                spec_path,
            )["model"].get("args")
            or []
        )
        for config in plan.configs
    }
