"""Trace replay and shared prefixes through `vllm bench serve`: the timed_trace file and the
flags a replay point gets (expected values read from the shipped trace cuts with csv and
json, not tunebench's reader), vLLM's per-request result read back into the replay evidence
(times worked out by hand), what cannot be checked left unverified, the prefix_repetition
flags, and what that dataset cannot express refused in one line naming the key."""

from __future__ import annotations

import csv
import datetime
import hashlib
import json
import math
from pathlib import Path

import pytest

from tests.conftest import REPO, spec_file
from tunebench.errors import LoadError
from tunebench.load.timed_trace import build_timed_trace, replay_clock, replay_evidence
from tunebench.load.trace_formats import TraceRequest
from tunebench.load.vllm_bench import (
    REPLAY_LEAD_S,
    VllmBenchDriver,
    num_prompts,
    point_argv,
    profile_problem,
)
from tunebench.points.row import PointId, build_row
from tunebench.spec.models import SharedPrefix, SyntheticData, TraceData
from tunebench.spec.plan import LoadPoint

TRACES = REPO / "sweeps" / "data" / "traces"
AZURE = TRACES / "azure-2023-conv-180s.csv"
MOONCAKE = TRACES / "mooncake-fast25-conversation-180s.jsonl"
CONTEXT = 512


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory) -> str:
    """A tokenizer that puts a BOS before every text, as the embedded model's does."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors

    made = Tokenizer(models.WordLevel({"<s>": 0, "<unk>": 1, "hello": 2}, unk_token="<unk>"))
    made.pre_tokenizer = pre_tokenizers.Whitespace()
    made.post_processor = processors.TemplateProcessing(
        single="<s> $A", special_tokens=[("<s>", 0)]
    )
    directory = tmp_path_factory.mktemp("tokenizer")
    made.save(str(directory / "tokenizer.json"))
    return str(directory)


def flags(argv: list[str]) -> dict[str, str]:
    return {argv[i]: argv[i + 1] for i in range(len(argv) - 1) if argv[i].startswith("--")}


def replay_point(trace: TraceData, speed: float, max_seconds: float | None = None) -> LoadPoint:
    return LoadPoint(
        f"replay-{trace.label}-{speed:g}", "replay", speed, max_seconds, None, None, trace=trace
    )


def prepared(tokenizer: str, tmp_path: Path, point: LoadPoint) -> tuple[VllmBenchDriver, list]:
    """The driver's job entry for one point (what `prepare` hands its worker), no worker."""
    driver = VllmBenchDriver(point.trace, tokenizer, spec_dir=REPO / "sweeps", context=CONTEXT)
    driver._work_dir = tmp_path
    return driver, driver._job_points([point], 0)[0]["argv"]


def read_rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def block_id(point_id: str, key: str, seed: int = 42) -> int:
    return int.from_bytes(hashlib.sha256(f"{seed}|{point_id}|{key}".encode()).digest()[:6], "big")


# -- the file and the flags of a replay point -----------------------------------------------


def azure_cut(seconds: float) -> list[tuple[float, int, int]]:
    """(seconds from the first request, prompt, output) of the cut's first `seconds`."""
    rows = list(csv.DictReader(AZURE.open()))

    def moment(text: str) -> float:
        whole, _, fraction = text.partition(".")
        parsed = datetime.datetime.strptime(whole, "%Y-%m-%d %H:%M:%S")
        return parsed.timestamp() + float("0." + (fraction or "0"))

    first = min(moment(r["TIMESTAMP"]) for r in rows)
    found = [
        (moment(r["TIMESTAMP"]) - first, int(r["ContextTokens"]), int(r["GeneratedTokens"]))
        for r in rows
    ]
    return sorted(r for r in found if r[0] < seconds)


