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


def writable_dir(path: Path, option: str) -> Path:
    """A directory a command writes into (made if missing): not an existing file, and its
    nearest existing parent writable."""
    import os

    from tunebench.errors import UsageError

    if path.exists() and not path.is_dir():
        raise UsageError(f"{option} {path}: is a file, not a directory; give a directory")
    existing = path
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir() or not os.access(existing, os.W_OK):
        raise UsageError(f"{option} {path}: cannot write in {existing}; pick another directory")
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
        if place:
            reporter.note(place)
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
