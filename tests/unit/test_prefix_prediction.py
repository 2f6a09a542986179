"""Synthetic shared prefixes: the predicted hit rate (by hand, and against a simulated prefix
cache fed by GuideLLM's own draws over many seeds), the prime's prefixes (GuideLLM's own
texts for the benchmark about to start), what a point records, and bad input as one line."""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path
from random import Random
from types import SimpleNamespace

import pytest

from tests.conftest import spec_file
from tests.unit.test_spec_errors import assert_one_line_error, run_in_process
from tunebench.load.guidellm import GuideLLMDriver
from tunebench.load.guidellm_data import data_args, prefix_buckets, prefix_evidence
from tunebench.load.guidellm_prime import benchmark_prefixes, prime_request
from tunebench.load.guidellm_worker import data_seed
from tunebench.points import prefix
from tunebench.points.row import PointId, build_row
from tunebench.spec.models import SharedPrefix, SyntheticData
from tunebench.spec.plan import LoadPoint

# -- the prediction by hand ---------------------------------------------------------------


def test_the_weights_predicted_by_are_the_weights_guidellm_draws_by():
    shared = SharedPrefix(groups=5, tokens=32, zipf=1.5)
    assert [b["bucket_weight"] for b in prefix_buckets(shared)] == prefix.zipf_weights(5, 1.5)
    # 1000 / k^1.5: 1000, 353.6, 192.5, 125, 89.4
    assert prefix.zipf_weights(5, 1.5) == [1000, 354, 192, 125, 89]


def test_seen_share_by_hand():
    # two groups alike, two requests: the first never finds its group, the second half the time
    assert prefix.seen_share([1, 1], requests=2) == pytest.approx(0.25)
    # one group: every request but the first finds it; after a warmup of 1, every one
    assert prefix.seen_share([7], requests=4) == pytest.approx(0.75)
    assert prefix.seen_share([7], requests=4, before=1) == pytest.approx(1.0)
    # two groups alike, one request after one earlier draw: same group half the time
    assert prefix.seen_share([1, 1], requests=1, before=1) == pytest.approx(0.5)
    assert prefix.seen_share([1000, 1], requests=3, primed=True) == 1.0


def test_predicted_hit_rate_by_hand():
    # one group, a 40-token prefix: 32 tokens in whole 16-token blocks, of 64-token prompts;
    # 3 of 4 requests find it: 0.75 x 32 / 64
    assert prefix.predicted_hit_rate([1], 40, 64, 16, requests=4) == pytest.approx(0.375)
    # primed: every request, 32 / 64
    assert prefix.predicted_hit_rate([1], 40, 64, 16, requests=4, primed=True) == 0.5
    # a prefix shorter than a block is never a hit
    assert prefix.predicted_hit_rate([1], 15, 64, 16, requests=4, primed=True) == 0.0


# -- the prediction against a simulation --------------------------------------------------


def guidellm_draws(shared: SharedPrefix, seed: int):
    """Group numbers (from 0) in the order GuideLLM 0.8.1's synthetic data draws prefixes:
    its own prefix generator over the buckets tunebench asks for, with stand-in texts."""
    from guidellm.data.deserializers.synthetic import _SyntheticTextExamplesIterable
    from guidellm.schemas.data.deserializers.synthetic import SyntheticTextDataArgs

    dataset = _SyntheticTextExamplesIterable.__new__(_SyntheticTextExamplesIterable)
    dataset.config = SyntheticTextDataArgs(
        prompt_tokens=8, output_tokens=4, prefix_buckets=prefix_buckets(shared)
    )
    made = iter(range(shared.groups))
    dataset._create_prompt = lambda tokens, _faker: next(made)
    return dataset._create_prefix_iter(None, Random(seed))