def test_an_azure_replay_point_is_vllms_timed_trace_file_and_flags(tokenizer, tmp_path):
    trace = TraceData(kind="trace", path="data/traces/azure-2023-conv-180s.csv", seconds=15)
    point = replay_point(trace, 2.0)
    _, argv = prepared(tokenizer, tmp_path, point)
    dataset = tmp_path / "trace" / "replay-azure-2023-conv-180s-2.jsonl"
    assert argv == [
        "--backend", "vllm", "--endpoint", "/v1/completions",
        "--dataset-name", "timed_trace", "--dataset-path", str(dataset),
        "--timed-trace-chunk-hash-size", str(round(512 * min(1.0, CONTEXT / 4147))),
        "--timed-trace-sec-multiplier", "0.5",
        "--timed-trace-label-timestamp", "timestamp",
        "--timed-trace-label-input-length", "input_length",
        "--timed-trace-label-output-length", "output_length",
        "--timed-trace-label-hash-ids", "hash_ids",
        "--self-timed", "--ignore-eos",
        "--num-prompts", str(len(azure_cut(15))), "--seed", "42",
        "--ready-check-timeout-sec", "0",
        "--percentile-metrics", "ttft,tpot,itl,e2el", "--metric-percentiles", "50,90,95,99",
    ]  # fmt: skip
    cut = azure_cut(15)
    longest = max(p + o for _, p, o in cut)
    assert longest == 4147  # the slice's longest request (prompt + output), by hand above
    scale = min(1.0, CONTEXT / longest)
    block = max(1, round(512 * scale))  # 63 tokens a hash id at this scale
    rows = read_rows(dataset)
    assert len(rows) == len(cut) == 24
    for row, (at, prompt, output) in zip(rows, cut):
        # the lead is 1 s of the wall clock: 2 trace seconds at speed 2, on every request
        assert row["timestamp"] == pytest.approx(at + REPLAY_LEAD_S * 2.0, abs=2e-6)
        # lengths in the server's tokens: 2 at least (the BOS GuideLLM's text carries + 1)
        assert row["input_length"] == max(2, round(prompt * scale))
        assert row["output_length"] == max(1, round(output * scale))
        assert len(row["hash_ids"]) == math.ceil(row["input_length"] / block)
    # Azure has no hash ids: every block is its request's own, none shared
    every = [h for row in rows for h in row["hash_ids"]]
    assert len(set(every)) == len(every)
    assert rows[0]["hash_ids"][0] == block_id(point.point_id, "own 0.0")
    longer = next(i for i, row in enumerate(rows) if len(row["hash_ids"]) > 1)
    assert rows[longer]["hash_ids"][1] == block_id(point.point_id, f"own {longer}.1")
    summary = json.loads((tmp_path / "trace" / f"{point.point_id}.json").read_text())
    assert summary["requests"] == summary["sent"] == 24 and summary["lead_s"] == REPLAY_LEAD_S


def test_both_drivers_lead_their_replays_alike():
    """A cross-check's two sides play one schedule: the same lead before the first request."""
    from tunebench.load import guidellm

    assert REPLAY_LEAD_S == guidellm.REPLAY_LEAD_S


def mooncake_cut(start_s: float, seconds: float) -> list[dict]:
    records = [json.loads(line) for line in MOONCAKE.open() if line.strip()]
    first = min(r["timestamp"] for r in records) / 1000
    chosen = [r for r in records if start_s <= r["timestamp"] / 1000 - first < start_s + seconds]
    return sorted(chosen, key=lambda r: r["timestamp"])


def test_equal_mooncake_hash_ids_are_equal_timed_trace_ids_and_the_reuse_follows(
    tokenizer, tmp_path
):
    trace = TraceData(
        kind="trace",
        path="data/traces/mooncake-fast25-conversation-180s.jsonl",
        name="mooncake",
        start=120,
        seconds=30,
        length_scale=0.03125,
    )
    point = replay_point(trace, 2.0)
    _, argv = prepared(tokenizer, tmp_path, point)
    assert flags(argv)["--timed-trace-chunk-hash-size"] == "16"  # 512 x 1/32
    rows = read_rows(tmp_path / "trace" / "replay-mooncake-2.jsonl")
    cut = mooncake_cut(120, 30)
    assert len(rows) == len(cut)
    first = cut[0]["timestamp"] / 1000
    mapping: dict[int, int] = {}
    for row, record in zip(rows, cut):
        assert row["timestamp"] == pytest.approx(record["timestamp"] / 1000 - first + 2.0)
        for trace_id, written in zip(record["hash_ids"], row["hash_ids"]):
            # one written id per trace id, and no two trace ids sharing one
            assert mapping.setdefault(trace_id, written) == written
    assert len(set(mapping.values())) == len(mapping)
    assert mapping[cut[0]["hash_ids"][0]] == block_id(
        point.point_id, f"hash {cut[0]['hash_ids'][0]}"
    )
    # the shared prefix of each prompt with one sent before it, as vLLM draws them: chunk by
    # chunk of 16 tokens, a chunk equal only to one of the same id and the same size
    driver_reuse = json.loads((tmp_path / "trace" / "replay-mooncake-2.json").read_text())
    assert driver_reuse["sent"] == len(cut)
    expected, seen = [], []
    for row in rows:
        sizes = [min(16, row["input_length"] - 16 * n) for n in range(len(row["hash_ids"]))]
        chunks = list(zip(row["hash_ids"], sizes))
        best = 0
        for earlier in seen:
            shared = 0
            for mine, theirs in zip(chunks, earlier):
                if mine != theirs:
                    break
                shared += mine[1]
            best = max(best, shared)
        expected.append(best)
        seen.append(chunks)
    workload = build_timed_trace(
        [
            TraceRequest(r["timestamp"] / 1000 - first, r["input_length"], r["output_length"],
                         tuple(r["hash_ids"]))
            for r in cut
        ],
        CONTEXT, 0.03125, 512, point.point_id, 2.0, min_prompt=2, lead_s=REPLAY_LEAD_S,
    )  # fmt: skip
    assert workload.hash_ids == [row["hash_ids"] for row in rows]
    assert workload.reuse == expected and sum(expected) > 0  # the trace reuses some prefixes


