"""Plant known secrets everywhere a user gives them (environment and spec: HF token, vLLM
API key, bearer token, S3 credentials) and grep every file of the run, the report, the
console output of every command and a crash log for them."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.conftest import REPO, run_cli
from tests.e2e.conftest import NEEDS_SERVER
from tests.fakes.s3_server import BUCKET
from tunebench.store.run import read_points

pytestmark = [pytest.mark.server, NEEDS_SERVER]

PLANTED = {
    "env HF_TOKEN": "hf_plantedEnvToken8842XYZ",
    "spec api-key": "sk-planted-spec-apikey-5521",
    "spec deployment.env HF_TOKEN": "hf_plantedSpecToken1177QRS",
    "env bearer": "planted-bearer-token-90aa17",
    "env AWS_SECRET_ACCESS_KEY": "plantedAwsSecret/0b9+Q2",
}


def grep_tree(root: Path) -> list[str]:
    hits = []
    for path in root.rglob("*"):
        if path.is_file():
            text = path.read_bytes().decode("utf-8", errors="replace")
            hits += [f"{path}: {what}" for what, value in PLANTED.items() if value in text]
    return hits


def grep_text(where: str, text: str) -> list[str]:
    return [f"{where}: {what}" for what, value in PLANTED.items() if value in text]


def test_planted_secrets_never_reach_a_file_log_or_console(tmp_path, s3):
    spec = tmp_path / "secrets.yaml"
    spec.write_text(
        textwrap.dedent(f"""
        name: secrets
        model: builtin:tiny-llama
        deployment:
          kind: local
          env: {{HF_TOKEN: {PLANTED["spec deployment.env HF_TOKEN"]}}}
        server:
          args: {{max-model-len: 256, enforce-eager: true, api-key: {PLANTED["spec api-key"]}}}
        load:
          data: {{kind: synthetic, prompt_tokens: 32, output_tokens: 16}}
          profiles: [{{kind: concurrent, streams: [2], max_seconds: 4}}]
        """)
    )
    home = tmp_path / "home"
    env = {
        "HF_TOKEN": PLANTED["env HF_TOKEN"],
        "TB_BEARER_TOKEN": PLANTED["env bearer"],
        "AWS_ACCESS_KEY_ID": s3.key_id,
        "AWS_SECRET_ACCESS_KEY": s3.secret,
        "TB_EXTRA_SECRET": PLANTED["env AWS_SECRET_ACCESS_KEY"],
        "TUNEBENCH_HOME": str(home),
    }
    runs = tmp_path / "runs"
    outputs = []
    sweep = run_cli("sweep", str(spec), "-o", str(runs), env=env, timeout=600)
    outputs.append(("sweep", sweep))
    assert sweep.returncode == 0, sweep.stderr[-3000:]
    run = next(runs.iterdir())
    # The server really required the key from the spec, and got it from tunebench:
    rows = read_points(run)
    assert int(rows[0]["requests_ok"]) > 0 and int(rows[0]["requests_failed"]) == 0
    for command in (
        ["show", str(run), "--format", "json"],
        ["report", str(run)],
        ["compare", str(run), str(run)],
        ["results", str(run)],
        ["upload", str(run), f"s3://{BUCKET}/secrets", "--endpoint-url", s3.endpoint],
    ):
        result = run_cli(*command, env=env, timeout=300)
        assert result.returncode == 0, (command, result.stderr[-2000:])
        outputs.append((command[0], result))
    # An internal error with the secrets in its message still writes a clean crash log.
    crash = subprocess.run(
        [
            sys.executable,
            "-c",
            textwrap.dedent(f"""
            import sys, tunebench.cli.runs as runs_cli, tunebench.cli.main as main
            def boom(root):
                raise RuntimeError("boom Authorization: Bearer {PLANTED["env bearer"]} "
                                   "{PLANTED["env HF_TOKEN"]} {PLANTED["spec api-key"]}")
            runs_cli.list_runs = boom
            from tunebench.redact import remember; remember({PLANTED["spec api-key"]!r})
            sys.argv = ["tunebench", "runs", "--root", {str(runs)!r}]
            main.run()
            """),
        ],
        cwd=REPO,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )
    outputs.append(("crash", crash))
    assert crash.returncode == 3, crash.stderr[-2000:]
    crash_logs = list((home / "crash").glob("crash-*.log"))
    assert crash_logs and "RuntimeError: boom" in crash_logs[0].read_text()

    hits = grep_tree(run) + grep_tree(home / "crash")
    for name, result in outputs:
        hits += grep_text(f"{name} stdout", result.stdout) + grep_text(
            f"{name} stderr", result.stderr
        )
    keys = s3.client().list_objects_v2(Bucket=BUCKET, Prefix="secrets")["Contents"]
    assert keys  # the run was uploaded ...
    for obj in keys:  # ... and no uploaded object holds a secret either
        body = s3.client().get_object(Bucket=BUCKET, Key=obj["Key"])["Body"].read()
        hits += grep_text(f"s3://{BUCKET}/{obj['Key']}", body.decode("utf-8", errors="replace"))
    hits += (
        grep_text("S3 secret", "")
        if s3.secret not in "".join(r.stdout + r.stderr for _, r in outputs)
        else ["S3 secret key in console output"]
    )
    assert hits == [], hits
    assert (run / "report.html").exists() and (run / "logs" / "server-c1.log").exists()
