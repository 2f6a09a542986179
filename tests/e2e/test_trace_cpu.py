"""The shipped trace sweep for real (sweeps/cpu-trace.yaml): a vLLM-CPU server replays cuts of
the Azure 2023 and Mooncake FAST'25 conversation traces through GuideLLM's replay, with
prefix caching on and off, and every point carries the evidence that it was replayed
faithfully: arrival lag, the server's token counts against the trace, and the prefix hit
rate predicted from the workload against the one the server measured.

The expected figures are computed here from the trace files themselves (csv and json, not
tunebench's reader): which requests the slice holds, their lengths at the scale the sweep
asks for, and which Mooncake blocks repeat.

One sweep serves every test of the file: two server starts, six replayed points.
"""

from __future__ import annotations

import csv
import datetime
import json

import pandas as pd
import pytest
import yaml

from tests.conftest import REPO, run_cli
from tests.e2e.conftest import NEEDS_SERVER
from tunebench.store.layout import RunLayout
from tunebench.store.manifest import Manifest

# speed: it checks the client's timing (Azure arrival lag p95 under 50 ms, every request of
# the slice answered within its window), which another file's server beside it disturbs: in
# the two-worker tier one request of the 2x point missed its window (58 of 59), so `make
# test` runs it alone
pytestmark = [pytest.mark.server, pytest.mark.speed, NEEDS_SERVER]

SHIPPED = REPO / "sweeps" / "cpu-trace.yaml"
TRACES = REPO / "sweeps" / "data" / "traces"
CONTEXT = 512  # the shipped file's max-model-len, which every trace length is fitted to
ON, OFF = "enable-prefix-caching=true", "enable-prefix-caching=false"
AZURE_POINTS = ("replay-azure-1", "replay-azure-2")
MOONCAKE = "replay-mooncake-2"
AZURE_SECONDS, MOONCAKE_START, MOONCAKE_SECONDS = 15, 120, 30


def _azure_slice(seconds: float) -> list[tuple[int, int]]:
    """(prompt, output) tokens of the Azure cut's first `seconds`, read with csv."""
    rows = list(csv.DictReader((TRACES / "azure-2023-conv-180s.csv").open()))

    def moment(text: str) -> float:
        whole, _, fraction = text.partition(".")
        parsed = datetime.datetime.strptime(whole, "%Y-%m-%d %H:%M:%S")
        return parsed.timestamp() + float("0." + (fraction or "0"))

    first = min(moment(r["TIMESTAMP"]) for r in rows)
    return [
        (int(r["ContextTokens"]), int(r["GeneratedTokens"]))
        for r in rows
        if moment(r["TIMESTAMP"]) - first < seconds
    ]


def _mooncake_slice(start_s: float, seconds: float) -> list[dict]:
    records = [
        json.loads(line)
        for line in (TRACES / "mooncake-fast25-conversation-180s.jsonl").open()
        if line.strip()
    ]
    first = min(r["timestamp"] for r in records) / 1000
    return [r for r in records if start_s <= r["timestamp"] / 1000 - first < start_s + seconds]


def _all_answered(row) -> bool:
    """Every request of the slice answered, or the point says it was not so. GuideLLM's
    replay now and then leaves one request of a slice unsent (23 of 24 in one fresh-clone
    run, no error, nothing incomplete): such a point must never pass as verified."""
    failed = 0 if pd.isna(row["requests_failed"]) else row["requests_failed"]
    if row["requests_ok"] + failed == row["trace_requests"]:
        return True
    missing = row["trace_requests"] - row["requests_ok"] - failed
    assert f"{missing:.0f} of {row['trace_requests']:.0f} trace requests neither answered" in str(
        row["unverified_reason"]
    ), row
    return False


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    root = tmp_path_factory.mktemp("trace")
    # half the shipped slices (Azure 15 s, Mooncake 30 s): the same checks on half the
    # replay time; the traces' paths made absolute for the copy of the file
    spec = yaml.safe_load(SHIPPED.read_text())
    azure, mooncake = spec["load"]["data"], spec["load"]["profiles"][1]["data"]
    azure["seconds"], mooncake["seconds"] = AZURE_SECONDS, MOONCAKE_SECONDS
    for data in (azure, mooncake):
        data["path"] = str(SHIPPED.parent / data["path"])
    path = root / SHIPPED.name
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    result = run_cli("sweep", str(path), "--output", str(root), timeout=900)
    runs = sorted(p for p in root.iterdir() if p.is_dir())
    assert len(runs) == 1, (result.stdout[-3000:], result.stderr)
    run = runs[0]
    manifest = Manifest.read(run)
    points = pd.read_csv(run / "points.csv").set_index(["config_label", "point_id"])
    layout = RunLayout(run)
    requests = pd.concat(
        pd.read_csv(layout.requests(c.config_id)).assign(config_label=c.label)
        for c in manifest.configs
    )
    return {"run": run, "result": result, "points": points, "requests": requests}


