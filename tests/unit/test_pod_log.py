"""The helm kind keeps a pod's start-up lines when its log outgrows the tail read at stop."""

from __future__ import annotations

from tunebench.deploy.helm import LOG_GAP, kept_pod_log

STARTUP = (
    "INFO Initializing a V1 LLM engine (v0.32.0) with config: model='m'\n"
    "INFO KV cache size: 1,000 tokens\n"
)


def test_a_short_run_keeps_the_log_as_read():
    latest = STARTUP + "INFO 127.0.0.1 POST /v1/completions 200\n"
    assert kept_pod_log(STARTUP, latest) == latest


def test_a_long_run_keeps_the_start_up_lines_before_the_tail():
    latest = "".join(f"INFO POST /v1/completions 200 #{i}\n" for i in range(5000))
    kept = kept_pod_log(STARTUP, latest)
    assert kept.startswith(STARTUP.rstrip("\n"))
    assert LOG_GAP.format(tail=5000) in kept and kept.endswith(latest)
    # read again at a later stop: the start-up is kept once, not stacked
    again = kept_pod_log(kept, latest)
    assert again.count("Initializing a V1 LLM engine") == 1


def test_nothing_saved_yet_takes_the_log_as_read():
    assert kept_pod_log("", "INFO x\n") == "INFO x\n"
