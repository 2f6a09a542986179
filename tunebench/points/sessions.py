"""Multi-turn sessions (`load.data kind: sessions`): latency and history per turn, and per session.

Every turn after a session's first carries the earlier turns and their answers as history,
so its prompt grows turn by turn and a prefix cache can serve all of it but the new turn.
The columns, from the per-request samples (each names its `session` and `turn`, from 1):

- per turn k (1 .. the highest turn measured): `turn<k>_requests`, `turn<k>_ttft_p50_ms`,
  `turn<k>_ttft_p95_ms`, `turn<k>_prompt_tokens_mean` (the history growing), and
  `turn<k>_cached_share`, the prompt tokens the server said it found in its prefix cache
  over the turn's prompt tokens (its usage answer's `cached_tokens`; empty when the server
  does not report them: vLLM's `--enable-prompt-tokens-details`);
- per session: `sessions` (sessions with at least one measured turn), `sessions_complete`
  (with every turn measured), `session_turns` (turns asked per session) and
  `session_e2e_p50_s` / `session_e2e_p95_s`, from a complete session's first request's start
  to its last answer (think times included).
"""

from __future__ import annotations

from typing import Any

from tunebench.numbers import to_float
from tunebench.points.columns import SESSION_COLUMNS  # noqa: F401  (what this fills)
from tunebench.points.trace import percentile


def is_sessions(samples: list[dict[str, Any]]) -> bool:
    return any("turn" in s for s in samples)


def turn_columns(samples: list[dict[str, Any]]) -> dict[str, Any]:
    """`turn<k>_*` columns for every turn with a measured request."""
    by_turn: dict[int, list[dict[str, Any]]] = {}
    for sample in samples:
        turn = to_float(sample.get("turn"))
        if turn is not None:
            by_turn.setdefault(int(turn), []).append(sample)
    out: dict[str, Any] = {}
    for turn in sorted(by_turn):
        group = by_turn[turn]
        ttfts = [v for v in (to_float(s.get("ttft_ms")) for s in group) if v is not None]
        prompts = [v for v in (to_float(s.get("prompt_tokens")) for s in group) if v is not None]
        cached = [to_float(s.get("cached_tokens")) for s in group]
        name = f"turn{turn}"
        out[f"{name}_requests"] = len(group)
        out[f"{name}_ttft_p50_ms"] = round(percentile(ttfts, 0.50), 2) if ttfts else None
        out[f"{name}_ttft_p95_ms"] = round(percentile(ttfts, 0.95), 2) if ttfts else None
        out[f"{name}_prompt_tokens_mean"] = (
            round(sum(prompts) / len(prompts), 2) if prompts else None
        )
        known = [c for c in cached if c is not None]
        # a share only when the server answered cached_tokens for every request of the turn
        out[f"{name}_cached_share"] = (
            round(sum(known) / sum(prompts), 4)
            if prompts and sum(prompts) and len(known) == len(group)
            else None
        )
    return out


def session_columns(samples: list[dict[str, Any]], turns: int | None) -> dict[str, Any]:
    """Per-session figures of a point; `turns`: the turns each session asks for."""
    spans: dict[Any, list[tuple[float, float]]] = {}
    counts: dict[Any, set[int]] = {}
    for sample in samples:
        session = sample.get("session")
        start, end = to_float(sample.get("start_time")), to_float(sample.get("end_time"))
        turn = to_float(sample.get("turn"))
        if session is None or turn is None:
            continue
        counts.setdefault(session, set()).add(int(turn))
        if start is not None and end is not None:
            spans.setdefault(session, []).append((start, end))
    complete = [s for s, seen in counts.items() if turns and len(seen) >= turns]
    durations = [
        max(e for _, e in spans[s]) - min(b for b, _ in spans[s]) for s in complete if s in spans
    ]
    return {
        "session_turns": turns,
        "sessions": len(counts),
        "sessions_complete": len(complete),
        "session_e2e_p50_s": round(percentile(durations, 0.50), 3) if durations else None,
        "session_e2e_p95_s": round(percentile(durations, 0.95), 3) if durations else None,
    }
