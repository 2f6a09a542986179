"""The command line at its edges: what a user's mistake gets back is one line and exit 1 or 2,
never an internal error (exit 3); options mean what the README says they mean."""

from __future__ import annotations

import pytest

from tunebench.testing import make_synthetic_run


@pytest.fixture
def two_runs(tmp_path):
    a = make_synthetic_run(tmp_path, "a", configs=1, streams=(1, 8), requests_per_point=49, seed=1)
    b = make_synthetic_run(tmp_path, "b", configs=1, streams=(1, 8), requests_per_point=49, seed=2)
    return tmp_path, a.path.name, b.path.name


def _one_line_error(result, code: int, says: str) -> None:
    assert result.returncode == code, (result.returncode, result.stderr)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and says in lines[0], result.stderr
    assert "internal error" not in result.stderr


@pytest.mark.parametrize(
    "option, value, says",
    [
        ("--plot", "nodir/x.png", "--plot nodir/x.png: no directory nodir"),
        ("--plot", "x.svg", "name a .png or an .html file"),
        ("--json", "/proc/x.json", "--json /proc/x.json: cannot write it"),
    ],
)
def test_an_unwritable_compare_output_is_one_line(two_runs, cli, option, value, says):
    root, a, b = two_runs
    _one_line_error(cli("compare", a, b, "--root", str(root), option, value), 2, says)


def test_a_bad_format_is_one_line_and_the_format_is_case_insensitive(two_runs, cli):
    root, a, b = two_runs
    bad = cli("compare", a, b, "--root", str(root), "--format", "xml")
    _one_line_error(bad, 2, "'xml' is not one of")
    assert "(see `tunebench compare --help`)" in bad.stderr
    upper = cli("compare", a, b, "--root", str(root), "--format", "JSON")
    assert upper.returncode == 0 and upper.stdout.lstrip().startswith("{")


def test_export_output_is_where_it_writes_and_a_file_there_is_refused(two_runs, cli):
    root, a, _ = two_runs
    out = root / "out"
    result = cli("export", a, "--root", str(root), "--format", "llmd-br", "--output", str(out))
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in out.iterdir()) == [
        "c1-concurrent-1.br.json",
        "c1-concurrent-8.br.json",
    ]
    assert not (root / a / "export-llmd-br").exists()  # --output is not the run root here
    (root / "file").write_text("")
    refused = cli("export", a, "--root", str(root), "--dir", str(root / "file"))
    _one_line_error(refused, 2, "is a file, not a directory")


def test_the_missing_tune_section_hint_is_valid_yaml(tmp_path, cli):
    import yaml

    spec = tmp_path / "no-tune.yaml"
    spec.write_text(
        "name: no-tune\nmodel: builtin:tiny-llama-random\ndeployment: {kind: local}\n"
        "load: {data: {kind: synthetic, prompt_tokens: 8, output_tokens: 8}, profiles: "
        "[{kind: concurrent, streams: 1, max_seconds: 5}]}\n"
    )
    result = cli("tune", str(spec), "--dry-run")
    assert result.returncode == 2, result.stderr
    hint = result.stderr.split("add ", 1)[1].split(" (see", 1)[0]
    assert yaml.safe_load(hint) == {
        "tune": {"space": {"max-num-seqs": {"low": 8, "high": 256, "log": True}}}
    }


def test_every_command_has_a_one_line_summary_in_the_help(cli):
    import re

    shown = cli("--help", env={"COLUMNS": "200"}).stdout  # wide: no wrapping, only breaks
    listing = shown.split("Commands", 1)[1]
    for line in listing.splitlines()[1:]:  # past the rest of the panel's title line
        # a row that only continues the cell above must not exist: one line per command
        cell = line.strip("│ ").strip()
        if cell and not line.startswith(("╭", "╰")):
            assert re.match(r"^[a-z-]+\s{2,}\S", cell), f"a summary that breaks: {line!r}"
    sweep = cli("sweep", "--help", env={"COLUMNS": "100"}).stdout
    assert "[[SPEC]]" not in sweep and "[SPEC]" in sweep


def test_a_sweep_on_a_recorded_run_estimates_seconds_as_it_takes(tmp_path, cli):
    """A recorded run answers from its recording: no server start, no window is waited for (the
    estimate used to charge a server start and every window: about 1 min for this spec)."""
    from tests.conftest import REPO

    spec = str(REPO / "tests/specs/pipeline-recorded.yaml")
    planned = cli("sweep", spec, "--dry-run")
    assert planned.returncode == 0, planned.stderr
    estimate = planned.stdout.rsplit("estimated time: about ", 1)[1].split()
    assert estimate[1] == "s" and float(estimate[0]) < 10, planned.stdout
    ran = cli("sweep", spec, "--root", str(tmp_path), "--no-report")
    assert ran.returncode == 0, ran.stderr


def test_a_vllm_bench_export_imports_back_with_its_configurations(tmp_path, cli):
    """Two configurations exported as vllm-bench JSON used to come back as one `c1` whose
    points repeated (concurrent-1-2 ...), and compare with the source then failed."""
    import json

    from tunebench.analysis.frames import load_run

    source = make_synthetic_run(tmp_path, "src", configs=2, streams=(1, 4), requests_per_point=30)
    out = tmp_path / "vb"
    assert cli("export", source.path.name, "--root", str(tmp_path), "-f", "vllm-bench",
               "--dir", str(out)).returncode == 0  # fmt: skip
    files = sorted(out.glob("*.json"))
    # a second repeat of one point, as `vllm bench serve --metadata tunebench_repeat=2` says
    again = json.loads(files[0].read_text()) | {"tunebench_repeat": 2}
    (out / "again.json").write_text(json.dumps(again))
    imported = cli("import", *map(str, files), str(out / "again.json"), "--name", "back",
                   "--root", str(tmp_path))  # fmt: skip
    assert imported.returncode == 0, imported.stderr
    back, original = load_run("back", tmp_path), load_run(source.path.name, tmp_path)
    assert sorted(set(back["config_label"])) == sorted(set(original["config_label"]))
    assert sorted(back["point_id"]) == sorted([*original["point_id"], original["point_id"][0]])
    assert sorted(back["repeat"].astype(int)) == [1, 1, 1, 1, 2]
    compared = cli("compare", source.path.name, "back", "--root", str(tmp_path), "-m", "ttft_p50")
    assert compared.returncode == 0, compared.stderr


def test_progress_counts_whole_requests():
    """A recorded run interpolates expected counts (26.33 ok): progress says what a person
    counts."""
    import io

    from rich.console import Console

    from tunebench.report.live import ConsoleReporter

    out = io.StringIO()
    reporter = ConsoleReporter(Console(file=out, width=200))
    row = {"point_id": "poisson-3", "requests_ok": 26.33, "requests_failed": 0.0, "valid": True}
    reporter.point_done(None, row)
    reporter.close()
    assert "26 ok / 0 failed" in out.getvalue()
