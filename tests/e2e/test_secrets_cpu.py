"""Plant known secrets everywhere a user gives them (environment and spec: HF token, vLLM
API key, bearer token, S3 credentials) and grep every file of the run, the report, the
console output of every command and a crash log for them. The run is the shared e2e sweep,
whose spec and environment hold the planted values (tests/e2e/conftest.py)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.conftest import REPO, run_cli
from tests.e2e.conftest import NEEDS_SERVER, PLANTED, PLANTED_ENV
from tests.fakes.s3_server import BUCKET

# alone, in `make test`'s last step: the e2e sweep (tests/e2e/conftest.py) is timed; its
# readers run where it runs
pytestmark = [pytest.mark.server, pytest.mark.speed, NEEDS_SERVER]


def grep_tree(root: Path) -> list[str]:
    hits = []
    for path in root.rglob("*"):
        if path.is_file():
            text = path.read_bytes().decode("utf-8", errors="replace")
            hits += [f"{path}: {what}" for what, value in PLANTED.items() if value in text]
    return hits


def grep_text(where: str, text: str) -> list[str]:
    return [f"{where}: {what}" for what, value in PLANTED.items() if value in text]


def test_planted_secrets_never_reach_a_file_log_or_console(e2e_sweep, tmp_path, s3):
    run = e2e_sweep.path
    # The server really required the key from the spec, and got it from tunebench:
    mns8 = e2e_sweep.rows_of("mns8")
    assert mns8 and all(int(r["requests_ok"]) > 0 and int(r["requests_failed"]) == 0 for r in mns8)
    assert "--api-key" in e2e_sweep.config("mns8")["command_args"]
    env = {**PLANTED_ENV, "AWS_ACCESS_KEY_ID": s3.key_id, "AWS_SECRET_ACCESS_KEY": s3.secret}
    outputs = [("sweep", e2e_sweep)]
    root = str(run.parent)
    for command in (
        ["show", run.name, "--root", root, "--format", "json"],
        ["show", run.name, "--root", root],
        ["report", str(run)],
        ["compare", str(run), "--by", "variant"],
        ["results", str(run)],
        ["upload", str(run), f"s3://{BUCKET}/secrets", "--endpoint-url", s3.endpoint],
    ):
        result = run_cli(*command, env=env, timeout=300)
        assert result.returncode == 0, (command, result.stderr[-2000:])
        outputs.append((command[0], result))
    # An internal error with the secrets in its message still writes a clean crash log.
    home = tmp_path / "home"
    crash = subprocess.run(
        [
            sys.executable,
            "-c",
            textwrap.dedent(f"""
            import sys, tunebench.cli.main as main
            import tunebench.store.run as store_run
            def boom(root):
                raise RuntimeError("boom Authorization: Bearer {PLANTED["env bearer"]} "
                                   "{PLANTED["env HF_TOKEN"]} {PLANTED["spec api-key"]}")
            store_run.list_runs = boom
            from tunebench.redact import remember; remember({PLANTED["spec api-key"]!r})
            sys.argv = ["tunebench", "runs", "--root", {root!r}]
            main.run()
            """),
        ],
        cwd=REPO,
        env={**os.environ, **env, "TUNEBENCH_HOME": str(home)},
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
    console = "".join(r.stdout + r.stderr for _, r in outputs)
    if s3.secret in console:
        hits.append("S3 secret key in console output")
    assert hits == [], hits
    assert (run / "report.html").exists() and (run / "logs" / "server-c3.log").exists()
