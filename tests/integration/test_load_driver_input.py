"""A load profile the chosen driver cannot express stops a sweep before anything starts: exit
2, one line that names the other driver."""

from __future__ import annotations

import pytest

from tests.conftest import run_cli

DRIVER_SPEC = """\
name: driver-input
model: builtin:tiny-llama
deployment: {{kind: local}}
load:
  driver: vllm-bench
  data: {data}
  profiles: [{profile}]
"""


@pytest.mark.parametrize(
    "data, profile, says",
    [
        (
            "{kind: synthetic, prompt_tokens: 16, output_tokens: 8}",
            "{kind: constant, rate: 2, max_seconds: 5}",
            "no constant profile; use load.driver guidellm",
        ),
        (
            "{kind: synthetic, prompt_tokens: 16, output_tokens: 8}",
            "{kind: concurrent, streams: 4, max_seconds: 5}",
            "counts requests, not seconds: set max_requests, or use load.driver guidellm",
        ),
        (
            "{kind: file, path: data.jsonl}",
            "{kind: poisson, rate: 2, max_seconds: 5}",
            "synthetic data only; use driver guidellm",
        ),
    ],
)
def test_a_profile_the_vllm_bench_driver_cannot_express_names_the_other_driver(
    tmp_path, data, profile, says
):
    (tmp_path / "data.jsonl").write_text('{"prompt": "x"}\n')
    spec = tmp_path / "spec.yaml"
    spec.write_text(DRIVER_SPEC.format(data=data, profile=profile))
    result = run_cli("sweep", str(spec), "--dry-run", "--output", str(tmp_path / "reports"))
    assert result.returncode == 2, result.stdout + result.stderr
    lines = [line for line in result.stderr.strip().splitlines() if line.strip()]
    assert len(lines) == 1 and says in lines[0], result.stderr
