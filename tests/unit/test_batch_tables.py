"""`tunebench batch`'s console tables: at 100 columns every configuration can be told apart
(show's short labels and legend), and a phase no configuration reported is named once
instead of a column of dashes."""

from __future__ import annotations

import io

from rich.console import Console

from tunebench.report.batch_tables import batch_summary

VARIED = {
    "c1": {"max-num-seqs": 8, "max-num-batched-tokens": 2048},
    "c2": {"max-num-seqs": 8, "max-num-batched-tokens": 4096},
}


def _row(config_id: str) -> dict:
    varied = VARIED[config_id]
    return {
        "config_id": config_id,
        "config_label": ", ".join(f"{k}={v}" for k, v in varied.items()),
        "load_s": "3.21",
        "init_s": "11.5",
        "compile_s": "",
        "generate_s": "42.7",
        "write_s": "0.001",
        "achieved_rps": "2.34",
        "input_tok_s": "812.3",
        "output_tok_s": "299.1",
        "schema_valid_fraction": "1.0",
    }


def _printed(width: int) -> str:
    out = io.StringIO()
    console = Console(file=out, width=width, highlight=False)
    rows = [_row("c1"), _row("c2")]
    console.print(batch_summary("20261128-101010-recipes", 100, 1, rows, VARIED, width))
    return out.getvalue()


def test_configurations_are_told_apart_at_100_columns():
    text = _printed(100)
    assert "c1 mns=8,mnbt=2048" in text and "c2 mns=8,mnbt=4096" in text
    assert "config: mns = max-num-seqs; mnbt = max-num-batched-tokens" in text
    assert "…" not in text  # no cell cut short
    assert all(len(line) <= 100 for line in text.splitlines())


def test_a_phase_nobody_reported_is_named_not_a_column_of_dashes():
    text = _printed(100)
    header = next(line for line in text.splitlines() if "generate s" in line)
    assert "compile s" not in header
    assert "no configuration reported: compile s" in text
    assert "1 shard" in text and "1 shard(s)" not in text


def test_a_write_of_a_millisecond_reads_as_one():
    """`write s` printed 0.00 for every configuration's 1-ms write."""
    lines = _printed(100).splitlines()
    header = next(line for line in lines if "┃ config" in line)  # the headers' last line
    column = [c.strip() for c in header.split("┃")].index("write ms")
    rows = [line for line in lines if line.startswith("│ c")]
    assert [r.split("│")[column].strip() for r in rows] == ["1.0", "1.0"]
