"""Trace replay: reading the formats, slicing, fitting to the context, the prefix-sharing
prompt builder, the fidelity figures (expected values worked out by hand in the comments),
and bad input as one line naming the file, the key and the fix."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from tests.conftest import spec_file
from tunebench import demo
from tunebench.load import trace as tr
from tunebench.load import trace_formats, trace_prompts
from tunebench.load.guidellm import build_groups
from tunebench.load.guidellm_data import replay_evidence
from tunebench.points import trace as fidelity
from tunebench.points.row import PointId, build_row
from tunebench.spec.plan import LoadPoint

# -- a tokenizer built like the embedded model's (demo.py), without the model -------------


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory) -> Path:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    recipe = demo.BUILTIN_MODELS["tiny-llama-random"]
    tokenizer = Tokenizer(models.BPE(unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=recipe.vocab_size,
        special_tokens=["<unk>", "<s>", "</s>", "<pad>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(demo._training_text(recipe.seed), trainer=trainer)
    tokenizer.post_processor = processors.TemplateProcessing(
        single="<s> $A", special_tokens=[("<s>", tokenizer.token_to_id("<s>"))]
    )
    directory = tmp_path_factory.mktemp("tokenizer")
    tokenizer.save(str(directory / "tokenizer.json"))
    return directory


@pytest.fixture(scope="module")
def builder(tokenizer_dir) -> trace_prompts.PromptBuilder:
    return trace_prompts.PromptBuilder(str(tokenizer_dir))


def write(path: Path, text: str) -> Path:
    path.write_text(textwrap.dedent(text).lstrip())
    return path


# -- reading ---------------------------------------------------------------------------


def test_azure_rows_with_seven_fraction_digits(tmp_path):
    path = write(
        tmp_path / "a.csv",
        """
        TIMESTAMP,ContextTokens,GeneratedTokens
        2023-11-16 18:15:46.6805900,374,44
        2023-11-16 18:15:47.0000000,396,109
        2023-11-16 18:15:46.9000000,10,1
        """,
    )
    assert trace_formats.guess_format(path) == "azure"
    requests = trace_formats.read_trace(path)
    # sorted by time: 46.68059, 46.9, 47.0
    assert [(r.prompt_tokens, r.output_tokens) for r in requests] == [
        (374, 44),
        (10, 1),
        (396, 109),
    ]
    assert requests[1].time - requests[0].time == pytest.approx(0.21941, abs=1e-6)
    assert requests[2].time - requests[0].time == pytest.approx(0.31941, abs=1e-6)
    assert requests[0].line == 2


def test_mooncake_times_are_milliseconds_and_hash_ids_kept(tmp_path):
    path = write(
        tmp_path / "m.jsonl",
        """
        {"timestamp": 0, "input_length": 1000, "output_length": 5, "hash_ids": [0, 1]}
        {"timestamp": 1500, "input_length": 600, "output_length": 7, "hash_ids": [0, 2]}
        """,
    )
    assert trace_formats.guess_format(path) == "mooncake"
    requests = trace_formats.read_trace(path)
    assert [r.time for r in requests] == [0.0, 1.5]
    assert requests[1].hash_ids == (0, 2)


def test_burstgpt_and_own_jsonl(tmp_path):
    burst = write(
        tmp_path / "b.csv",
        """
        Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type
        5.0,ChatGPT,472,18,490,Conversation log
        7.5,GPT-4,1087,0,1087,Conversation log
        """,
    )
    assert trace_formats.guess_format(burst) == "burstgpt"
    assert [
        (r.time, r.prompt_tokens, r.output_tokens) for r in trace_formats.read_trace(burst)
    ] == [
        (5.0, 472, 18),
        (7.5, 1087, 0),
    ]
    own = write(
        tmp_path / "o.jsonl",
        """
        {"timestamp": 0.25, "prompt_tokens": 30, "output_tokens": 4}
        {"timestamp": 0.5, "input_length": 20, "output_length": 2}
        """,
    )
    assert trace_formats.guess_format(own) == "jsonl"
    assert [(r.time, r.prompt_tokens) for r in trace_formats.read_trace(own)] == [
        (0.25, 30),
        (0.5, 20),
    ]


@pytest.mark.parametrize(
    "name, text, message",
    [
        ("a.csv", "x,y\n1,2\n", "a.csv:1: a CSV trace needs the Azure header"),
        (
            "a.csv",
            "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:15:46.1,abc,4\n",
            "a.csv:2: ContextTokens 'abc' is not a token count",
        ),
        (
            "a.csv",
            "TIMESTAMP,ContextTokens,GeneratedTokens\nyesterday,3,4\n",
            "a.csv:2: TIMESTAMP 'yesterday' is not YYYY-MM-DD HH:MM:SS",
        ),
        (
            "m.jsonl",
            '{"timestamp": 0, "input_length": 3, "output_length": 1, "hash_ids": [0]}\nnot json\n',
            "m.jsonl:2: not JSON",
        ),
        (
            "m.jsonl",
            '{"timestamp": 0, "input_length": 3, "output_length": 1, "hash_ids": [0]}\n'
            '{"timestamp": 1, "input_length": -3, "output_length": 1, "hash_ids": [1]}\n',
            "m.jsonl:2: input_length -3 is not a token count",
        ),
        (
            "m.jsonl",
            '{"timestamp": 0, "input_length": 3, "output_length": 1, "hash_ids": ["a"]}\n',
            "m.jsonl:1: hash_ids must be a list of whole numbers",
        ),
        ("o.jsonl", '{"prompt_tokens": 3, "output_tokens": 1}\n', "o.jsonl:1: the record has no"),
        ("o.jsonl", "", "o.jsonl: the trace holds no request"),
    ],
)
def test_bad_trace_files_name_file_and_line(tmp_path, name, text, message):
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(trace_formats.TraceFormatError) as caught:
        trace_formats.read_trace(path)
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)


# -- slicing and fitting ---------------------------------------------------------------


def _requests(*rows) -> list[trace_formats.TraceRequest]:
    return [trace_formats.TraceRequest(t, p, o, h) for t, p, o, h in rows]


def test_slice_by_seconds_and_by_requests():
    trace = _requests(*[(t, 10, 2, None) for t in (100.0, 101.0, 102.0, 103.0, 110.0)])
    # from 1 s after the first request, 2 s: the requests at 101 and 102, times from 101
    assert [r.time for r in tr.slice_trace(trace, start=1, seconds=2)] == [0.0, 1.0]
    assert [r.time for r in tr.slice_trace(trace, start=1, count=3)] == [0.0, 1.0, 2.0]
    assert [r.time for r in tr.slice_trace(trace, start=0.5, count=1)] == [0.5]
    assert len(tr.slice_trace(trace)) == 5
    with pytest.raises(
        trace_formats.TraceFormatError, match=r"holds no request; the trace spans 10 s"
    ):
        tr.slice_trace(trace, start=20)


def test_auto_scale_fits_the_longest_request():
    trace = _requests((0, 1000, 200, None), (1, 400, 100, None))
    fitted = tr.fit_lengths(trace, context=600)
    # longest 1200 tokens into 600: factor 0.5
    assert fitted.scale == 0.5
    assert [(r.prompt_tokens, r.output_tokens) for r in fitted.requests] == [(500, 100), (200, 50)]
    assert fitted.clamped == 0
    assert fitted.block_tokens == 256
    assert [(r.trace_prompt_tokens, r.trace_output_tokens) for r in fitted.requests] == [
        (1000, 200),
        (400, 100),
    ]


def test_explicit_scale_clamps_what_still_does_not_fit():
    trace = _requests((0, 1000, 200, None), (1, 400, 100, None), (2, 1, 1, None))
    fitted = tr.fit_lengths(trace, context=600, scale=1.0, min_prompt=2)
    # 1200 > 600: output cut to 600 // 4 = 150, prompt to 600 - 150 = 450; the tiny
    # request is raised to the 2-token prompt minimum
    assert [(r.prompt_tokens, r.output_tokens) for r in fitted.requests] == [
        (450, 150),
        (400, 100),
        (2, 1),
    ]
    assert fitted.clamped == 1 and fitted.requests[0].clamped
    assert (
        tr.fit_lengths(trace, context=600, scale=0.001, min_prompt=2).requests[0].output_tokens == 1
    )
    with pytest.raises(trace_formats.TraceFormatError, match="cannot hold a prompt"):
        tr.fit_lengths(trace, context=2, min_prompt=2)


# -- the prompt builder ----------------------------------------------------------------


def _fitted(builder, hash_rows, block_tokens=512, scale=1 / 64):
    # prompt lengths: the blocks' tokens plus the tokenizer's specials (a BOS)
    rows = [
        trace_formats.TraceRequest(
            float(i), len(ids) * block_tokens + builder.specials * 64, 1, ids
        )
        for i, ids in enumerate(hash_rows)
    ]
    return tr.fit_lengths(
        rows, context=4096, scale=scale, block_tokens=block_tokens, min_prompt=builder.specials + 1
    )


def test_equal_hash_ids_share_blocks_token_for_token(builder):
    fitted = _fitted(builder, [(1, 2, 3), (1, 2, 4), (5, 6, 7)])
    assert fitted.block_tokens == 8
    a, b, c = builder.contents(fitted, salt="p")
    assert len(a) == len(b) == len(c) == 24
    assert a[:16] == b[:16]  # ids 1, 2 in common
    assert a[16:] != b[16:] and a[16] != b[16]  # 3 vs 4 follow the same block: differ at once
    assert a[0] != c[0]  # nothing in common from the first token on
    assert len(set(builder.words)) == len(builder.words) >= 64


def test_prompts_reencode_exactly_and_count_the_specials(builder):
    fitted = _fitted(builder, [(1, 2, 3), (1, 2, 4)])
    for request, content in zip(fitted.requests, builder.contents(fitted, salt="p")):
        assert builder.exact(content)
        assert builder.specials == 1  # the BOS the template adds
        assert len(builder._encode(builder.text(content), True)) == request.prompt_tokens


def test_each_point_gets_blocks_of_its_own(builder):
    fitted = _fitted(builder, [(1, 2), (1, 3)])
    first, second = (
        builder.contents(fitted, salt="replay-a-1"),
        builder.contents(fitted, "replay-a-2"),
    )
    assert first[0][:8] == first[1][:8] and second[0][:8] == second[1][:8]
    assert first[0][:8] != second[0][:8]
    assert builder.contents(fitted, salt="replay-a-1") == first  # and the same every run


def test_requests_without_hash_ids_share_nothing(builder):
    rows = _requests(*[(float(i), 40, 3, None) for i in range(30)])
    workload = tr.build_workload(rows, builder, 512, 1.0, 512, "replay-x-1", 1.0)
    contents = [builder._encode(t, False) for t in workload.texts]
    assert len({c[0] for c in contents}) == 30
    assert workload.reuse == [0] + [1] * 29  # the BOS every prompt starts with
    assert workload.inexact == 0


def test_reuse_tokens_by_hand():
    sequences = [[1, 2, 3], [1, 2, 4], [1, 2, 3, 5], [9], [1, 2]]
    # [1,2,4] shares [1,2]; [1,2,3,5] shares [1,2,3]; [9] nothing; [1,2] all of itself
    assert trace_prompts.reuse_tokens(sequences) == [0, 2, 3, 0, 2]


def test_workload_reuse_counts_shared_blocks_and_the_bos(builder):
    fitted_rows = [
        trace_formats.TraceRequest(0.0, 1600, 1, (1, 2, 3)),
        trace_formats.TraceRequest(1.0, 1600, 1, (1, 2, 4)),
        trace_formats.TraceRequest(1.0, 1600, 1, (7, 8, 9)),
    ]
    workload = tr.build_workload(fitted_rows, builder, 4096, 1 / 64, 512, "p", 1.0)
    # 1600 x 1/64 = 25 tokens with the BOS: 24 content tokens, three blocks of 8
    assert [r.prompt_tokens for r in workload.fitted.requests] == [25, 25, 25]
    assert workload.reuse == [0, 17, 1]  # BOS + blocks 1 and 2; BOS only
    # equal trace times get distinct stamps, so every request can be found again
    assert workload.times == [0.0, 1.0, 1.000001]
    assert workload.index_of(1.000001) == 2 and workload.index_of(5.0) is None


def test_dataset_file_is_what_guidellm_reads(builder, tmp_path):
    rows = _requests((0.0, 30, 4, None), (2.0, 20, 2, None))
    workload = tr.build_workload(rows, builder, 512, 1.0, 512, "replay-t-2", 2.0)
    path = workload.write_dataset(tmp_path / "w.jsonl")
    records = [json.loads(line) for line in path.read_text().splitlines()]
    assert [set(r) for r in records] == [
        {"prompt", "prompt_tokens_count", "output_tokens_count", "relative_timestamp"}
    ] * 2
    assert [r["relative_timestamp"] for r in records] == [0.0, 2.0]
    assert [r["output_tokens_count"] for r in records] == [4, 2]
    # at speed 2 the second request is due 1 s after the replay clock started
    assert workload.scheduled(1, start=100.0) == 101.0


def test_a_lead_delays_every_request_alike_and_the_requests_are_found_again(builder, tmp_path):
    rows = _requests((0.0, 30, 4, None), (2.0, 20, 2, None), (2.0, 20, 2, None))
    workload = tr.build_workload(rows, builder, 512, 1.0, 512, "replay-t-2", 2.0, lead_s=1.5)
    records = [
        json.loads(line)
        for line in workload.write_dataset(tmp_path / "w.jsonl").read_text().splitlines()
    ]
    # 1.5 wall seconds at speed 2 are 3 trace seconds: written 3, 5 and 5 + 1e-6
    assert [r["relative_timestamp"] for r in records] == [3.0, 5.0, 5.000001]
    # GuideLLM sends at clock + stamp / 2: the first 1.5 s after the clock, then 1 s later
    assert workload.scheduled(0, start=100.0) == 101.5
    assert workload.scheduled(1, start=100.0) == 102.5
    assert workload.index_of(5.000001) == 2 and workload.index_of(2.0) is None
    assert workload.summary()["lead_s"] == 1.5


def test_the_driver_gives_every_replay_a_lead_and_budgets_for_it(tokenizer_dir, tmp_path):
    from tunebench.load.guidellm import REPLAY_LEAD_S, GuideLLMDriver
    from tunebench.spec.models import TraceData

    trace = tmp_path / "t.jsonl"
    trace.write_text(
        "\n".join(
            json.dumps({"timestamp": t, "prompt_tokens": 20, "output_tokens": 2})
            for t in (0.0, 4.0)
        )
    )
    data = TraceData(kind="trace", path=str(trace))
    driver = GuideLLMDriver(data, tmp_path, str(tokenizer_dir), context=512)
    point = LoadPoint("replay-t-2", "replay", 2.0, None, None, None, trace=data)
    driver._prepare_traces([point], tmp_path / "work")
    summary = json.loads((tmp_path / "work" / "trace" / "replay-t-2.json").read_text())
    assert REPLAY_LEAD_S > 0 and summary["lead_s"] == REPLAY_LEAD_S
    # 4 trace seconds at speed 2 plus the lead, twice, and the margin twice (point_budget_s)
    expected = 2 * (4 / 2 + REPLAY_LEAD_S) + 2 * driver.stall_margin_s
    assert driver._budget(point) == pytest.approx(expected)


def test_replay_point_is_its_own_guidellm_group(tmp_path):
    point = LoadPoint("replay-t-2", "replay", 2.0, None, None, None)
    capped = LoadPoint("replay-t-4", "replay", 4.0, 10.0, None, None)
    groups = build_groups(
        [point, capped], {"replay-t-2": tmp_path / "a.jsonl", "replay-t-4": tmp_path / "b.jsonl"}
    )
    assert groups[0] == {
        "profile": {"kind": "replay", "time_scale": 0.5, "schedule_turn": "timestamp"},
        "constraints": [],
        "data": {"kind": "json_file", "path": str(tmp_path / "a.jsonl")},
    }
    assert groups[1]["constraints"] == [{"kind": "max_duration", "seconds": [10.0]}]


# -- fidelity --------------------------------------------------------------------------


def test_percentiles_interpolate_between_ranks():
    # four lags: p50 at rank 1.5 -> 20 + 0.5 x 10 = 25 ms; p95 at rank 2.85 ->
    # 30 + 0.85 x 70 = 89.5 ms; one of four over 50 ms
    assert fidelity.arrival_fidelity([0.010, 0.020, 0.030, 0.100]) == {
        "arrival_lag_p50_ms": 25.0,
        "arrival_lag_p95_ms": 89.5,
        "arrival_late_share": 0.25,
    }
    assert fidelity.arrival_fidelity([])["arrival_lag_p95_ms"] is None


def test_length_fidelity_by_hand():
    samples = [
        {
            "trace_prompt_tokens": 100,
            "trace_output_tokens": 10,
            "prompt_tokens": 100,
            "output_tokens": 10,
        },
        {
            "trace_prompt_tokens": 100,
            "trace_output_tokens": 10,
            "prompt_tokens": 106,
            "output_tokens": 10,
        },
        {
            "trace_prompt_tokens": 50,
            "trace_output_tokens": 20,
            "prompt_tokens": 50,
            "output_tokens": 19,
        },
    ]
    # 106 is 6% over 100: off; 19 of 20 is 5%: within. Sums 256/250 and 39/40.
    assert fidelity.length_fidelity(samples) == {
        "prompt_tokens_ratio": 1.024,
        "output_tokens_ratio": 0.975,
        "length_mismatch_share": 0.3333,
    }


def test_predicted_hit_rate_in_whole_blocks():
    samples = [
        {"reuse_tokens": 1, "trace_prompt_tokens": 100},  # 1 token: no whole block of 32
        {"reuse_tokens": 100, "trace_prompt_tokens": 100},  # all: at most 99 -> 3 blocks, 96
        {"reuse_tokens": 64, "trace_prompt_tokens": 70},  # 2 blocks, 64
    ]
    # (0 + 96 + 64) / (100 + 100 + 70) = 160 / 270
    assert fidelity.predicted_hit_rate(samples, 32) == round(160 / 270, 4)
    assert fidelity.predicted_hit_rate(samples, 128) == 0.0
    assert fidelity.predicted_hit_rate(samples, None) is None


def _benchmark(requests: list[tuple[str, float, float, float | None, int, int]]) -> dict:
    """A GuideLLM report's benchmark: (status, trace time, clock start, sent, prompt, out)."""
    out: dict = {"successful": [], "errored": [], "incomplete": []}
    for status, trace_time, clock, sent, prompt, output in requests:
        out[status].append(
            {
                "prompt_tokens": prompt,
                "output_tokens": output,
                "time_to_first_token_ms": 5.0,
                "info": {
                    "scheduler_start_time": clock,
                    "settings": {"relative_timestamp": trace_time},
                    "timings": {"request_start": sent, "request_end": (sent or 0) + 0.1},
                },
            }
        )
    return {"requests": out}


