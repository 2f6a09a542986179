"""`tunebench tune SPEC`: search engine args with Optuna, one deployment per trial."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from tunebench.cli.common import (
    live_progress,
    new_run_root,
    root_of,
    root_option,
    starts_here,
    write_report_keeping_the_run,
)
from tunebench.errors import UsageError


def check_storage(url: str, resume: str | None) -> None:
    """A shared study's URL: a database Optuna can use; its password never printed."""
    from urllib.parse import urlsplit

    from tunebench.redact import remember

    parts = urlsplit(url)
    if parts.password:
        remember(parts.password)
    if resume:
        raise UsageError(
            "--storage and --resume: a shared study is continued by starting another worker "
            "with the same --storage and spec"
        )
    if not parts.scheme.startswith(("postgresql", "mysql", "sqlite")):
        raise UsageError(
            f"--storage {parts.scheme or url!r}: give a database URL, e.g. "
            "postgresql://user@host:5432/tunebench (or sqlite:///path/study.db on one host)"
        )


def register(app: typer.Typer) -> None:
    @app.command("tune")
    def tune(
        spec_path: Optional[Path] = typer.Argument(
            None,
            metavar="SPEC",
            help="A sweep file with a `tune` section, e.g. sweeps/tune-cpu.yaml "
            "(not with --resume).",
        ),
        resume: Optional[str] = typer.Option(
            None, "--resume", help="Continue the study of this run (path, id or unique part of it)."
        ),
        trials: Optional[int] = typer.Option(
            None,
            "--trials",
            min=1,
            help="Deployments in total, baseline included (overrides tune.trials).",
        ),
        root: Optional[Path] = root_option(
            "Where the run is stored (overrides the spec's `output`, default reports/)."
        ),
        helm_dir: Optional[Path] = typer.Option(
            None,
            "--helm-dir",
            help="Where the tuned values file <name>.yaml is written (default: the run's "
            "helm-values/ directory).",
        ),
        report: bool = typer.Option(
            True, "--report/--no-report", help="Write report.html at the end."
        ),
        dry_run: bool = typer.Option(
            False, "--dry-run", help="Print the search space and a time estimate; start nothing."
        ),
        revalidate: Optional[int] = typer.Option(
            None,
            "--revalidate",
            min=0,
            max=10,
            metavar="N",
            help="After the study, re-run the best, the runner-up and the baseline N times "
            "each, alternated, and report the gain with a 95% interval or a tie "
            "(overrides tune.revalidate; 0: off).",
        ),
        storage: Optional[str] = typer.Option(
            None,
            "--storage",
            metavar="URL",
            help="Share the study in this database (postgresql://user:pass@host/db): every "
            "`tunebench tune` given the same URL and spec is a worker adding trials to one "
            "study. The password may come from $PGPASSWORD instead of the URL.",
        ),
    ) -> None:
        """Find the engine args that serve the most traffic within the SLO (or the most tok/s).

        The first trial is the baseline (server.args only: vLLM's defaults for every tuned
        arg). The study is stored in <run>/study.db; open it with
        `optuna-dashboard sqlite:///<run>/study.db`. A resumed study reads the spec file it
        was started with (the run's copy has secrets masked).

        Examples:
          tunebench tune sweeps/tune-cpu.yaml
          tunebench tune sweeps/tune-cpu.yaml --trials 20
          tunebench tune sweeps/tune-cpu.yaml --revalidate 3
          tunebench tune --resume tune-cpu --trials 12
          tunebench tune sweeps/tune-latency.yaml --dry-run
          tunebench tune sweeps/tune-cpu.yaml --storage postgresql://tb@db:5432/tunebench
        """
        from tunebench import assemble
        from tunebench.analysis.stats import repeats_change
        from tunebench.report.tables import tune_space, tune_summary, wide_console
        from tunebench.spec.loadable import check_sweep
        from tunebench.spec.loading import read_yaml_mapping, validate_spec
        from tunebench.store.run import RunStore, resolve_run
        from tunebench.sweep.estimate import estimate_range
        from tunebench.tune.session import TuneJob, job_of_run, require_tune, run_tune

        out = wide_console()
        store = None
        if storage is not None:
            check_storage(storage, resume)
        if resume:
            if spec_path is not None or dry_run:
                raise UsageError(
                    "--resume RUN takes the spec from the run; give no SPEC and no --dry-run"
                )
            store = RunStore.open(resolve_run(resume, root_of(root)))
            job = job_of_run(store)
        elif spec_path is None:
            raise UsageError("give a SPEC, or --resume RUN to continue a study")
        else:
            spec_data = read_yaml_mapping(spec_path)
            spec = validate_spec(spec_data, spec_path)
            require_tune(spec, spec_path)
            job = TuneJob(spec, spec_path, spec_data, assemble.plan(spec, spec_path))
        assert job.spec.tune is not None
        # a misspelt arg or a model not here fails now, not a server start later
        notes = check_sweep(job.spec, job.spec_path, dry_run=dry_run) if store is None else []
        if dry_run:
            run_root = new_run_root(root, job.spec.output, job.spec_path, make=False)
            count = trials or job.spec.tune.trials
            checks = job.spec.tune.revalidate if revalidate is None else revalidate
            count += 3 * checks  # best, runner-up and baseline again
            starts = starts_here(run_root, job.spec)
            low, high = estimate_range(job.spec, job.plan, starts.seconds if starts else None)
            seconds = (low * count, high * count)
            out.print(tune_space(job.spec, job.plan, count, seconds, starts))
            for note in notes:
                out.print(f"note: {note}", highlight=False)
            return
        for note in notes:
            typer.echo(f"note: {note}", err=True)
        output = (
            store.path.parent
            if store is not None
            else new_run_root(root, job.spec.output, job.spec_path)
        )
        assemble.resolve_settings(job.spec, job.spec_path, output)  # a bad recorded run fails here
        stores: list = [store] if store is not None else []

        def where() -> str | None:
            if stores:
                return f"interrupted; continue with: tunebench tune --resume {stores[0].path}"
            return None

        with live_progress(where) as reporter:
            result = run_tune(
                job,
                output,
                helm_dir,
                reporter,
                resume=store,
                trials=trials,
                on_store=lambda s: stores.append(s) if not stores else None,
                revalidate=revalidate,
                compare=repeats_change,
                storage=storage,
            )
        if report and result.store.rows:
            write_report_keeping_the_run(out, result.store.path)
        out.print(tune_summary(result.summary, result.exports))
        out.print(f"run: {result.store.path}  (study: {result.store.layout.study})")
        if result.summary["best"] is None:
            raise typer.Exit(1)
