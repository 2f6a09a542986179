"""Client and server counts reconciled per point (points/tokens.py)."""

from __future__ import annotations

from tunebench.points.tokens import reconcile


def point(**changes):
    row = {
        "duration_s": 10.0,
        "requests_ok": 100,
        "requests_failed": 0,
        "requests_incomplete": 2,
        "server_output_tokens": 3300.0,
        "server_requests_ok": 103.0,
        "server_window_extra_s": 0.8,
    }
    return {**row, **changes}


def samples(length=32, count=100):
    return [{"output_tokens": length} for _ in range(count)]


def test_agreeing_counts_pass():
    assert reconcile(point(), samples(), 32) == []


def test_outputs_shorter_than_asked_are_found():
    (reason,) = reconcile(point(server_output_tokens=1250.0), samples(12), 32)
    assert reason.startswith("100 of 100 outputs shorter than the 32 tokens asked for (mean 12.0)")


def test_a_proxy_that_cuts_streams_is_found():
    reasons = reconcile(point(), samples(16), None)
    assert reasons == [
        "the server generated 3300 output tokens, the client received 1600 (at most 1760 "
        "expected): outputs were cut on the way"
    ]


def test_a_client_that_drops_requests_is_found():
    tokens, requests = reconcile(point(requests_ok=60), samples(32, 60), 32)
    assert "the server generated 3300 output tokens, the client received 1920" in tokens
    assert requests.startswith("the server finished 103 requests, the client counted 60")
    dropped = reconcile(point(requests_ok=60, server_output_tokens=2100.0), samples(32, 60), 32)
    assert dropped == [
        "the server finished 103 requests, the client counted 60: requests are missing from "
        "the client's statistics"
    ]


def test_a_client_counting_more_than_the_server_made_is_found():
    (reason,) = reconcile(point(server_output_tokens=2000.0), samples(), 32)
    assert reason.startswith("the client counted 3200 output tokens, the server generated 2000")


def test_no_server_counts_no_verdict():
    assert reconcile(point(server_output_tokens=None), samples(), None) == []
