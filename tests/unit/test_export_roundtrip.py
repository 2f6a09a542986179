"""Export then import keeps what the run said of its configurations and points: the model,
the engine args and the client's verdict; the default export (llmd-br) imports too
(issue 46, item 14)."""

from __future__ import annotations

import csv

import pytest

from tests.conftest import invoke
from tunebench.store.run import RunStore, read_points
from tunebench.testing import make_synthetic_run

REASON = "the load generator's busiest thread waited for a CPU 82% of the time"


@pytest.fixture
def run(tmp_path):
    store = make_synthetic_run(tmp_path / "runs", configs=2, streams=(1, 8))
    for config in store.manifest.configs:  # as a real sweep records them
        store.update_config(
            config.config_id,
            model="builtin:tiny-llama-random",
            args={"max-model-len": 512, "max-num-seqs": 2 if config.config_id == "c1" else 8},
        )
    with open(store.layout.points, newline="") as handle:
        rows = list(csv.DictReader(handle))
    for row in rows:
        if (row["config_id"], row["point_id"]) == ("c2", "concurrent-8"):
            row["client_limited"], row["client_limited_reason"] = "True", REASON
    with open(store.layout.points, "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return store


def round_trip(run, tmp_path, *format_args: str) -> RunStore:
    out = tmp_path / "export"
    done = invoke("export", str(run.path), *format_args, "--dir", str(out))
    assert done.returncode == 0, done.stderr
    files = sorted(str(p) for p in out.glob("*.json"))
    back = invoke("import", *files, "--name", "back", "--root", str(tmp_path / "in"))
    assert back.returncode == 0, back.stderr
    (path,) = (tmp_path / "in").iterdir()
    return RunStore.open(path)


FORMATS = [("--format", "vllm-bench"), ()]


@pytest.mark.parametrize("format_args", FORMATS, ids=["vllm-bench", "default"])
def test_a_round_trip_keeps_model_engine_args_and_the_clients_verdict(run, tmp_path, format_args):
    back = round_trip(run, tmp_path, *format_args)
    original = {c.label: c for c in run.manifest.configs}
    for config in back.manifest.configs:
        source = original[config.label]
        assert (config.model, config.args) == (source.model, source.args), config.label
    rows = {(r["config_label"], r["point_id"]): r for r in read_points(back.path)}
    limited = rows[(original_label(run, "c2"), "concurrent-8")]
    assert str(limited["client_limited"]) == "True" and limited["client_limited_reason"] == REASON
    others = [r for key, r in rows.items() if key != (original_label(run, "c2"), "concurrent-8")]
    assert others and all(str(r.get("client_limited")) in ("", "False", "None") for r in others)
    assert all(str(r["valid"]) == "True" for r in rows.values())
    # compare opens on what differs, and the configurations do not
    said = invoke("compare", str(run.path), str(back.path))
    assert "-> None" not in said.stdout + said.stderr


def original_label(run, config_id: str) -> str:
    return next(c.label for c in run.manifest.configs if c.config_id == config_id)


def test_the_default_export_imports_back_to_its_figures(run, tmp_path):
    back = round_trip(run, tmp_path)
    source = {(r["config_label"], r["point_id"]): r for r in read_points(run.path)}
    for row in read_points(back.path):
        original = source[(row["config_label"], row["point_id"])]
        assert row["load_kind"] == original["load_kind"]
        assert float(row["target"]) == float(original["target"])
        for column in ("achieved_rps", "output_tok_s", "requests_ok"):
            assert float(row[column]) == pytest.approx(float(original[column])), column
        assert row["load_driver"] == "llmd-br"
