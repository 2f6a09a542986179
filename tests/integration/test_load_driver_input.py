"""A load profile the chosen driver cannot express stops a sweep before anything starts: exit
2, one line that names the other driver."""

from __future__ import annotations

import pytest

from tests.conftest import run_cli

DRIVER_SPEC = """\
name: driver-input
model: builtin:tiny-llama-random
deployment: {{kind: local}}
load:
  driver: {driver}
  data: {data}
  profiles: [{profile}]
"""


@pytest.mark.parametrize(
    "driver, data, profile, says",
    [
        (
            "cross-check",
            "{kind: synthetic, prompt_tokens: 16, output_tokens: 8}",
            "{kind: capacity, max_seconds: 5}",
            "cross-check measures fixed points, not a capacity search",
        ),
        (
            "cross-check",
            "{kind: synthetic, prompt_tokens: 16, output_tokens: 8}",
            "{kind: sweep, max_seconds: 5}",
            "no sweep profile; use load.driver guidellm",
        ),
        (
            "vllm-bench",
            "{kind: synthetic, prompt_tokens: 16, output_tokens: 8}",
            "{kind: constant, rate: 2, max_seconds: 5}",
            "no constant profile; use load.driver guidellm",
        ),
        (
            "vllm-bench",
            "{kind: synthetic, prompt_tokens: 16, output_tokens: 8}",
            "{kind: concurrent, streams: 4, max_seconds: 5}",
            "counts requests, not seconds: set max_requests, or use load.driver guidellm",
        ),
        (
            "cross-check",
            "{kind: file, path: data.jsonl}",
            "{kind: poisson, rate: 2, max_seconds: 5}",
            "synthetic data and traces only; use driver guidellm",
        ),
    ],
)
def test_a_profile_the_vllm_bench_driver_cannot_express_names_the_other_driver(
    tmp_path, driver, data, profile, says
):
    (tmp_path / "data.jsonl").write_text('{"prompt": "x"}\n')
    spec = tmp_path / "spec.yaml"
    spec.write_text(DRIVER_SPEC.format(driver=driver, data=data, profile=profile))
    result = run_cli("sweep", str(spec), "--dry-run", "--output", str(tmp_path / "reports"))
    assert result.returncode == 2, result.stdout + result.stderr
    lines = [line for line in result.stderr.strip().splitlines() if line.strip()]
    assert len(lines) == 1 and says in lines[0], result.stderr