def test_replay_evidence_against_the_workloads_own_schedule(builder):
    from tunebench.load.guidellm_report import request_samples

    rows = _requests((0.0, 20, 3, None), (1.0, 20, 3, None), (2.0, 20, 3, None), (3.0, 20, 3, None))
    workload = tr.build_workload(rows, builder, 512, 1.0, 512, "replay-t-2", 2.0)
    clock = 1000.0
    # at speed 2 due at 1000, 1000.5, 1001, 1001.5; sent 10, 60 and 200 ms late; the last
    # one was cut off before it was sent
    benchmark = _benchmark(
        [
            ("successful", 0.0, clock, 1000.010, 20, 3),
            ("successful", 1.0, clock, 1000.560, 21, 3),
            ("errored", 2.0, clock, 1001.200, 0, 0),
            ("incomplete", 3.0, clock, None, 0, 0),
        ]
    )
    samples = request_samples(benchmark)
    columns = replay_evidence(workload, benchmark, samples)
    # lags 10, 60, 200 ms: p50 60; p95 at rank 1.9 -> 60 + 0.9 x 140 = 186; 2 of 3 late
    assert columns["arrival_lag_p50_ms"] == pytest.approx(60.0)
    assert columns["arrival_lag_p95_ms"] == pytest.approx(186.0)
    assert columns["arrival_late_share"] == pytest.approx(0.6667)
    assert columns["trace_requests"] == 4 and columns["trace_length_scale"] == 1.0
    assert [s["scheduled_time"] for s in samples] == [1000.0, 1000.5]
    assert [s["trace_prompt_tokens"] for s in samples] == [20, 20]
    assert all("trace_time" not in s and "clock_start" not in s for s in samples)