def simulate_point(shared: SharedPrefix, prompt: int, block: int, n: int, before: int, seed: int):
    """Prefix-cache hits over prompt tokens of a window of `n` requests after `before`, on a
    cache that keeps every full block (vLLM's rule: a request finds the longest run of its
    leading full blocks seen before, at most its length minus one token)."""
    draws = guidellm_draws(shared, seed)
    cache: set[tuple] = set()

    def tokens_of(group: int, own: object, own_tokens: int) -> tuple:
        return tuple(("prefix", group, i) for i in range(shared.tokens)) + tuple(
            (own, i) for i in range(own_tokens)
        )

    def store(tokens: tuple) -> None:
        for end in range(block, len(tokens) + 1, block):
            cache.add(tokens[:end])

    if shared.prime:
        for group in range(shared.groups):
            store(tokens_of(group, "prime", 2))
    hits = queries = 0
    for number in range(before + n):
        tokens = tokens_of(next(draws), ("own", number), prompt - shared.tokens)
        found = 0
        for end in range(block, len(tokens), block):  # up to length - 1
            if tokens[:end] not in cache:
                break
            found = end
        if number >= before:
            hits, queries = hits + found, queries + len(tokens)
        store(tokens)
    return hits / queries


SCENARIOS = [
    # groups, tokens, zipf, prime; prompt tokens (prefix included), block, requests, before
    (SharedPrefix(groups=8, tokens=40, zipf=1), 64, 16, 30, 0),
    (SharedPrefix(groups=8, tokens=40, zipf=1), 64, 16, 30, 20),
    (SharedPrefix(groups=50, tokens=48, zipf=2), 80, 16, 60, 0),
    (SharedPrefix(groups=200, tokens=32, zipf=1), 48, 16, 50, 0),
    (SharedPrefix(groups=3, tokens=33, zipf=0), 40, 8, 5, 0),
    (SharedPrefix(groups=6, tokens=40, zipf=0.5, prime=True), 64, 16, 12, 0),
]
SEEDS = 400


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[f"s{i}" for i in range(len(SCENARIOS))])
def test_the_prediction_is_the_mean_of_a_simulated_cache_over_many_seeds(scenario):
    shared, prompt, block, n, before = scenario
    rates = [simulate_point(shared, prompt, block, n, before, seed) for seed in range(SEEDS)]
    mean = statistics.fmean(rates)
    error = statistics.stdev(rates) / math.sqrt(SEEDS)
    weights = prefix.zipf_weights(shared.groups, shared.zipf)
    predicted = prefix.predicted_hit_rate(
        weights, shared.tokens, prompt, block, n, before, primed=shared.prime
    )
    # independent seeds: the simulated mean is within 4 standard errors of the expectation
    # (a wrong prediction 4 errors off passes 1 time in 16,000)
    assert abs(mean - predicted) <= 4 * error + 1e-12, (mean, predicted, error)


def test_the_simulation_tells_a_wrong_prediction_apart():
    """The check above has power: forgetting the warmup's draws is rejected by it."""
    shared, prompt, block, n, before = SCENARIOS[1]
    rates = [simulate_point(shared, prompt, block, n, before, seed) for seed in range(SEEDS)]
    error = statistics.stdev(rates) / math.sqrt(SEEDS)
    weights = prefix.zipf_weights(shared.groups, shared.zipf)
    forgetting = prefix.predicted_hit_rate(weights, shared.tokens, prompt, block, n, before=0)
    assert abs(statistics.fmean(rates) - forgetting) > 4 * error


# -- the prime ----------------------------------------------------------------------------


def _synthetic(shared: SharedPrefix, seed: int):
    """GuideLLM's synthetic examples with stand-in texts from its seeded Faker (no tokenizer)."""
    from guidellm.data.deserializers.synthetic import _SyntheticTextExamplesIterable
    from guidellm.schemas.data.deserializers.synthetic import SyntheticTextDataArgs

    config = SyntheticTextDataArgs(
        prompt_tokens=8, output_tokens=4, prefix_buckets=prefix_buckets(shared)
    )
    examples = _SyntheticTextExamplesIterable(config, processor=None, random_seed=seed)
    examples._create_prompt = lambda tokens, faker, unique="": unique + faker.lexify("?" * 10)
    return examples


