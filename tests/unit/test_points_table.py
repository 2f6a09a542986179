"""The points table fits a 100-column terminal and names every configuration apart."""

from __future__ import annotations

from rich.console import Console

from tests.conftest import FIXTURES
from tunebench.report.points_table import points_table
from tunebench.report.table_kit import short_label
from tunebench.store.run import RunStore


def render(rows, varied, width):
    console = Console(width=width, record=True, force_terminal=False)
    console.print(points_table(rows, varied, title="run", width=width))
    return console.export_text()


def test_labels_keep_configurations_apart_with_short_arg_names():
    label, legend = short_label("c2", {"max-num-seqs": 2, "max-num-batched-tokens": 512})
    assert label == "c2 mns=2,mnbt=512"
    assert legend == {"mns": "max-num-seqs", "mnbt": "max-num-batched-tokens"}
    assert short_label("c1", {"variant": "w8a8"})[0] == "c1 w8a8"
    assert (
        short_label("c3", {"model": "RedHatAI/granite-3.3-8b-instruct-quantized.w8a8"})[0]
        == "c3 model=granite-3.3-8…"
    )
    assert short_label("t4", {"trial": 4, "block-size": 32}) == ("t4 bs=32", {"bs": "block-size"})


def test_a_run_of_25_configurations_fits_100_columns_with_units_and_notes():
    store = RunStore.open(FIXTURES / "grid-cpu")
    varied = {c.config_id: c.varied for c in store.manifest.configs}
    text = render(store.rows, varied, 100)
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= 100
    configs = {line.split("│")[1].strip() for line in lines if line.startswith("│")}
    assert len(configs) == 25  # every configuration has its own name
    for header in ("req/s", "ms", "tok/s"):
        assert header in text
    assert "not shown at this width:" in text  # dropped columns are named
    assert "*  c1 defaults concurrent-4: client-limited: achieved concurrency" in text
    wide = render(store.rows, varied, 200)
    assert "not shown at this width" not in wide and "KV max" in wide and "queue" in wide


def test_invalid_points_say_why_under_the_table():
    rows = [
        {
            "config_id": "c1",
            "point_id": "concurrent-1",
            "load_kind": "concurrent",
            "target": 1,
            "valid": "False",
            "invalid_reason": "max-model-len requested 512, server runs 256",
        }
    ]
    text = render(rows, {"c1": {"max-num-seqs": 2}}, 100)
    assert "no: c1 mns=2 concurrent-1: max-model-len requested 512, server runs 256" in text


def test_show_names_every_arg_the_server_could_not_read_back():
    from types import SimpleNamespace

    from tunebench.report.tables import arg_check_lines

    checks = [
        {"arg": "max-model-len", "state": "verified", "reason": "ok"},
        {"arg": "dtype", "state": "mismatch", "reason": "dtype requested half, server runs bf16"},
        {
            "arg": "max-num-seqs",
            "state": "unverified",
            "reason": "max-num-seqs requested 64: not verified, this server shows it in none "
            "of: non-default args log line",
        },
    ]
    configs = [
        SimpleNamespace(config_id="c1", arg_checks=checks),
        SimpleNamespace(config_id="c2", arg_checks=None),
    ]
    (line,) = arg_check_lines(configs)
    assert line.plain == (
        "c1 args: 1 verified, 1 not in effect, 1 unverified: max-num-seqs requested 64: not "
        "verified, this server shows it in none of: non-default args log line"
    )


def test_why_energy_is_not_shown_is_one_line_at_100_columns():
    """A CPU box's reason runs to ~200 characters; under every `show` it took 3 lines."""
    reason = (
        "no energy: no GPU power: NVML did not start: NVML Shared Library Not Found (no NVIDIA "
        "driver: no GPU here); no CPU energy: /sys/class/powercap is absent: no RAPL (virtual "
        "machines rarely expose it)"
    )
    rows = [
        {
            "config_id": "c1",
            "point_id": "concurrent-1",
            "load_kind": "concurrent",
            "target": 1,
            "valid": "True",
            "energy_note": reason,
        }
    ]
    lines = render(rows, {"c1": {"max-num-seqs": 2}}, 100).splitlines()
    about = [line for line in lines if "J/out tok" in line or "RAPL" in line or "NVML" in line]
    assert len(about) == 1 and len(about[0]) <= 100, about
    assert about[0].startswith("J/out tok not shown (why: energy_note in points.csv): no energy")
