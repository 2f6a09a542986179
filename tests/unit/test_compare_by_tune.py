"""`compare RUN --by ARG` where no point aligns (a tune run: every trial its own args and
probe rates) is one line saying why and where to look, and a non-zero exit: never an empty
table with exit 0."""

from __future__ import annotations

from tunebench.store.manifest import RunKind
from tunebench.store.run import RunStore
from tunebench.testing import make_synthetic_run


def _as_tune_run(tmp_path) -> str:
    """A synthetic run relabelled as a tune run's trials: a column `trial` per configuration,
    varied with the tuned arg (as tune/session.py records them)."""
    store = make_synthetic_run(tmp_path, "tune-cpu", configs=3, streams=(1, 8))
    points = store.layout.points
    lines = points.read_text().splitlines()
    column = lines[0].split(",").index("config_id")
    trial = {f"c{n}": str(n - 1) for n in (1, 2, 3)}
    rows = [lines[0] + ",trial"] + [
        f"{line},{trial[line.split(',')[column]]}" for line in lines[1:]
    ]
    points.write_text("\n".join(rows) + "\n")
    opened = RunStore.open(store.path)
    opened.manifest = opened.manifest.model_copy(
        update={"kind": RunKind.TUNE, "varied_args": ["trial", "max-num-seqs"]}
    )
    opened.save_manifest()
    return store.path.name


def test_by_on_a_tune_run_says_why_nothing_aligns(cli, tmp_path):
    run = _as_tune_run(tmp_path)
    result = cli("compare", run, "--by", "max-num-seqs", "--root", str(tmp_path))
    assert result.returncode == 2, (result.stdout, result.stderr)
    (line,) = [text for text in result.stderr.splitlines() if text.startswith("error:")]
    assert f"--by max-num-seqs: {run} is a tune run" in line
    assert f"`tunebench results {run}`" in line
    assert "┏" not in result.stdout  # no empty table


def test_by_on_a_sweep_names_what_did_not_align(cli, tmp_path):
    store = make_synthetic_run(tmp_path, "s", configs=2, streams=(1, 8))
    points = store.layout.points
    text = points.read_text()
    # the second configuration measured other loads than the first: nothing in common
    lines = text.splitlines()
    points.write_text(
        "\n".join(
            [lines[0]]
            + [
                line.replace(",concurrent,1,", ",concurrent,2,").replace(
                    ",concurrent,8,", ",concurrent,16,"
                )
                if ",c2," in line
                else line
                for line in lines[1:]
            ]
        )
        + "\n"
    )
    result = cli("compare", store.path.name, "--by", "max-num-seqs", "--root", str(tmp_path))
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert "no point of" in result.stderr and "with the same load" in result.stderr
