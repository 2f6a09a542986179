"""How a sweep ends: with the best configuration and the command to run next; a Ctrl-C with
the `--resume` command that continues it. A sweep's output is never a dead end."""

from __future__ import annotations

from pathlib import Path

from tunebench.report.next_steps import sweep_next_step
from tunebench.testing import make_synthetic_run

REPO = Path(__file__).resolve().parents[2]
RECORDED_SPEC = REPO / "tests/specs/pipeline-recorded.yaml"  # two configurations, no server


def test_a_sweep_ends_with_its_best_and_the_next_command(cli, tmp_path):
    result = cli("sweep", str(RECORDED_SPEC), "-o", str(tmp_path), "--no-report")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.strip().splitlines()
    (run,) = tmp_path.iterdir()
    assert lines[-3].startswith("best: c")
    assert lines[-2].startswith(f"run: {run}")
    assert lines[-1].startswith(f"next: tunebench compare {run} --by variant")


def test_ctrl_c_names_the_command_that_continues_the_sweep(cli, tmp_path, monkeypatch):
    def interrupted(*args, on_store, **kwargs):
        on_store(make_synthetic_run(tmp_path, "cut", configs=1, streams=(1,)))
        raise KeyboardInterrupt

    monkeypatch.setattr("tunebench.sweep.run.run_sweep", interrupted)
    result = cli("sweep", str(RECORDED_SPEC), "-o", str(tmp_path))
    assert result.returncode == 130
    (run,) = tmp_path.iterdir()
    assert f"continue with: tunebench sweep --resume {run}" in result.stderr


def test_the_next_step_fits_what_happened(tmp_path):
    run = tmp_path / "r"
    assert sweep_next_step(run, ["max-num-seqs"], failed=2) == (
        f"next: tunebench sweep --resume {run}   (measures the failed 2 configurations again)"
    )
    assert "--resume" in sweep_next_step(run, [], failed=1)
    assert sweep_next_step(run, ["trial", "block-size"], 0).startswith(
        f"next: tunebench compare {run} --by block-size"
    )
    assert "OTHER-RUN" in sweep_next_step(run, [], 0)
