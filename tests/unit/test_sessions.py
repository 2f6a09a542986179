"""Multi-turn sessions (`load.data kind: sessions`): what GuideLLM is asked for, which turn
each request was, the per-turn and per-session columns (expected values worked out by hand in
the comments), and bad input as one line naming the key and the fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import spec_file
from tests.unit.test_spec_errors import assert_one_line_error, run_in_process
from tunebench.load.guidellm import GuideLLMDriver
from tunebench.load.guidellm_data import CHAT, data_args
from tunebench.load.guidellm_report import request_samples
from tunebench.points import sessions
from tunebench.spec.models import SessionsData, SyntheticData

SPEC = """
name: s
model: builtin:tiny-llama-random
deployment: {kind: local}
server:
  args: {max-model-len: 512}
load:
  data: {kind: sessions, turns: 4, think_time_s: 0.5, prompt_tokens: 48, output_tokens: 24}
  profiles:
    - {kind: concurrent, streams: 2, max_seconds: 20}
"""


def _data(**given) -> SessionsData:
    fields = {"kind": "sessions", "turns": 4, "prompt_tokens": 48, "output_tokens": 24}
    return SessionsData(**{**fields, **given})


def test_guidellm_gets_its_multi_turn_synthetic_data(tmp_path):
    assert data_args(_data(think_time_s=0.5), tmp_path) == {
        "kind": "synthetic_text",
        "prompt_tokens": 48,
        "output_tokens": 24,
        "turns": 4,
        "delay": 0.5,
    }
    # no think time: GuideLLM's delay must be above 0, so it is left out
    assert "delay" not in data_args(_data(), tmp_path)


def test_sessions_go_through_the_chat_api_other_data_does_not(tmp_path):
    assert (
        GuideLLMDriver(_data(), tmp_path, "tok").request_format == CHAT == ("/v1/chat/completions")
    )
    synthetic = SyntheticData(kind="synthetic", prompt_tokens=8, output_tokens=8)
    assert GuideLLMDriver(synthetic, tmp_path, "tok").request_format == "/v1/completions"


def _request(conversation: str, turn_index: int, start: float, ttft: float, prompt: int, cached):
    return {
        "time_to_first_token_ms": ttft,
        "prompt_tokens": prompt,
        "output_tokens": 24,
        "cached_tokens": cached,
        "info": {
            "conversation_id": conversation,
            "turn_index": turn_index,
            "timings": {"request_start": start, "request_end": start + 1.0},
        },
    }


def test_each_request_names_its_session_and_turn_only_for_sessions():
    benchmark = {"requests": {"successful": [_request("a", 1, 10.0, 5.0, 150, 96)]}}
    (sample,) = request_samples(benchmark, sessions=True)
    assert (sample["session"], sample["turn"], sample["cached_tokens"]) == ("a", 2, 96)
    # GuideLLM 0.8 gives every request a conversation id: single-turn points get no turn
    (plain,) = request_samples(benchmark)
    assert "turn" not in plain and "session" not in plain


def _samples() -> list[dict]:
    benchmark = {
        "requests": {
            "successful": [
                # session a: 3 turns at 100, 102 and 104 s (each takes 1 s); b: 2 turns
                _request("a", 0, 100.0, 10.0, 60, 0),
                _request("a", 1, 102.0, 20.0, 140, 64),
                _request("a", 2, 104.0, 30.0, 220, 128),
                _request("b", 0, 100.5, 12.0, 62, 0),
                _request("b", 1, 103.0, 40.0, 150, 96),
            ]
        }
    }
    return request_samples(benchmark, sessions=True)


def test_turn_columns_by_hand():
    columns = sessions.turn_columns(_samples())
    assert columns["turn1_requests"] == 2 and columns["turn3_requests"] == 1
    # turn 1: TTFTs 10 and 12 -> p50 11, p95 at rank 0.95 -> 11.9; prompts (60 + 62) / 2
    assert columns["turn1_ttft_p50_ms"] == 11.0 and columns["turn1_ttft_p95_ms"] == 11.9
    assert columns["turn1_prompt_tokens_mean"] == 61.0 and columns["turn1_cached_share"] == 0.0
    # turn 2: prompts 140 and 150 -> mean 145; cached (64 + 96) / 290 = 0.5517
    assert columns["turn2_prompt_tokens_mean"] == 145.0
    assert columns["turn2_cached_share"] == 0.5517
    assert columns["turn3_cached_share"] == round(128 / 220, 4)
    assert "turn4_requests" not in columns


def test_no_cached_share_without_the_servers_count():
    samples = _samples()
    # a server that does not report prompt token details for one request of turn 2
    next(s for s in samples if s["turn"] == 2)["cached_tokens"] = None
    columns = sessions.turn_columns(samples)
    assert columns["turn2_cached_share"] is None and columns["turn3_cached_share"] is not None


def test_session_columns_by_hand():
    columns = sessions.session_columns(_samples(), turns=3)
    # a ran all 3 turns, from 100 s to its last answer at 105 s; b ran 2 of 3: not complete
    assert columns == {
        "session_turns": 3,
        "sessions": 2,
        "sessions_complete": 1,
        "session_e2e_p50_s": 5.0,
        "session_e2e_p95_s": 5.0,
    }
    assert sessions.session_columns(_samples(), turns=2)["sessions_complete"] == 2


def test_a_session_sweep_plans(tmp_path, capsys):
    result = run_in_process(capsys, "sweep", str(spec_file(tmp_path, SPEC)), "--dry-run")
    assert result.returncode == 0, result.stderr
    assert "concurrent-2" in result.stdout


def test_shipped_session_sweep_plans():
    from tunebench import assemble
    from tunebench.spec.loading import load_spec

    path = Path(__file__).parents[2] / "sweeps" / "cpu-sessions.yaml"
    plan = assemble.plan(load_spec(path), path)
    assert [p.point_id for p in plan.points] == ["concurrent-2"]
    assert plan.configs[0].args["enable-prompt-tokens-details"] is True


@pytest.mark.parametrize(
    "old, new, fragment",
    [
        (
            "max-model-len: 512",
            "max-model-len: 256",
            "max-model-len 256 (base) is smaller than load.data prompt+output tokens x 4 turns "
            "(288)",
        ),
        ("turns: 4", "turns: 0", "load.data.turns: Input should be greater than or equal to 1"),
        (
            "think_time_s: 0.5",
            "think_time_s: -1",
            "load.data.think_time_s: Input should be greater than or equal to 0",
        ),
        (
            "load:\n",
            "load:\n  driver: vllm-bench\n",
            "load.driver vllm-bench runs synthetic data and traces only; use driver guidellm "
            "for a multi-turn session",
        ),
    ],
)
def test_bad_session_spec_is_one_line_naming_the_key(tmp_path, capsys, old, new, fragment):
    path = spec_file(tmp_path, SPEC, old, new)
    result = run_in_process(capsys, "sweep", str(path), "--dry-run")
    assert_one_line_error(result, path, (fragment,))


@pytest.mark.parametrize(
    "data, what",
    [
        (
            "{kind: sessions, turns: 4, prompt_tokens: 48, output_tokens: 24}",
            "multi-turn sessions",
        ),
        (
            "{kind: synthetic, prompt_tokens: 48, output_tokens: 24, "
            "prefix: {groups: 2, tokens: 32}}",
            "shared prefixes",
        ),
    ],
)
def test_a_recorded_run_refuses_sessions_and_shared_prefixes(tmp_path, capsys, data, what):
    from tests.conftest import FIXTURES

    path = tmp_path / "spec.yaml"
    path.write_text(
        "name: r\nmodel: builtin:tiny-llama-random\n"
        f"deployment: {{kind: recorded, run: {FIXTURES / 'grid-cpu'}}}\n"
        f"load:\n  data: {data}\n"
        "  profiles:\n    - {kind: concurrent, streams: 2, max_seconds: 5}\n"
    )
    result = run_in_process(capsys, "sweep", str(path), "--dry-run")
    assert_one_line_error(
        result,
        path,
        (f"load.data: a recorded run (deployment kind recorded) cannot answer {what}",),
    )