def _row(samples, client=None, server=None, block_size=32):
    client = {"target": 2.0, "requests_ok": len(samples), "requests_failed": 0, **(client or {})}
    return build_row(
        PointId("r", "c1", "base", "replay-t-2", "replay"),
        {},
        client,
        samples,
        {"server_samples": 5, **(server or {})},
        block_size=block_size,
    ).csv_cells()


def _sample(asked=(100, 10), got=(100, 10), reuse=1):
    return {
        "trace_prompt_tokens": asked[0],
        "trace_output_tokens": asked[1],
        "prompt_tokens": got[0],
        "output_tokens": got[1],
        "reuse_tokens": reuse,
    }


def test_a_faithful_replay_is_valid_and_not_client_limited():
    row = _row(
        [_sample(reuse=64), _sample()],
        client={"arrival_late_share": 0.0, "arrival_lag_p95_ms": 3.0},
        server={"prefix_hit_rate": 0.30},
    )
    assert row["valid"] and not row["client_limited"]
    assert row["prefix_hit_rate_predicted"] == 0.32  # 64 of 200 prompt tokens
    assert row["unverified_reason"] == ""
    assert row["prompt_tokens_ratio"] == 1.0 and row["length_mismatch_share"] == 0.0


def test_late_arrivals_wrong_lengths_and_missing_reuse_are_flagged():
    row = _row(
        [_sample(got=(80, 10), reuse=96), _sample(reuse=96)],
        client={"arrival_late_share": 0.2, "arrival_lag_p95_ms": 140.0},
        server={"prefix_hit_rate": 0.0},
    )
    assert row["client_limited"]
    assert (
        "replayed late: 20% of requests sent more than 50 ms after their trace time"
        in (row["client_limited_reason"])
    )
    assert not row["valid"]
    assert (
        "lengths differ from the trace: 50% of requests off by more than 5%"
        in (row["invalid_reason"])
    )
    assert (
        "prefix reuse not reproduced: hit rate 0.00 measured vs 0.96 predicted"
        in (row["unverified_reason"])
    )