def test_max_seconds_keeps_the_requests_due_before_it(tokenizer, tmp_path):
    trace = TraceData(kind="trace", path="data/traces/azure-2023-conv-180s.csv", seconds=15)
    # at speed 2 with a 1-s lead, 5 s keep the requests of the first 8 trace seconds
    point = replay_point(trace, 2.0, max_seconds=5.0)
    _, argv = prepared(tokenizer, tmp_path, point)
    kept = [r for r in azure_cut(15) if 1.0 + r[0] / 2 < 5.0]
    assert 0 < len(kept) < len(azure_cut(15))
    assert flags(argv)["--num-prompts"] == str(len(kept))
    assert len(read_rows(tmp_path / "trace" / "replay-azure-2023-conv-180s-2.jsonl")) == len(kept)


# -- vLLM's result read back ----------------------------------------------------------------


def three_requests(tokenizer: str) -> tuple:
    """Trace times 0, 1, 2 s at speed 2 with the 1-s lead: due 1.0, 1.5 and 2.0 s after vLLM's
    replay clock starts."""
    rows = [TraceRequest(t, 20, 3, None) for t in (0.0, 1.0, 2.0)]
    return build_timed_trace(
        rows, CONTEXT, 1.0, 512, "replay-t-2", 2.0, min_prompt=2, lead_s=REPLAY_LEAD_S
    )


def result(**changes) -> dict:
    """vLLM's `--save-result --save-detailed` keys (vllm/benchmarks/serve.py `benchmark`),
    with the worker's epoch_offset: the clock started at perf 100.0; requests sent at 101.010,
    101.560 and 102.200 (10, 60 and 200 ms after due), the last one failed (ttft 0). The last
    answer ended at 101.560 + 0.700 = 102.260, the benchmark 2.260 s after its start."""
    data = {
        "duration": 2.26,
        "completed": 2,
        "failed": 1,
        "input_lens": [20, 21, 20],
        "output_lens": [3, 3, 0],
        "ttfts": [0.05, 0.06, 0.0],
        "itls": [[0.01, 0.01], [0.02, 0.02], []],
        "latencies": [0.5, 0.7, 0.0],
        "start_times": [101.010, 101.560, 102.200],
        "queue_times": [0.0001, 0.0002, 0.0001],
        "errors": ["", "", "boom"],
        "epoch_offset": 1_000_000.0,
    }
    return {**data, **changes}


def test_lags_are_measured_from_the_clock_the_duration_dates(tokenizer):
    workload = three_requests(tokenizer)
    assert [workload.due_s(i) for i in range(3)] == [1.0, 1.5, 2.0]
    assert replay_clock(result()) == pytest.approx(100.0)
    columns, samples = replay_evidence(workload, result())
    # lags 10, 60, 200 ms (the failed one was sent too): p50 60; p95 at rank 1.9 ->
    # 60 + 0.9 x 140 = 186; 2 of 3 more than 50 ms late
    assert columns["arrival_lag_p50_ms"] == pytest.approx(60.0)
    assert columns["arrival_lag_p95_ms"] == pytest.approx(186.0)
    assert columns["arrival_late_share"] == pytest.approx(0.6667)
    assert columns["trace_requests"] == 3 and columns["trace_length_scale"] == 1.0
    # the answered two, in epoch seconds, with what was asked of them
    assert [s["scheduled_time"] for s in samples] == pytest.approx([1_000_101.0, 1_000_101.5])
    assert [s["start_time"] for s in samples] == pytest.approx([1_000_101.01, 1_000_101.56])
    assert [(s["trace_prompt_tokens"], s["prompt_tokens"]) for s in samples] == [(20, 20), (20, 21)]
    assert [s["trace_output_tokens"] for s in samples] == [3, 3]
    assert [s["reuse_tokens"] for s in samples] == [0, 0]


