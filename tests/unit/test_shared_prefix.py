"""Shared prefixes on synthetic data (`load.data.prefix: {groups, tokens, zipf}`): the prefix
buckets GuideLLM is asked for (weights worked out by hand), how GuideLLM 0.8.1's own
synthetic data then spreads requests over the groups, and bad input as one line."""

from __future__ import annotations

from collections import Counter

import pytest

from tests.conftest import spec_file
from tests.unit.test_spec_errors import assert_one_line_error, run_in_process
from tunebench.load.guidellm_data import data_args, prefix_buckets
from tunebench.spec.models import SharedPrefix, SyntheticData

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
    prefix: {groups: 4, tokens: 128, zipf: 1}
  profiles:
    - {kind: concurrent, streams: 2, max_seconds: 5}
"""


def test_zipf_weights_by_hand():
    # 1000 / k^1 for k = 1..4: 1000, 500, 333, 250
    assert [
        b["bucket_weight"] for b in prefix_buckets(SharedPrefix(groups=4, tokens=8, zipf=1))
    ] == [
        1000,
        500,
        333,
        250,
    ]
    # zipf 2: 1000, 250, 111, 62.5 -> 62 (round half to even)
    assert [
        b["bucket_weight"] for b in prefix_buckets(SharedPrefix(groups=4, tokens=8, zipf=2))
    ] == [1000, 250, 111, 62]
    # uniform: equal weights
    uniform = prefix_buckets(SharedPrefix(groups=3, tokens=8))
    assert uniform == [{"bucket_weight": 1000, "prefix_count": 1, "prefix_tokens": 8}] * 3


def test_the_prefix_goes_to_guidellm_with_the_synthetic_data(tmp_path):
    data = SyntheticData(
        kind="synthetic",
        prompt_tokens=64,
        output_tokens=32,
        prefix=SharedPrefix(groups=2, tokens=16, zipf=1),
    )
    assert data_args(data, tmp_path)["prefix_buckets"] == [
        {"bucket_weight": 1000, "prefix_count": 1, "prefix_tokens": 16},  # 1000 / 1
        {"bucket_weight": 500, "prefix_count": 1, "prefix_tokens": 16},  # 1000 / 2
    ]
    plain = SyntheticData(kind="synthetic", prompt_tokens=64, output_tokens=32)
    assert "prefix_buckets" not in data_args(plain, tmp_path)


def test_guidellm_spreads_requests_over_the_groups_by_their_weights():
    """GuideLLM's own synthetic generator with the buckets asked for: 4 prefixes, the most
    popular group about 1000 / (1000 + 500 + 333 + 250) = 48% of the requests."""
    from random import Random

    from faker import Faker
    from guidellm.data.deserializers.synthetic import _SyntheticTextExamplesIterable
    from guidellm.schemas.data.deserializers.synthetic import SyntheticTextDataArgs

    args = SyntheticTextDataArgs(
        prompt_tokens=8,
        output_tokens=4,
        prefix_buckets=prefix_buckets(SharedPrefix(groups=4, tokens=6, zipf=1)),
    )
    # GuideLLM's own prefix draw, with distinct stand-in prefix texts (no tokenizer needed)
    dataset = _SyntheticTextExamplesIterable.__new__(_SyntheticTextExamplesIterable)
    dataset.config = args
    faker = Faker()
    faker.seed_instance(1)
    dataset._create_prompt = lambda tokens, _faker: f"prefix-{_faker.unique.random_int()}"
    prefixes = dataset._create_prefix_iter(faker, Random(7))
    counts = Counter(next(prefixes) for _ in range(4000))
    shares = sorted((n / 4000 for n in counts.values()), reverse=True)
    assert len(counts) == 4
    expected = [w / 2083 for w in (1000, 500, 333, 250)]
    assert shares == pytest.approx(expected, abs=0.03)


def test_a_prefix_sweep_plans(tmp_path, capsys):
    result = run_in_process(capsys, "sweep", str(spec_file(tmp_path, SPEC)), "--dry-run")
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize(
    "old, new, fragment",
    [
        (
            "max-model-len: 512",
            "max-model-len: 200",
            "is smaller than load.data prefix+prompt+output tokens (224)",
        ),
        ("groups: 4", "groups: 0", "load.data.prefix.groups: Input should be greater than"),
        ("zipf: 1", "zipf: -1", "load.data.prefix.zipf: Input should be greater than"),
        (
            "zipf: 1}",
            "zipf: 1, size: 3}",
            "load.data.prefix.size: unknown key; allowed here: groups, tokens, zipf",
        ),
        (
            "load:\n",
            "load:\n  driver: vllm-bench\n",
            "load.data.prefix.zipf 1: load.driver vllm-bench sends shared prefixes as vLLM's "
            "prefix_repetition, which gives every group the same share; set zipf: 0",
        ),
        (
            "load:\n",
            "load:\n  driver: cross-check\n",
            "load.data.prefix.zipf 1: load.driver cross-check (vllm bench serve) sends shared "
            "prefixes",
        ),
    ],
)
def test_bad_prefix_is_one_line_naming_the_key(tmp_path, capsys, old, new, fragment):
    path = spec_file(tmp_path, SPEC, old, new)
    result = run_in_process(capsys, "sweep", str(path), "--dry-run")
    assert_one_line_error(result, path, (fragment,))


def test_guidellm_takes_the_data_as_the_worker_sends_it(tmp_path):
    """The worker puts data_args into GuideLLM's scenario (guidellm_worker.py): GuideLLM's
    own validation keeps the buckets as asked (an unknown or misspelt field would be lost)."""
    from guidellm.schemas.benchmark import BenchmarkScenario

    data = SyntheticData(
        kind="synthetic",
        prompt_tokens=64,
        output_tokens=32,
        prefix=SharedPrefix(groups=3, tokens=128, zipf=1),
    )
    scenario = BenchmarkScenario.model_validate(
        {
            "spec": {
                "backend": {"kind": "openai_http", "target": "http://127.0.0.1:9", "model": "m"},
                "profile": {"kind": "concurrent", "streams": [2]},
                "constraints": [],
                "data": [data_args(data, tmp_path)],
                "tokenizer": {"kind": "huggingface_auto", "model": "m"},
                "outputs": [],
            }
        }
    )
    (given,) = scenario.spec.data
    assert [(b.bucket_weight, b.prefix_count, b.prefix_tokens) for b in given.prefix_buckets] == [
        (1000, 1, 128),
        (500, 1, 128),
        (333, 1, 128),
    ]