def test_points_that_replay_nothing_get_no_trace_columns():
    row = _row([{"prompt_tokens": 10, "output_tokens": 3}], block_size=None)
    assert "prefix_hit_rate_predicted" not in row and row["valid"]


# -- the sweep file and its errors -----------------------------------------------------

AZURE = """TIMESTAMP,ContextTokens,GeneratedTokens
2023-11-16 18:15:46.6805900,374,44
2023-11-16 18:15:50.9951690,396,109
2023-11-16 18:15:51.2224670,512,55
"""

SPEC = """
name: t
model: builtin:tiny-llama-random
deployment: {kind: local}
server:
  args: {max-model-len: 512}
load:
  data: {kind: trace, path: a.csv, requests: 2}
  profiles:
    - {kind: replay, speed: [1, 2]}
"""


def trace_spec(tmp_path: Path, old: str = "", new: str = "") -> Path:
    """SPEC with `old` replaced by `new`, beside the trace it plays (a.csv) and a broken
    copy of it (bad.csv)."""
    (tmp_path / "a.csv").write_text(AZURE)
    (tmp_path / "bad.csv").write_text(AZURE.replace(",512,", ",abc,"))
    return spec_file(tmp_path, SPEC, old, new)


def test_trace_sweep_plans_one_point_per_speed(tmp_path):
    from tunebench import assemble
    from tunebench.spec.loading import load_spec

    path = trace_spec(tmp_path)
    plan = assemble.plan(load_spec(path), path)
    assert [(p.point_id, p.kind, p.target) for p in plan.points] == [
        ("replay-a-1", "replay", 1.0),
        ("replay-a-2", "replay", 2.0),
    ]
    assert plan.points[0].trace is not None and plan.points[0].trace.requests == 2