def test_the_clock_is_never_dated_late_so_lags_are_never_flattered(tokenizer):
    # vLLM took 30 ms after its last answer to end the benchmark: the clock dated 30 ms early,
    # every lag 30 ms longer than it was; never shorter
    columns, _ = replay_evidence(three_requests(tokenizer), result(duration=2.29))
    assert columns["arrival_lag_p50_ms"] == pytest.approx(90.0)


def test_a_result_without_send_times_leaves_arrival_unchecked_not_passed(tokenizer):
    data = result(start_times=None)
    columns, samples = replay_evidence(three_requests(tokenizer), data)
    assert columns["arrival_lag_p95_ms"] is None and columns["arrival_late_share"] is None
    assert all("scheduled_time" not in s for s in samples)
    row = build_row(
        PointId("r", "c1", "base", "replay-t-2", "replay"),
        {},
        {"target": 2.0, "requests_ok": 2, "requests_failed": 0, **columns},
        samples,
        {"server_samples": 5},
        block_size=16,
    ).csv_cells()
    assert row["valid"] and not row["client_limited"]
    assert "arrival timing not checked" in row["unverified_reason"]
    # lengths were checked: the server's counts are within 5% (21 of 20 is 5%)
    assert "lengths not checked" not in row["unverified_reason"]
    assert row["length_mismatch_share"] == 0.0


def test_a_replay_beside_synthetic_data_is_held_to_its_trace_lengths_not_the_runs(tokenizer):
    """A sweep with synthetic load.data (32 output tokens each) and a replay profile with a
    trace of its own: the replayed requests ask for the trace's 3 tokens, and are valid."""
    columns, samples = replay_evidence(three_requests(tokenizer), result())
    row = build_row(
        PointId("r", "c1", "base", "replay-t-2", "replay"),
        {},
        {"target": 2.0, "requests_ok": 2, "requests_failed": 1, **columns},
        samples,
        {"server_samples": 5},
        expected_output_tokens=32,
        block_size=16,
    ).csv_cells()
    assert "shorter than the 32 tokens" not in row["invalid_reason"]
    assert row["output_tokens_ratio"] == 1.0


def test_a_result_that_does_not_match_the_file_is_refused(tokenizer):
    with pytest.raises(LoadError, match="lists 2 requests where its timed_trace file holds 3"):
        replay_evidence(three_requests(tokenizer), result(ttfts=[0.05, 0.06]))


def test_a_recorded_vllm_result_reads_as_a_replay_of_as_many_requests(tokenizer, tmp_path):
    """vLLM's real result file (40 requests, tests/fixtures/vllm-bench) read against a
    40-request workload: the replay clock dates before the first send, every lag is a lag."""
    data = json.loads((REPO / "tests/fixtures/vllm-bench/concurrent-8.json").read_text())
    rows = [TraceRequest(0.0, 64, 32, None) for _ in range(40)]
    workload = build_timed_trace(rows, CONTEXT, 1.0, 512, "replay-t-1", 1.0, min_prompt=2)
    clock = replay_clock(data)
    assert clock <= min(data["start_times"])
    columns, samples = replay_evidence(workload, data)
    assert len(samples) == 40 and columns["arrival_lag_p50_ms"] >= 0
    assert columns["arrival_lag_p95_ms"] >= columns["arrival_lag_p50_ms"]
    assert all(s["start_time"] >= s["scheduled_time"] for s in samples)


# -- shared prefixes ------------------------------------------------------------------------

PREFIX = SyntheticData(
    kind="synthetic",
    prompt_tokens=64,
    output_tokens=32,
    prefix=SharedPrefix(groups=4, tokens=128),
    seed=7,
)


def synthetic_point(kind: str, target: float | None, **limits) -> LoadPoint:
    return LoadPoint(
        f"{kind}-{target}",
        kind,
        target,
        limits.get("max_seconds"),
        limits.get("max_requests"),
        None,
    )


def test_a_prefix_point_is_vllms_prefix_repetition():
    assert point_argv(synthetic_point("concurrent", 8, max_requests=40), PREFIX) == [
        "--backend", "vllm", "--endpoint", "/v1/completions",
        "--dataset-name", "prefix_repetition",
        "--prefix-repetition-prefix-len", "128",
        "--prefix-repetition-suffix-len", "64",
        "--prefix-repetition-num-prefixes", "4",
        "--prefix-repetition-output-len", "32",
        "--ignore-eos",
        "--num-prompts", "40", "--seed", "7",
        "--percentile-metrics", "ttft,tpot,itl,e2el", "--metric-percentiles", "50,90,95,99",
        "--max-concurrency", "8",
    ]  # fmt: skip