def _sent_prefixes(examples, epoch: int, requests: int) -> list[str]:
    """The prefixes GuideLLM's own iteration sends in the benchmark of loader epoch `epoch`."""
    examples.iteration_count = epoch  # what the loader's set_epoch does before iterating
    rows = iter(examples)
    out = []
    for _ in range(requests):
        _, row = next(rows)
        turns = json.loads(row["conversation_turns"])["turns"]
        out.append(turns[0]["columns"]["prefix_column"][0])
    return out


@pytest.mark.parametrize("epoch", [0, 1, 3])
def test_the_prime_sends_the_prefixes_guidellm_sends_next(epoch):
    shared = SharedPrefix(groups=4, tokens=8, zipf=1)
    examples = _synthetic(shared, seed=1234)
    loader = SimpleNamespace(
        dataset=SimpleNamespace(datasets=[SimpleNamespace(_ex_iterable=examples)]), epoch=epoch
    )
    primed = benchmark_prefixes(loader)
    sent = _sent_prefixes(_synthetic(shared, seed=1234), epoch, 400)
    assert len(primed) == 4 and set(sent) == set(primed)
    # group 1 (weight 1000 of 2083) first: the most drawn
    assert max(primed, key=sent.count) == primed[0]
    # the next benchmark sends other prefixes: a prime is per benchmark
    loader.epoch += 1
    assert not set(benchmark_prefixes(loader)) & set(primed)


def test_no_prefixes_to_prime_without_prefix_buckets():
    from guidellm.data.deserializers.synthetic import _SyntheticTextExamplesIterable
    from guidellm.schemas.data.deserializers.synthetic import SyntheticTextDataArgs

    plain = _SyntheticTextExamplesIterable(
        SyntheticTextDataArgs(prompt_tokens=8, output_tokens=4), processor=None, random_seed=1
    )
    loader = SimpleNamespace(
        dataset=SimpleNamespace(datasets=[SimpleNamespace(_ex_iterable=plain)]), epoch=0
    )
    assert benchmark_prefixes(loader) == []
    assert benchmark_prefixes(SimpleNamespace(dataset=None, epoch=0)) == []


def test_a_prime_request_is_shaped_like_guidellms():
    route, body = prime_request("You are terse.", "/v1/completions", "m")
    # GuideLLM joins prefix and prompt with a space; its prompts start with a digit
    assert route == "v1/completions" and body["prompt"] == "You are terse. 0"
    assert body["max_tokens"] == 1
    route, body = prime_request("You are terse.", "/v1/chat/completions", "m")
    assert route == "v1/chat/completions"
    assert body["messages"][0] == {"role": "system", "content": "You are terse."}


def test_every_benchmark_on_a_server_gets_its_own_data_seed():
    """Groups start at their first slot: slots 0-1 (a group of two), 2, 3-5 never share."""
    seeds = [
        data_seed(42, first) + epoch
        for first, size in ((0, 2), (2, 1), (3, 3))
        for epoch in range(size)
    ]
    assert len(set(seeds)) == len(seeds) == 6


# -- what a point records -----------------------------------------------------------------


def _benchmark(warmup_s: float = 0.0, requests: int = 40) -> dict:
    return {
        "scheduler_metrics": {
            "request_start_time": 100.0,
            "measure_start_time": 100.0 + warmup_s,
            "measure_end_time": 120.0 + warmup_s,
        },
        "metrics": {"request_totals": {"total": requests}},
    }


def test_a_prefix_point_records_its_workload_and_prime():
    shared = SharedPrefix(groups=4, tokens=128, zipf=1, prime=True)
    columns = prefix_evidence(shared, _benchmark(), {"answered": 4})
    assert columns == {
        "prefix_groups": 4,
        "prefix_tokens": 128,
        "prefix_zipf": 1,
        "prefix_primed_groups": 4,
        "prefix_requests_before": 0,
    }
    # a 5-s warmup before a 20-s window of 40 requests: about 10 requests ahead of it
    assert prefix_evidence(shared, _benchmark(5.0), {"answered": 4})["prefix_requests_before"] == 10
    # asked to prime, but the worker said nothing: nothing counts as primed
    assert prefix_evidence(shared, _benchmark(), None)["prefix_primed_groups"] == 0
    unprimed = SharedPrefix(groups=4, tokens=128)
    assert prefix_evidence(unprimed, _benchmark(), None)["prefix_primed_groups"] is None