def test_shipped_trace_sweep_plans(tmp_path):
    from tunebench import assemble
    from tunebench.spec.loading import load_spec

    path = Path(__file__).parents[2] / "sweeps" / "cpu-trace.yaml"
    plan = assemble.plan(load_spec(path), path)
    assert [p.point_id for p in plan.points] == [
        "replay-azure-1",
        "replay-azure-2",
        "replay-mooncake-2",
    ]
    assert len(plan.configs) == 2


@pytest.mark.parametrize(
    "old, new, fragment",
    [
        (
            "- {kind: replay, speed: [1, 2]}",
            "- {kind: concurrent, streams: 2, max_seconds: 5}",
            "load.profiles[0] (kind concurrent): load.data kind trace is played by kind replay "
            "profiles",
        ),
        (
            "{kind: trace, path: a.csv, requests: 2}",
            "{kind: synthetic, prompt_tokens: 8, output_tokens: 8}",
            "kind replay plays a trace: set load.data (or this profile's data)",
        ),
        (
            "requests: 2}",
            "requests: 2, seconds: 5}",
            "give the slice as requests or as seconds, not both",
        ),
        ("requests: 2}", "requests: 2, length_scale: 0}", "length_scale must be above 0"),
        ("path: a.csv", "path: a.txt", "use a trace file ending in one of .csv, .jsonl, .json"),
        ("path: a.csv", "path: b.csv", "load.data: "),
        ("path: a.csv", "path: bad.csv", "bad.csv:4: ContextTokens 'abc' is not a token count"),
        ("requests: 2}", "requests: 2, start: 500}", "holds no request; the trace spans 5 s"),
        (
            "server:\n  args: {max-model-len: 512}\n",
            "",
            "load.data.context: a trace's lengths are fitted to the model's context",
        ),
        ("speed: [1, 2]}", "speed: [1, 2], max_requests: 5}", "use max_seconds to cut it short"),
        ("speed: [1, 2]}", "streams: 2}", "kind replay takes speed (x the trace's pace)"),
        (
            "- {kind: replay, speed: [1, 2]}",
            "- {kind: capacity, arrival: replay}\n  driver: cross-check",
            "load.profiles[0] (kind capacity): load.driver cross-check measures fixed points, "
            "not a capacity search",
        ),
    ],
)
def test_bad_trace_spec_is_one_line_naming_the_key(tmp_path, capsys, old, new, fragment):
    from tests.unit.test_spec_errors import assert_one_line_error, run_in_process

    path = trace_spec(tmp_path, old, new)
    result = run_in_process(capsys, "sweep", str(path), "--dry-run")
    assert_one_line_error(result, path, (fragment,))
    if "b.csv" in new:
        assert "no such trace file; check load.data.path" in result.stderr


@pytest.mark.parametrize(
    ("ok", "failed", "flagged"),
    [(24, 0, False), (23, 1, False), (23, 0, True), (0, 0, True)],
)
def test_a_replay_that_accounts_for_fewer_requests_than_its_slice_is_unverified(
    ok, failed, flagged
):
    from tunebench.points.trace import unchecked

    row = {
        "trace_requests": 24,
        "requests_ok": ok,
        "requests_failed": failed,
        "arrival_late_share": 0.0,
        "length_mismatch_share": 0.0,
    }
    notes = unchecked(row)
    assert bool(notes) is flagged, notes
    if flagged:
        assert notes == [
            f"{24 - ok - failed} of 24 trace requests neither answered nor failed in the window "
            "(not sent, or cut by max_seconds)"
        ]
