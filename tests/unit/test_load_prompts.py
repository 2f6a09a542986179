"""sweeps/data/tiny-llama-prompts.jsonl: the trained builtin model's in-domain load prompts,
written by tunebench/builtin_corpus.py `load_prompts_jsonl` and never by hand."""

from __future__ import annotations

import json
import re

from tests.conftest import REPO
from tunebench import builtin_corpus

SHIPPED = REPO / "sweeps/data/tiny-llama-prompts.jsonl"


def test_the_shipped_prompts_are_the_ones_the_corpus_writes():
    assert SHIPPED.read_text() == builtin_corpus.load_prompts_jsonl()


def test_the_prompts_never_ask_a_held_out_sum_and_fit_the_demo_length():
    held = builtin_corpus.held_out()
    lines = [json.loads(line) for line in SHIPPED.read_text().splitlines()]
    assert len(lines) == 1000
    for line in lines:
        prompt = line["prompt"]
        assert 100 <= len(prompt) <= 160 and line["output_tokens_count"] == 32
        for a, b in re.findall(r"(\d+) (?:plus|\+|minus) (\d+)", prompt):
            assert (min(int(a), int(b)), max(int(a), int(b))) not in held, prompt
