"""Does what the client counted agree with what the server counted?

A point can look fine on the client's side while measuring something else: a server that
ignores `ignore_eos` answers shorter than asked (faster, and wrongly credited), a proxy
that cuts streams delivers fewer tokens than the server made, a driver that drops timed-out
requests reports a better latency than the server served. Two checks, each a reason that
makes the point invalid:

- length: when the data asks for a fixed output length, the outputs must have it (more than
  5% of requests shorter is a finding);
- counts: the server's counter deltas (`vllm:generation_tokens`, `vllm:request_success`)
  between the scrapes around the window against the client's sums. The scrapes lie up to a
  scrape interval outside the window (`server_window_extra_s`), and requests cut off at the
  window's end were generated but not counted by the client, so the server may count more
  by that much; it may never count fewer (beyond `TOLERANCE`), nor many more.
"""

from __future__ import annotations

from collections.abc import Sequence

from tunebench.numbers import to_float
from tunebench.points.cells import PointCells, SampleView

TOLERANCE = 0.05  # tokenizers round-trip text; counts may differ by a few percent
SHORT_SHARE = 0.05  # share of requests allowed below a fixed length (stop strings, EOS)


def reconcile(
    row: PointCells,
    samples: Sequence[SampleView],
    expected_output_tokens: int | None = None,
) -> list[str]:
    """Reasons the point's client and server counts disagree (empty: they agree)."""
    reasons: list[str] = []
    lengths = [int(v) for s in samples if (v := to_float(s.get("output_tokens"))) is not None]
    if expected_output_tokens and lengths:
        short = [n for n in lengths if n < expected_output_tokens]
        if len(short) > SHORT_SHARE * len(lengths):
            mean = sum(lengths) / len(lengths)
            reasons.append(
                f"{len(short)} of {len(lengths)} outputs shorter than the "
                f"{expected_output_tokens} tokens asked for (mean {mean:.1f}): the server "
                "ignored ignore_eos or the stream was cut"
            )
    reasons += _count_mismatch(row, lengths, expected_output_tokens)
    return reasons


def _count_mismatch(
    row: PointCells, lengths: list[int], expected_output_tokens: int | None
) -> list[str]:
    server_tokens = row.get("server_output_tokens")
    server_requests = row.get("server_requests_ok")
    extra_s = row.get("server_window_extra_s") or 0.0
    duration = row.get("duration_s")
    client_requests = row.get("requests_ok") or 0
    unfinished = (row.get("requests_incomplete") or 0) + (row.get("requests_failed") or 0)
    if not lengths or server_tokens is None or not duration:
        return []
    client_tokens = float(sum(lengths))
    per_request = expected_output_tokens or client_tokens / len(lengths)
    # what the server may add legitimately: the scrapes' margin at the point's own rate,
    # and every unfinished request at full length
    token_margin = client_tokens / duration * extra_s + unfinished * per_request
    reasons = []
    if server_tokens < client_tokens * (1 - TOLERANCE):
        reasons.append(
            f"the client counted {client_tokens:.0f} output tokens, the server generated "
            f"{server_tokens:.0f}: the client's counts are not the server's"
        )
    elif server_tokens > (client_tokens + token_margin) * (1 + TOLERANCE):
        reasons.append(
            f"the server generated {server_tokens:.0f} output tokens, the client received "
            f"{client_tokens:.0f} (at most {client_tokens + token_margin:.0f} expected): "
            "outputs were cut on the way"
        )
    if server_requests is not None and client_requests:
        request_margin = client_requests / duration * extra_s + unfinished
        if server_requests > (client_requests + request_margin) * (1 + TOLERANCE) + 1:
            reasons.append(
                f"the server finished {server_requests:.0f} requests, the client counted "
                f"{client_requests:.0f}: requests are missing from the client's statistics"
            )
    return reasons
