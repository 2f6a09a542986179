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

A sweep's SLO may hold a point's sessions to limits too (`slo: {session_e2e_s: {p95: 10},
turn_ttft_ms: {p95: 500}}`): `session_e2e` and `turn_ttft` give points/slo.py the values,
or why there is none; a point without sessions is never passed on them.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from tunebench.numbers import to_float
from tunebench.points.cells import RowView, SampleView, SessionCells
from tunebench.points.trace import percentile


def is_sessions(samples: Sequence[SampleView]) -> bool:
    return any("turn" in s for s in samples)


def turn_columns(samples: Sequence[SampleView]) -> dict[str, float | int | None]:
    """`turn<k>_*` columns for every turn with a measured request."""
    by_turn: dict[int, list[SampleView]] = {}
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


def _sessions(samples: Sequence[SampleView], turns: int | None) -> tuple[int, list[float]]:
    """Sessions seen, and the first start to last answer (s) of each complete one."""
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
    return len(counts), durations


def session_columns(samples: Sequence[SampleView], turns: int | None) -> SessionCells:
    """Per-session figures of a point; `turns`: the turns each session asks for."""
    seen, durations = _sessions(samples, turns)
    return {
        "session_turns": turns,
        "sessions": seen,
        "sessions_complete": len(durations),
        "session_e2e_p50_s": round(percentile(durations, 0.50), 3) if durations else None,
        "session_e2e_p95_s": round(percentile(durations, 0.95), 3) if durations else None,
    }


# -- session SLOs (points/slo.py): a value, or why there is none --------------------------
NO_SESSIONS = "not checked: no sessions in this point"


def has_sessions(row: RowView, samples: Sequence[SampleView]) -> bool:
    """Did this point run sessions? Its samples say so, or (a stored row judged again
    without its samples) its session columns do."""
    return is_sessions(samples) or bool(to_float(row.get("session_turns")))


def session_e2e(row: RowView, samples: Sequence[SampleView], q: float) -> tuple[float | None, str]:
    """The q-quantile of complete sessions' wall time (s), or None and why."""
    if not has_sessions(row, samples):
        return None, NO_SESSIONS
    turns = int(to_float(row.get("session_turns")) or 0)
    if is_sessions(samples):
        seen, durations = _sessions(samples, turns)
        if durations:
            return percentile(durations, q), ""
        return None, (
            f"not measured: no session ran all {turns} turns in the window ({seen} sessions "
            "started)"
        )
    stored = to_float(row.get(f"session_e2e_p{round(q * 100)}_s"))
    if stored is not None:
        return stored, ""
    return None, "not measured: no per-session value for this percentile in the stored point"


def turn_ttft(
    row: RowView, samples: Sequence[SampleView], q: float
) -> tuple[float | None, int | None, str]:
    """The worst turn's q-quantile TTFT (ms) and that turn, or None and why."""
    if not has_sessions(row, samples):
        return None, None, NO_SESSIONS
    by_turn: dict[int, list[float]] = {}
    for sample in samples:
        turn, ttft = to_float(sample.get("turn")), to_float(sample.get("ttft_ms"))
        if turn is not None and ttft is not None:
            by_turn.setdefault(int(turn), []).append(ttft)
    if not by_turn:  # a stored row judged again: its per-turn columns
        level = round(q * 100)
        for column, value in row.items():
            match = re.fullmatch(rf"turn(\d+)_ttft_p{level}_ms", str(column))
            if match and to_float(value) is not None:
                by_turn[int(match.group(1))] = [float(value)]
        if not by_turn:
            return None, None, f"not measured: no turn has a TTFT p{level} in this point"
    worst = max(by_turn, key=lambda t: percentile(by_turn[t], q))
    return percentile(by_turn[worst], q), worst, ""