def test_the_sweep_completes_with_six_valid_replayed_points(swept):
    assert swept["result"].returncode == 0, swept["result"].stderr[-3000:]
    points = swept["points"]
    expected = {(label, p) for label in (ON, OFF) for p in (*AZURE_POINTS, MOONCAKE)}
    assert set(points.index) == expected
    assert points["valid"].all(), points["invalid_reason"].tolist()
    assert (points["requests_failed"].fillna(0) == 0).all()


def test_the_azure_points_send_every_request_of_the_slice_on_time(swept):
    asked = len(_azure_slice(AZURE_SECONDS))
    for label in (ON, OFF):
        for point in AZURE_POINTS:
            row = swept["points"].loc[(label, point)]
            assert row["trace_requests"] == asked, point
            if not _all_answered(row):
                continue
            assert row["arrival_lag_p95_ms"] < 50, (label, point, row["arrival_lag_p95_ms"])
            # the same figure from the per-request times, not from the column
            mine = swept["requests"]
            mine = mine[(mine["config_label"] == label) & (mine["point_id"] == point)]
            lags_ms = (mine["start_time"] - mine["scheduled_time"]) * 1000
            assert len(lags_ms) == asked and lags_ms.quantile(0.95) < 50, (label, point)


def test_the_server_counted_the_traces_lengths_within_five_percent(swept):
    azure = _azure_slice(AZURE_SECONDS)
    scale = min(1.0, CONTEXT / max(p + o for p, o in azure))  # length_scale auto
    prompt = sum(max(2, round(p * scale)) for p, _ in azure)
    output = sum(max(1, round(o * scale)) for _, o in azure)
    mooncake = _mooncake_slice(MOONCAKE_START, MOONCAKE_SECONDS)
    for label in (ON, OFF):
        for point in (*AZURE_POINTS, MOONCAKE):
            row = swept["points"].loc[(label, point)]
            assert abs(row["prompt_tokens_ratio"] - 1) <= 0.05, (label, point)
            assert abs(row["output_tokens_ratio"] - 1) <= 0.05, (label, point)
        for point in AZURE_POINTS:
            if not _all_answered(swept["points"].loc[(label, point)]):
                continue
            mine = swept["requests"]
            mine = mine[(mine["config_label"] == label) & (mine["point_id"] == point)]
            assert abs(mine["prompt_tokens"].sum() / prompt - 1) <= 0.05, (label, point)
            assert abs(mine["output_tokens"].sum() / output - 1) <= 0.05, (label, point)
        row = swept["points"].loc[(label, MOONCAKE)]
        assert row["trace_requests"] == len(mooncake)
        _all_answered(row)


def test_the_mooncake_prefix_reuse_is_reproduced_with_caching_on(swept):
    on = swept["points"].loc[(ON, MOONCAKE)]
    # blocks seen before exist in the cut: the trace itself says reuse is there
    seen, repeated = set(), 0
    for record in _mooncake_slice(MOONCAKE_START, MOONCAKE_SECONDS):
        repeated += any(h in seen for h in record["hash_ids"][:1])
        seen.update(record["hash_ids"])
    assert repeated > 0
    assert on["prefix_hit_rate"] > 0
    assert abs(on["prefix_hit_rate"] - on["prefix_hit_rate_predicted"]) <= 0.10, (
        on["prefix_hit_rate"],
        on["prefix_hit_rate_predicted"],
    )
    for point in (*AZURE_POINTS, MOONCAKE):
        off = swept["points"].loc[(OFF, point)]
        # no cache, no queries: the measured rate is empty (or 0), never a made-up hit
        assert pd.isna(off["prefix_hit_rate"]) or off["prefix_hit_rate"] == 0, point


def test_each_point_records_its_workload_beside_the_run(swept):
    summaries = list(swept["run"].glob("**/trace/replay-*.json"))
    assert len(summaries) >= 6  # three points per configuration
    for path in summaries:
        summary = json.loads(path.read_text())
        assert summary["prompts_inexact"] == 0 and summary["context"] == CONTEXT, path