def test_the_worker_is_asked_to_prime_only_when_the_spec_says_so(tmp_path, monkeypatch):
    import tunebench.load.worker_driver as module

    class NoWorker:  # the job file is written; no worker process starts in a unit test
        def __init__(self, *args, **kwargs):
            raise OSError(0, "not started here")

    monkeypatch.setattr(module, "WorkerPipe", NoWorker)
    point = LoadPoint("concurrent-2", "concurrent", 2, 5.0, None, None)
    for prime in (True, False):
        shared = SharedPrefix(groups=2, tokens=32, prime=prime)
        data = SyntheticData(kind="synthetic", prompt_tokens=64, output_tokens=8, prefix=shared)
        driver = GuideLLMDriver(data, tmp_path, "tok")
        driver._work_dir = tmp_path
        with pytest.raises(Exception, match="not started here"):
            driver._start_worker([point], first_index=0, attempt=0)
        job = json.loads((tmp_path / "guidellm-job.json").read_text())
        assert job["prime"] is prime
        assert job["data"] == data_args(data, tmp_path)


def _row(client: dict, measured: float | None, block_size: int | None = 16) -> dict:
    client = {
        "target": 2,
        "requests_ok": 40,
        "requests_failed": 0,
        "requests_incomplete": 0,
        "prompt_tokens_mean": 192.0,
        **prefix.workload_columns(4, 128, 1.0, 4, 0),
        **client,
    }
    return build_row(
        PointId("r", "c1", "base", "concurrent-2", "concurrent"),
        {},
        client,
        [],
        {"server_samples": 5, "prefix_hit_rate": measured},
        block_size=block_size,
    ).csv_cells()


def test_a_primed_point_is_checked_against_its_prediction():
    # primed: every request finds its 128-token prefix (8 whole blocks) of 192 prompt tokens
    row = _row({}, measured=0.66)
    assert row["prefix_hit_rate_predicted"] == round(128 / 192, 4)
    assert "prefix reuse" not in row["unverified_reason"]
    far = _row({}, measured=0.40)
    assert (
        "prefix reuse not reproduced: hit rate 0.40 measured vs 0.67 predicted"
        in (far["unverified_reason"])
    )


def test_an_unprimed_point_predicts_from_the_groups_drawn():
    row = _row({"prefix_primed_groups": None}, measured=None)
    weights = prefix.zipf_weights(4, 1.0)
    expected = prefix.seen_share(weights, 40) * 128 / 192
    assert row["prefix_hit_rate_predicted"] == round(expected, 4)
    assert 0.5 < expected < 128 / 192  # most of 40 requests find one of 4 groups


def test_an_incomplete_prime_predicts_nothing_and_says_so():
    row = _row({"prefix_primed_groups": 3}, measured=0.5)
    assert row["prefix_hit_rate_predicted"] is None
    assert (
        "prefix prime incomplete: the server answered 3 of 4 groups' prefixes"
        in (row["unverified_reason"])
    )


def test_no_prediction_without_the_servers_block_size():
    assert _row({}, measured=0.5, block_size=None)["prefix_hit_rate_predicted"] is None


def test_points_without_shared_prefixes_get_no_prefix_prediction():
    row = build_row(
        PointId("r", "c1", "base", "concurrent-2", "concurrent"),
        {},
        {"target": 2, "requests_ok": 4, "requests_failed": 0},
        [],
        {"server_samples": 5, "prefix_hit_rate": 0.3},
        block_size=16,
    ).csv_cells()
    assert "prefix_hit_rate_predicted" not in row


# -- the sweep file -----------------------------------------------------------------------

