"""Results from the field's other load generators, made for real: AIPerf and inference-perf
(each in its own virtual environment, installed by `make test`'s set-up) measure the shared
vLLM-CPU server at the same load; `tunebench import` reads their files, and the imported runs
compare and report like native ones."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import httpx
import pytest
import yaml

from tests.conftest import run_cli
from tests.e2e.conftest import GUARDED_KEY, NEEDS_SERVER
from tunebench import demo
from tunebench.processes import ManagedProcess
from tunebench.store.run import read_points, read_requests

TOOLS = Path(".cache/tools")
AIPERF = TOOLS / "aiperf" / "bin" / "aiperf"
INFERENCE_PERF = TOOLS / "inference-perf" / "bin" / "inference-perf"
pytestmark = [
    pytest.mark.server,
    NEEDS_SERVER,
    pytest.mark.skipif(
        not AIPERF.exists() or not INFERENCE_PERF.exists(),
        reason="aiperf and inference-perf are needed; `make test` installs them",
    ),
]
STREAMS, REQUESTS = 4, 40


def _run(argv: list[str], log: Path, cwd: Path, timeout_s: float = 300) -> None:
    """A peer tool in its own process group, always reaped."""
    # AIPerf's offline mode looks a local tokenizer path up in the hub cache and fails
    env = {k: v for k, v in os.environ.items() if k != "HF_HUB_OFFLINE"}
    # on the last core: the shared server is not pinned, the tools at least keep to one core
    cpus = {os.cpu_count() - 1} if (os.cpu_count() or 1) > 1 else None
    process = ManagedProcess(argv, log_path=log, cwd=cwd, env=env, cpus=cpus)
    try:
        code = process.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        code = None
    finally:
        process.stop(grace_s=5)
    assert code == 0, log.read_text(errors="replace")[-3000:]


@pytest.fixture(scope="module")
def peer_results(guarded_server, tmp_path_factory):
    work = tmp_path_factory.mktemp("peers")
    headers = {"Authorization": f"Bearer {GUARDED_KEY}"}
    models = httpx.get(f"{guarded_server.base_url}/v1/models", headers=headers, timeout=30)
    model = models.json()["data"][0]["id"]
    tokenizer = str(demo.resolve_builtin("builtin:tiny-llama-random"))
    aiperf_dir = work / "aiperf"
    _run(
        [
            str(AIPERF.absolute()),
            "profile",
            *("--model", model, "--url", guarded_server.base_url),
            *("--endpoint-type", "completions", "--streaming"),
            *("--api-key", GUARDED_KEY, "--tokenizer", tokenizer),
            *("--synthetic-input-tokens-mean", "64", "--synthetic-input-tokens-stddev", "0"),
            *("--output-tokens-mean", "32", "--output-tokens-stddev", "0"),
            *("--extra-inputs", "ignore_eos:true", "--use-server-token-count"),
            *("--concurrency", str(STREAMS), "--request-count", str(REQUESTS)),
            *("--artifact-dir", str(aiperf_dir), "--ui-type", "none", "--random-seed", "0"),
        ],
        work / "aiperf.log",
        work,
    )
    ip_dir = work / "inference-perf"
    config = {
        "api": {"type": "completion", "streaming": True},
        "data": {
            "type": "random",
            "input_distribution": {"min": 64, "max": 64, "mean": 64, "std_dev": 0, "type": "fixed"},
            "output_distribution": {
                "min": 32,
                "max": 32,
                "mean": 32,
                "std_dev": 0,
                "type": "fixed",
            },
        },
        "load": {
            "type": "concurrent",
            "stages": [{"num_requests": REQUESTS, "concurrency_level": STREAMS}],
            "num_workers": 1,
        },
        "server": {
            "type": "vllm",
            "model_name": model,
            "base_url": guarded_server.base_url,
            "api_key": GUARDED_KEY,
            "ignore_eos": True,
        },
        "tokenizer": {"pretrained_model_name_or_path": tokenizer},
        "report": {"request_lifecycle": {"summary": True, "per_stage": True, "per_request": True}},
        "storage": {"local_storage": {"path": str(ip_dir)}},
    }
    (work / "inference-perf.yaml").write_text(yaml.safe_dump(config))
    _run(
        [str(INFERENCE_PERF.absolute()), "-c", str(work / "inference-perf.yaml")],
        work / "inference-perf.log",
        work,
    )
    root = work / "reports"
    runs = {}
    for name, source in (("aiperf", aiperf_dir), ("inference-perf", ip_dir)):
        result = run_cli("import", str(source), "--name", name, "--output", str(root))
        assert result.returncode == 0, result.stdout + result.stderr
        runs[name] = next(p for p in root.iterdir() if p.name.endswith(name))
    return runs, root


@pytest.mark.parametrize("tool", ["aiperf", "inference-perf"])
def test_a_real_tools_files_import_as_one_point_with_its_requests(peer_results, tool):
    runs, _ = peer_results
    (row,) = read_points(runs[tool])
    assert row["point_id"] == f"concurrent-{STREAMS}" and row["load_driver"] == tool
    assert row["valid"] == "True" and int(row["requests_ok"]) == REQUESTS
    assert float(row["prompt_tokens_mean"]) == 64 and float(row["output_tokens_mean"]) == 32
    for column in ("ttft_p50_ms", "e2e_p50_s", "output_tok_s", "achieved_rps"):
        assert float(row[column]) > 0, column
    # a client that reads a whole answer in one go sees no gaps between tokens: ITL 0 is
    # what it measured (seen with AIPerf on 2 shared cores), never missing
    assert float(row["itl_p50_ms"]) >= 0
    # output tokens/s is the server's tokens over the window: rate x 32 tokens
    assert float(row["output_tok_s"]) == pytest.approx(32 * float(row["achieved_rps"]), rel=0.02)
    samples = read_requests(runs[tool], "c1")
    assert len(samples) == REQUESTS
    assert all(float(s["end_time"]) > float(s["start_time"]) for s in samples)
    assert all(float(s["output_tokens"]) == 32 for s in samples)
    assert GUARDED_KEY not in json.dumps(
        {p.name: p.read_text(errors="replace") for p in runs[tool].rglob("*") if p.is_file()}
    )


def test_imported_peer_runs_compare_and_report_like_native_ones(peer_results):
    runs, root = peer_results
    result = run_cli(
        "compare", str(runs["aiperf"]), str(runs["inference-perf"]), "--format", "json"
    )
    assert result.returncode == 0, result.stdout + result.stderr
    rows = json.loads(result.stdout)["rows"]
    tok = next(
        r for r in rows if r["point"] == f"concurrent {STREAMS}" and r["metric"] == "output_tok_s"
    )
    assert tok["a"] > 0 and tok["b"] > 0 and tok["ci_low_pct"] is not None
    report = run_cli("report", str(runs["inference-perf"]))
    assert report.returncode == 0, report.stderr
    assert "inference-perf" in (runs["inference-perf"] / "report.html").read_text()