def test_a_rate_points_count_is_rounded_up_to_whole_groups():
    # 2.5 req/s x 5 s = 12.5 -> 13 requests -> 16, four per group
    point = synthetic_point("poisson", 2.5, max_seconds=5)
    assert num_prompts(point, 4) == 16
    assert flags(point_argv(point, PREFIX))["--num-prompts"] == "16"
    assert (
        flags(point_argv(point, PREFIX.model_copy(update={"prefix": None})))["--num-prompts"]
        == "13"
    )


@pytest.mark.parametrize(
    "data, point, says",
    [
        (
            PREFIX.model_copy(update={"prefix": SharedPrefix(groups=4, tokens=128, zipf=1)}),
            synthetic_point("concurrent", 8, max_requests=40),
            "load.data.prefix.zipf 1 (prefix_repetition gives every group the same share",
        ),
        (
            PREFIX.model_copy(update={"prompt_tokens_stdev": 8}),
            synthetic_point("concurrent", 8, max_requests=40),
            "load.data.prompt_tokens_stdev/output_tokens_stdev with a prefix",
        ),
        (
            PREFIX,
            synthetic_point("concurrent", 8, max_requests=10),
            "max_requests 10 is not a multiple of load.data.prefix.groups 4",
        ),
        (PREFIX, LoadPoint("replay-t-1", "replay", 1.0, None, None, None), "without a trace"),
    ],
)
def test_what_vllm_datasets_cannot_express_is_named(data, point, says):
    assert says in profile_problem(point, data)


def test_the_driver_refuses_data_it_cannot_send():
    from tunebench.spec.models import SessionsData

    sessions = SessionsData(kind="sessions", turns=2, prompt_tokens=8, output_tokens=8)
    with pytest.raises(LoadError, match="cannot send load.data kind sessions"):
        VllmBenchDriver(sessions, "tok")


# -- the sweep file -------------------------------------------------------------------------

SPEC = """
name: p
model: builtin:tiny-llama-random
deployment: {kind: local}
server:
  args: {max-model-len: 512}
load:
  driver: vllm-bench
  data: {kind: synthetic, prompt_tokens: 64, output_tokens: 32, prefix: {groups: 4, tokens: 128}}
  profiles:
    - {kind: concurrent, streams: 2, max_requests: 8}
"""


@pytest.mark.parametrize(
    "old, new",
    [
        ("", ""),  # equal groups, fixed lengths, whole groups: prefix_repetition's shape
        ("driver: vllm-bench", "driver: cross-check"),
        (
            "  data: {kind: synthetic, prompt_tokens: 64, output_tokens: 32, prefix: {groups: 4, "
            "tokens: 128}}\n  profiles:\n    - {kind: concurrent, streams: 2, max_requests: 8}",
            "  data: {kind: trace, path: a.csv, seconds: 15}\n  profiles:\n"
            "    - {kind: replay, speed: [1, 2]}",
        ),
    ],
)
def test_prefix_and_trace_sweeps_with_vllm_bench_plan(tmp_path, capsys, old, new):
    from tests.unit.test_spec_errors import run_in_process

    (tmp_path / "a.csv").write_text(AZURE.read_text())  # the trace the third case plays
    result = run_in_process(capsys, "sweep", str(spec_file(tmp_path, SPEC, old, new)), "--dry-run")
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize(
    "old, new, fragment",
    [
        (
            "tokens: 128}",
            "tokens: 128, zipf: 0.5}",
            "load.data.prefix.zipf 0.5: load.driver vllm-bench sends shared prefixes as vLLM's "
            "prefix_repetition, which gives every group the same share; set zipf: 0 or use "
            "load.driver guidellm",
        ),
        (
            "output_tokens: 32,",
            "output_tokens: 32, output_tokens_stdev: 4,",
            "load.data.prompt_tokens_stdev/output_tokens_stdev: load.driver vllm-bench sends "
            "shared prefixes as vLLM's prefix_repetition, which has fixed lengths",
        ),
        (
            "max_requests: 8}",
            "max_requests: 10}",
            "load.profiles[0] (kind concurrent): max_requests 10 is not a multiple of "
            "load.data.prefix.groups 4 (vLLM's prefix_repetition sends max_requests // groups "
            "per group); use e.g. 8",
        ),
    ],
)
def test_a_prefix_vllm_bench_cannot_send_is_one_line_naming_the_key(
    tmp_path, capsys, old, new, fragment
):
    from tests.unit.test_spec_errors import assert_one_line_error, run_in_process

    path = spec_file(tmp_path, SPEC, old, new)
    result = run_in_process(capsys, "sweep", str(path), "--dry-run")
    assert_one_line_error(result, path, (fragment,))
