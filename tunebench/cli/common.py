"""What every command shares: the run-root option, live progress with Ctrl-C, the report."""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator

import typer

from tunebench.report.live import ConsoleReporter

DEFAULT_ROOT = Path("reports")
ROOT_HELP = "Where runs are stored (default: reports/)."


def root_option(help: str = ROOT_HELP) -> Any:
    """`--root DIR`: the directory that holds runs, the same name on every command
    (`--output`/`-o` are accepted too)."""
    return typer.Option(None, "--root", "--output", "-o", metavar="DIR", help=help)


def root_of(given: Path | None, spec_output: str | None = None) -> Path:
    if given is not None:
        return given
    return Path(spec_output) if spec_output else DEFAULT_ROOT


def existing_root(given: Path | None) -> Path:
    """The run root of a command that only reads runs: a directory that is not there is the
    user's error (a typo in a CI job), never an empty list."""
    root = root_of(given)
    if not root.is_dir():
        from tunebench.errors import UsageError

        what = "no such directory" if not root.exists() else "not a directory"
        raise UsageError(
            f"--root {root}: {what}; name the directory that holds the runs "
            f"(default {DEFAULT_ROOT}/)"
        )
    return root


def writable_file(path: Path, option: str) -> Path:
    """A file a command is asked to write: its directory must exist and take files, and the
    path must not be a directory. A user's typo is one line naming the option, before any
    work is done (never an internal error after it)."""
    import os

    from tunebench.errors import UsageError

    parent = path.parent if str(path.parent) else Path(".")
    if path.is_dir():
        raise UsageError(f"{option} {path}: is a directory; give a file name")
    if not parent.is_dir():
        raise UsageError(f"{option} {path}: no directory {parent}; create it or pick another")
    if not os.access(parent, os.W_OK):
        raise UsageError(f"{option} {path}: cannot write in {parent}; pick another directory")
    return path


@contextmanager
def writing(path: Path, option: str) -> Iterator[None]:
    """Write `path` (a file an option names) inside the block: checked first
    (`writable_file`), and a write the system still refuses (a place that takes no files,
    a full disk) is the same one-line error, never an internal one."""
    from tunebench.errors import UsageError

    writable_file(path, option)
    try:
        yield
    except OSError as exc:
        raise UsageError(
            f"{option} {path}: cannot write it ({exc.strerror or exc}); pick another place"
        ) from None


def writable_dir(path: Path, option: str) -> Path:
    """A directory a command writes into, made now if missing: not an existing file, and
    its parent there (only the last level is made: a deep path that is not there is a typo
    far more often than a wish). What is wrong is one line naming the option and the fix."""
    return _make_dir(path, option, "a directory")


def new_run_root(
    given: Path | None,
    spec_output: str | None = None,
    spec_path: Path | None = None,
    make: bool = True,
) -> Path:
    """The directory a new run goes under (--root/-o, else the spec's `output`, else
    reports/), checked before any work and made (its last level only); with `make` False
    (a dry run, or a command that makes it with the run) it is left as it was."""
    root = root_of(given, spec_output)
    if given is not None:
        option = "--root"
    elif spec_output and spec_path is not None:
        option = f"{spec_path}: output:"
    else:
        option = "the default --root"
    what = "the directory that holds runs"
    if make or root.exists():
        return _make_dir(root, option, what)
    _make_dir(root, option, what).rmdir()  # whether it can be made is known by making it
    return root


def _check_dir(path: Path, option: str, what: str) -> Path:
    """`path` could be made by _make_dir: not a file, its parent an existing directory."""
    import os

    from tunebench.errors import UsageError

    if path.exists():
        if not path.is_dir():
            raise UsageError(f"{option} {path}: is a file, not a directory; give {what}")
        return path
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        missing = parent
        while not missing.parent.exists() and missing.parent != missing:
            missing = missing.parent
        found = f"{parent} is a file" if parent.exists() else f"{missing} does not exist"
        raise UsageError(
            f"{option} {path}: {found}; create the directories above it (mkdir -p {parent}) "
            f"or give another (only the last level, {path.name}/, is made)"
        )
    if not os.access(parent, os.W_OK | os.X_OK):
        raise UsageError(f"{option} {path}: cannot write in {parent}; give a directory you can")
    return path


def _make_dir(path: Path, option: str, what: str) -> Path:
    from tunebench.errors import UsageError

    _check_dir(path, option, what)
    try:
        path.mkdir(exist_ok=True)
    except OSError as exc:  # a place that takes no files (/proc), a read-only disk
        raise UsageError(
            f"{option} {path}: cannot make it ({exc.strerror or exc}); give a directory "
            "you can write"
        ) from None
    return path


@contextmanager
def live_progress(where: Callable[[], str | None]) -> Iterator[ConsoleReporter]:
    """A console reporter for long work; on Ctrl-C it says where the finished part is
    (`where()`: e.g. the run directory, once it exists) before the interrupt goes on."""
    reporter = ConsoleReporter()
    try:
        yield reporter
    except KeyboardInterrupt:
        reporter.close()
        place = where()
        if place:  # one line, never wrapped: it ends in a command to copy
            reporter.console.print(place, soft_wrap=True, markup=False, highlight=False)
        raise
    finally:
        reporter.close()


def write_report_keeping_the_run(out, run_path: Path) -> None:
    """Write report.html after a sweep or tune; a failure there never loses the run."""
    try:
        from tunebench.report.html import write_report

        out.print(f"report: {write_report(run_path)}")
    except Exception as exc:  # noqa: BLE001 - the measured run must not be lost to a plot
        out.print(
            f"[yellow]report not written ({type(exc).__name__}: {exc}); "
            f"retry with: tunebench report {run_path}[/]"
        )


def _measured_here(run_root: Path, spec: Any) -> bool:
    """Whether earlier runs under `run_root` can say what this spec's run costs: a recorded
    run starts nothing and waits for no window."""
    from tunebench import kinds

    return not kinds.kind_of(spec).plays_recorded_run and run_root.is_dir()


def starts_here(run_root: Path, spec: Any) -> Any:
    """The server starts an earlier run of this spec measured under `run_root` (a
    sweep.estimate.MeasuredStarts) for a dry-run's estimate; None where there is none or
    nothing starts."""
    from tunebench.sweep.estimate import measured_starts

    if not _measured_here(run_root, spec):
        return None
    return measured_starts(run_root, spec.name, spec.deployment.kind)


def same_spec_run_here(run_root: Path, spec_data: dict, spec: Any) -> Any:
    """An earlier whole run of this very spec (`spec_data`, the file's mapping) under
    `run_root` (a sweep.estimate.MeasuredRun) for a dry-run's estimate; None where there is
    none or nothing starts."""
    from tunebench.sweep.estimate import measured_run

    if not _measured_here(run_root, spec):
        return None
    return measured_run(run_root, spec_data, spec.deployment.kind)