SPEC = """
name: p
model: builtin:tiny-llama-random
deployment: {kind: local}
server:
  args: {max-model-len: 512}
load:
  data:
    kind: synthetic
    prompt_tokens: 64
    output_tokens: 32
    prefix: {groups: 4, tokens: 128, prime: true}
  profiles:
    - {kind: concurrent, streams: 2, max_requests: 8}
"""


def test_a_primed_sweep_plans(tmp_path, capsys):
    result = run_in_process(capsys, "sweep", str(spec_file(tmp_path, SPEC)), "--dry-run")
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize(
    "old, new, fragment",
    [
        ("prime: true", "prime: sometimes", "load.data.prefix.prime: "),
        (
            "load:\n",
            "load:\n  driver: vllm-bench\n",
            "load.data.prefix.prime: load.driver vllm-bench does not prime prefixes (the "
            "GuideLLM worker does); use load.driver guidellm or drop prime",
        ),
        (
            "prime: true",
            "primed: true",
            "load.data.prefix.primed: unknown key; allowed here: groups, tokens, zipf, prime",
        ),
    ],
)
def test_a_bad_prime_is_one_line_naming_the_key(tmp_path, capsys, old, new, fragment):
    path = spec_file(tmp_path, SPEC, old, new)
    result = run_in_process(capsys, "sweep", str(path), "--dry-run")
    assert_one_line_error(result, path, (fragment,))


def test_the_shipped_prefix_sweep_plans():
    from tunebench import assemble
    from tunebench.spec.loading import load_spec

    path = Path(__file__).parents[2] / "sweeps" / "cpu-shared-prefix.yaml"
    spec = load_spec(path)
    plan = assemble.plan(spec, path)
    assert spec.load.data.prefix is not None and spec.load.data.prefix.prime
    assert {c.args["enable-prefix-caching"] for c in plan.configs} == {True, False}


def test_the_prime_sends_each_prefix_once_and_counts_the_answers(monkeypatch):
    import asyncio

    import httpx

    from tunebench.load import guidellm_prime

    monkeypatch.setattr(guidellm_prime, "PRIME_SETTLE_S", 0.0)
    sent: list[tuple[str, str, dict]] = []

    def answer(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        sent.append((str(request.url), request.headers.get("authorization"), body))
        # the server refuses group "b" every time: tried twice, not counted
        return httpx.Response(500 if body["prompt"].startswith("b ") else 200, json={})

    progress: list[int] = []
    job = {"target": "http://server:8000/", "model": "m", "api_key": "k"}
    answered = asyncio.run(
        guidellm_prime.prime_prefixes(
            ["a", "b", "c"], job, progress.append, transport=httpx.MockTransport(answer)
        )
    )
    assert answered == 2
    prompts = sorted(body["prompt"] for _, _, body in sent)
    assert prompts == ["a 0", "b 0", "b 0", "c 0"]
    assert {url for url, _, _ in sent} == {"http://server:8000/v1/completions"}
    assert {auth for _, auth, _ in sent} == {"Bearer k"}
    assert len(progress) == 3 and progress[-1] == 2  # one word per prefix, answered or not


def test_the_primer_says_which_benchmark_it_primed(monkeypatch):
    import asyncio

    from tunebench.load import guidellm_prime

    async def prime(prefixes, job, on_progress):
        on_progress(len(prefixes))
        return len(prefixes)

    monkeypatch.setattr(guidellm_prime, "prime_prefixes", prime)
    monkeypatch.setattr(guidellm_prime, "benchmark_prefixes", lambda loader: ["x", "y"])
    events: list[tuple[str, dict]] = []
    primer = guidellm_prime.Primer(
        None, {}, 5, lambda event, **fields: events.append((event, fields))
    )
    asyncio.run(primer())
    asyncio.run(primer())
    primed = [fields for event, fields in events if event == "primed"]
    assert [(f["index"], f["groups"], f["answered"]) for f in primed] == [(5, 2, 2), (6, 2, 2)]
