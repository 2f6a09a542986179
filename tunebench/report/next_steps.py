"""What a sweep says when it stops: the best configuration and the command to run next, so
that the end of the output (or of a Ctrl-C) is never a dead end."""

from __future__ import annotations

from pathlib import Path


def resume_hint(run: Path | str) -> str:
    """Ctrl-C's last line: where the finished points are and how to go on."""
    return (
        f"interrupted; finished points are in {run}; continue with: tunebench sweep --resume {run}"
    )


def sweep_best_line(run: Path) -> str:
    """`best: ...` as `show` and `results` print it."""
    from tunebench.analysis.best import best_config, headline

    return f"best: {headline(best_config(run))}"


def sweep_next_step(run: Path, varied_args: list[str], failed: int) -> str:
    """The one command to run next: measure what failed again, else compare the
    configurations with intervals (by the first varied arg), else compare with another run."""
    if failed:
        what = "configuration" if failed == 1 else f"{failed} configurations"
        return f"next: tunebench sweep --resume {run}   (measures the failed {what} again)"
    shown = [arg for arg in varied_args if arg != "trial"]
    if shown:
        return (
            f"next: tunebench compare {run} --by {shown[0]}   (each {shown[0]} against the "
            "first, with intervals)"
        )
    return f"next: tunebench compare {run} OTHER-RUN   (this run against another, point by point)"
