"""Shared helpers: run the `tunebench` CLI (in-process or as a user runs it), find the repo's
files, write a sweep file that differs from a test's base in one place, and the suite's own
rules (a skipped test fails `make test` and CI)."""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tunebench.processes import run_in_own_session

REPO = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures"
# The suite reaches nothing beyond loopback: a check that would ask the model hub whether it
# answers (spec/hub_model.py) is told it is offline, as on a machine without a network.
os.environ.setdefault("HF_HUB_OFFLINE", "1")


def run_cli(*args: str, cwd: Path | None = None, env: dict | None = None, timeout: float = 120):
    """`tunebench ARGS` in its own process, as a user runs it; a CompletedProcess (text).

    It runs in its own process group. At `timeout` it is stopped as a user's Ctrl-C would
    (SIGINT: its teardown stops the servers and load generators it started), then by force
    with every process it started, and subprocess.TimeoutExpired is raised."""
    # tables at full width unless the caller asks for a width: pytest-xdist's workers
    # export COLUMNS=80, which would wrap every line a test looks for
    full_env = {**os.environ, "COLUMNS": "200", **(env or {})}
    return run_in_own_session(
        [sys.executable, "-m", "tunebench.cli.main", *args], cwd or REPO, full_env, timeout
    )


@contextlib.contextmanager
def _environment(env: dict | None, cwd: Path):
    saved, before = dict(os.environ), Path.cwd()
    os.environ.update(env or {})
    os.chdir(cwd)
    try:
        yield
    finally:
        os.chdir(before)
        os.environ.clear()
        os.environ.update(saved)


def invoke(*args: str, cwd: Path | None = None, env: dict | None = None, timeout: float = 0):
    """`tunebench ARGS` in this process (the same `main()` and error boundary, no new
    interpreter): a CompletedProcess with the exit code, stdout and stderr. For tests of
    what a command does; tests of the process itself (signals, exit) use `run_cli`."""
    from tunebench.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    env = {"COLUMNS": "200", **(env or {})}  # as run_cli: tables at full width
    with (
        _environment(env, cwd or REPO),
        contextlib.redirect_stdout(out),
        contextlib.redirect_stderr(err),
    ):
        code = main([str(a) for a in args])
    return subprocess.CompletedProcess(["tunebench", *args], code, out.getvalue(), err.getvalue())


def spec_file(
    tmp_path: Path, text: str, old: str = "", new: str = "", name: str = "spec.yaml"
) -> Path:
    """`text` with `old` replaced by `new`, written to tmp_path/name: a sweep file that
    differs from a test's base in one place. `old` must be in `text`, so that a base that
    changed under a test fails it loudly instead of leaving it to test the base."""
    assert old in text, f"{old!r} is not in the text it should replace"
    path = tmp_path / name
    path.write_text(text.replace(old, new))
    return path


@pytest.fixture
def cli():
    """The in-process CLI (see `invoke`)."""
    return invoke


@pytest.fixture
def fixtures() -> Path:
    return FIXTURES


@pytest.fixture(scope="session")
def s3():
    """One local S3 server (moto, credentials enforced) for the session: moto's state is
    process-wide, so a second server in the same process would share its users."""
    from tests.fakes.s3_server import serve_s3

    yield from serve_s3()


# Seconds each test file takes: files run longest first, so that pytest-xdist, which hands
# out whole files in collection order as its workers free up, ends both workers together.
# tests/durations.json is a full `make test` on the 2-core box (committed); every run also
# records its own in pytest's cache, which then takes precedence on that machine.
DURATIONS = Path(__file__).parent / "durations.json"
MEASURED_KEY = "tunebench/file-seconds"


def _file_seconds(config) -> dict[str, float]:
    import json

    try:
        seconds = json.loads(DURATIONS.read_text())
    except (OSError, ValueError):
        seconds = {}
    if getattr(config, "cache", None) is not None:
        seconds.update(config.cache.get(MEASURED_KEY, {}))
    return seconds


def pytest_collection_modifyitems(session, config, items):  # noqa: ARG001
    seconds = _file_seconds(config)
    if not seconds:
        return
    position = {}
    for index, item in enumerate(items):
        position.setdefault(item.nodeid.split("::")[0], index)

    def order(item):
        path = item.nodeid.split("::")[0]
        # a file named test_zz_* checks what every other file left behind: always last
        last = Path(path).name.startswith("test_zz_")
        return (last, -seconds.get(path, 0.0), position[path])

    items.sort(key=order)  # stable: a file's tests keep their order


_measured: dict[str, float] = {}


def pytest_runtest_logreport(report):
    path = report.nodeid.split("::")[0]
    _measured[path] = _measured.get(path, 0.0) + report.duration


def _record_durations(session) -> None:
    """This run's seconds per file into pytest's cache (the controller's view under xdist:
    it sees every worker's reports)."""
    config = session.config
    if hasattr(config, "workerinput") or getattr(config, "cache", None) is None or not _measured:
        return
    seconds = dict(config.cache.get(MEASURED_KEY, {}))
    seconds.update({path: round(value, 1) for path, value in _measured.items()})
    config.cache.set(MEASURED_KEY, seconds)


def _skips_fail() -> bool:
    """Under `make test` (TUNEBENCH_NO_SKIPS, which it sets) and CI a skipped test is a
    defect: the suite's own set-up must bring everything a test needs. A bare pytest of a
    few files (a developer's loop) may skip what it cannot run, and says so."""
    return bool(os.environ.get("CI") or os.environ.get("TUNEBENCH_NO_SKIPS"))


def pytest_terminal_summary(terminalreporter, exitstatus, config):  # noqa: ARG001
    skipped = terminalreporter.stats.get("skipped", [])
    if _skips_fail() and skipped:
        terminalreporter.write_line(
            f"{len(skipped)} test(s) skipped; under make test and CI a skip fails the suite",
            red=True,
        )


def pytest_sessionfinish(session, exitstatus):
    _record_durations(session)
    if _skips_fail() and exitstatus == 0:
        skipped = session.config.pluginmanager.get_plugin("terminalreporter")
        if skipped is not None and skipped.stats.get("skipped"):
            session.exitstatus = 1
