"""Where a command is told to write (--root/-o, --dir, --to) and which run it is told to read:
a wrong path is one line naming it and the fix, exit 2, before any work; never an internal
error, and never a deep path made silently (only the last level of a new directory is made).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tunebench.testing import make_synthetic_run

REPO = Path(__file__).resolve().parents[2]
RECORDED_SPEC = REPO / "tests/specs/pipeline-recorded.yaml"  # a sweep without a server
TUNE_SPEC = REPO / "tests/specs/tune-cpu.yaml"
BATCH_SPEC = REPO / "sweeps/batch-recipes.yaml"
IMPORTED = REPO / "tests/fixtures/vllm-bench/concurrent-8.json"


def _one_line(result, code: int, *says: str) -> str:
    assert result.returncode == code, (result.returncode, result.stdout, result.stderr)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert "internal error" not in lines[0]
    for text in says:
        assert text in lines[0], lines[0]
    return lines[0]


@pytest.fixture
def nothing_runs(monkeypatch):
    """A command that got past its path checks would measure: make that a failure instead."""

    def refuse(*args, **kwargs):
        raise AssertionError("the command started work with a bad output path")

    monkeypatch.setattr("tunebench.sweep.run.run_sweep", refuse)
    monkeypatch.setattr("tunebench.tune.session.run_tune", refuse)
    monkeypatch.setattr("tunebench.batch.run.run_batch", refuse)


def _commands(root: str, dry_run: bool) -> list[list[str]]:
    tail = ["--dry-run"] if dry_run else []
    return [
        ["sweep", str(RECORDED_SPEC), "-o", root, *tail],
        ["tune", str(TUNE_SPEC), "-o", root, *tail],
        ["batch", str(BATCH_SPEC), "-o", root, *tail],
        *([] if dry_run else [["import", str(IMPORTED), "-o", root]]),
    ]


@pytest.mark.parametrize("dry_run", [False, True], ids=["run", "dry-run"])
def test_a_run_root_that_takes_no_files_is_one_line_exit_2(cli, nothing_runs, dry_run):
    for command in _commands("/proc/nope", dry_run):
        _one_line(cli(*command), 2, "--root /proc/nope:")


@pytest.mark.parametrize("dry_run", [False, True], ids=["run", "dry-run"])
def test_a_run_root_that_is_a_file_is_one_line_exit_2(cli, nothing_runs, tmp_path, dry_run):
    existing = tmp_path / "a-file"
    existing.write_text("")
    for command in _commands(str(existing), dry_run):
        _one_line(cli(*command), 2, f"--root {existing}: is a file, not a directory")


def test_only_the_last_level_of_a_run_root_is_made(cli, nothing_runs, tmp_path):
    deep = tmp_path / "not" / "there" / "runs"
    for command in _commands(str(deep), dry_run=False):
        _one_line(
            cli(*command),
            2,
            f"{tmp_path / 'not'} does not exist",
            f"mkdir -p {deep.parent}",
            "only the last level, runs/, is made",
        )
    assert not (tmp_path / "not").exists()


def test_a_new_last_level_is_made_by_the_run_and_not_by_a_dry_run(cli, tmp_path):
    root = tmp_path / "runs"
    assert cli("sweep", str(RECORDED_SPEC), "-o", str(root), "--dry-run").returncode == 0
    assert not root.exists()
    imported = cli("import", str(IMPORTED), "-o", str(root))
    assert imported.returncode == 0, imported.stderr
    assert len(list(root.iterdir())) == 1


@pytest.fixture
def one_run(tmp_path):
    return tmp_path, make_synthetic_run(tmp_path, "a", configs=1, streams=(1,)).path.name


def test_an_export_directory_that_cannot_be_made_is_one_line(cli, one_run):
    root, run = one_run
    export = ("export", run, "--root", str(root), "--dir")
    _one_line(cli(*export, "/proc/nope"), 2, "--dir /proc/nope:")
    deep = root / "not" / "there"
    _one_line(cli(*export, str(deep)), 2, f"{root / 'not'} does not exist")
    assert not (root / "not").exists()


def test_results_to_a_place_that_takes_no_files_is_one_line_exit_2(cli, one_run):
    root, run = one_run
    _one_line(cli("results", run, "--root", str(root), "--to", "/proc/nope"), 2, "--to /proc/nope")


@pytest.mark.parametrize("command", ["show", "export", "results", "report", "explain"])
def test_a_run_not_found_is_exit_2_in_every_command(cli, one_run, command):
    """One code per kind of mistake: a run that is not there is a bad command line (2),
    as a spec file that is not there is, whichever command reads it."""
    root, _ = one_run
    _one_line(cli(command, "no-such-run", "--root", str(root)), 2, "no run 'no-such-run'")


def test_the_store_itself_names_a_root_it_cannot_make(tmp_path):
    from tunebench.errors import PathError
    from tunebench.store.manifest import RunKind
    from tunebench.store.run import RunStore

    existing = tmp_path / "a-file"
    existing.write_text("")
    with pytest.raises(PathError, match="a-file: cannot make a run here") as caught:
        RunStore.create(existing, RunKind.SWEEP, "x")
    assert caught.value.exit_code == 2


def test_scripts_models_and_values_written_to_a_place_that_takes_none_are_one_line(
    cli, nothing_runs, tmp_path
):
    """--slurm (a file), demo-model --output and helm-values --to (directories): an internal
    error with a crash log before; a deep path that is not there is a typo, not made."""
    helm_spec = REPO / "sweeps/openshift-latency.yaml"
    for command, says in (
        (["sweep", str(RECORDED_SPEC), "--slurm", "/proc/nope/job.sbatch"], "--slurm /proc/nope"),
        (["batch", str(BATCH_SPEC), "--slurm", "/proc/nope/job.sbatch"], "--slurm /proc/nope"),
        (["sweep", str(RECORDED_SPEC), "--slurm", "/proc/job.sbatch"], "cannot write it"),
        (["demo-model", "--output", "/proc/nope/x"], "--output /proc/nope/x:"),
        (["helm-values", str(helm_spec), "--to", "/proc/nope"], "--to /proc/nope: cannot make"),
    ):
        _one_line(cli(*command), 2, says)
    deep = tmp_path / "not" / "there"
    _one_line(cli("helm-values", str(helm_spec), "--to", str(deep)), 2, "only the last level")
    assert not (tmp_path / "not").exists()
