"""Which command a spec file is for: a batch file given to `sweep` (or a sweep file to
`batch`) is named as such, with the command that reads it, instead of a list of keys the
other kind lacks ("deployment: required key is missing (+7 more)")."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from tunebench.spec.models import SweepSpec

# The top-level keys only a batch file has (tests/unit/test_file_kind.py keeps this in step
# with batch/spec.py, which this layer does not import).
BATCH_ONLY = frozenset(
    {
        "dataset",
        "engine",
        "engine_args",
        "prompt",
        "ray",
        "sampling",
        "shards",
        "start_timeout_s",
        "structured_output",
        "transformers",
    }
)
BOTH = frozenset({"name", "description", "model", "tokenizer", "output", "quality", "slurm"})
SWEEP_ONLY = frozenset(SweepSpec.model_fields) - BOTH


def other_command(
    data: dict[str, Any], path: Path, reader: Literal["sweep", "batch"]
) -> str | None:
    """One line saying that `path` is the other kind of file and which command reads it;
    None when it is not plainly the other kind (its own errors are then the ones to show)."""
    keys = set(data)
    theirs = keys & (BATCH_ONLY if reader == "sweep" else SWEEP_ONLY)
    ours = keys & (SWEEP_ONLY if reader == "sweep" else BATCH_ONLY)
    if not theirs or ours:
        return None
    shown = ", ".join(sorted(theirs)[:3])
    if reader == "sweep":
        return (
            f"{path}: a batch file (it has {shown}), not a sweep file; run it with "
            f"`tunebench batch {path}` (sweep and tune read a sweep file, e.g. "
            "sweeps/cpu-demo.yaml)"
        )
    command = "tune" if "tune" in keys else "sweep"
    return (
        f"{path}: a sweep file (it has {shown}), not a batch file; run it with "
        f"`tunebench {command} {path}` (batch reads a batch file, e.g. "
        "sweeps/batch-recipes.yaml)"
    )
