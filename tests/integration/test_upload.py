"""`tunebench upload` and the tunebench-upload Task's step, against a local S3 (moto) server.

The server enforces credentials (moto's IAM auth): the fixture creates a user with an access
key, creates the bucket, then switches authentication on, so a wrong secret or an unknown
key id really is refused, as MinIO or AWS would refuse it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.fakes.s3_server import BUCKET, S3, free_port  # the `s3` fixture: tests/conftest.py
from tests.integration.tekton_steps import load_task, run_step, step_env
from tunebench.testing import make_synthetic_run


@pytest.fixture
def workspace(tmp_path) -> Path:
    """A reports workspace: runs/<a synthetic run with nested files> and a comparison."""
    ws = tmp_path / "ws"
    store = make_synthetic_run(ws / "runs", name="upload-me", configs=2, streams=(1, 4))
    (ws / "runs" / "compare-20261121T000000Z.json").write_text('{"rows": []}')
    (store.path / ".points.csv.123.tmp").write_text("half-written")  # never uploaded
    return ws


def _files(root: Path) -> set[str]:
    return {
        p.relative_to(root).as_posix()
        for p in root.rglob("*")
        if p.is_file() and not p.name.endswith(".tmp")
    }


def _upload(s3: S3, workspace: Path, tmp_path: Path, secrets: dict | None = None, **params):
    task = load_task("tunebench-upload")
    results = tmp_path / "results"
    results.mkdir(exist_ok=True)
    params = {"bucket": BUCKET, "endpoint-url": s3.endpoint, **params}
    workspaces = {"reports": workspace, **params.pop("workspaces", {})}
    env = step_env(task, "upload", params, workspaces, results, secrets or s3.secrets())
    return run_step(task, "upload", env, tmp_path, timeout=120), results


def test_step_uploads_every_file_under_the_prefix(s3, workspace, tmp_path):
    result, results = _upload(s3, workspace, tmp_path, prefix="ci/pr-7")
    assert result.returncode == 0, result.stderr
    local = _files(workspace / "runs")
    assert len(local) >= 6 and any("/requests/" in f for f in local)  # nested files too
    assert s3.keys("ci/pr-7/") == {f"ci/pr-7/{f}" for f in local}
    run_id = next(p.name for p in (workspace / "runs").iterdir() if p.is_dir())
    body = s3.client().get_object(Bucket=BUCKET, Key=f"ci/pr-7/{run_id}/points.csv")["Body"].read()
    assert body == (workspace / "runs" / run_id / "points.csv").read_bytes()
    assert (results / "url").read_text() == f"s3://{BUCKET}/ci/pr-7/"
    assert f"[{len(local)}/{len(local)}]" in result.stdout  # progress, one line per file
    assert f"uploaded {len(local)} files" in result.stdout
    assert s3.secret not in result.stdout + result.stderr


def test_step_uploads_one_run_when_asked(s3, workspace, tmp_path):
    result, _ = _upload(s3, workspace, tmp_path, prefix="one", run="upload-me")
    assert result.returncode == 0, result.stderr
    run = next(p for p in (workspace / "runs").iterdir() if p.is_dir())
    assert s3.keys("one/") == {f"one/{run.name}/{f}" for f in _files(run)}


@pytest.mark.parametrize(
    "case,expected",
    [
        ("no-bucket", "bucket 'no-such-bucket' does not exist"),
        ("wrong-secret", "rejected the credentials (SignatureDoesNotMatch)"),
        ("unknown-key", "rejected the credentials (InvalidAccessKeyId)"),
        ("unreachable", "cannot reach http://127.0.0.1:"),
    ],
)
def test_step_failures_are_one_line_and_fail_the_step(s3, workspace, tmp_path, case, expected):
    wrong = "WRONG-secret-value-must-never-be-printed"
    params: dict = {"prefix": f"fail-{case}"}
    secrets = s3.secrets()
    if case == "no-bucket":
        params["bucket"] = "no-such-bucket"
    elif case == "wrong-secret":
        secrets = s3.secrets(secret=wrong)
    elif case == "unknown-key":
        secrets = s3.secrets(key_id="AKIAUNKNOWNKEY000000", secret=wrong)
    else:
        params["endpoint-url"] = f"http://127.0.0.1:{free_port()}"
    result, results = _upload(s3, workspace, tmp_path, secrets=secrets, **params)
    assert result.returncode != 0
    error = result.stderr.strip()
    assert "\n" not in error, error
    assert error.startswith("error: upload failed: ") and expected in error, error
    output = result.stdout + result.stderr
    assert s3.secret not in output and wrong not in output
    assert not (results / "url").exists()
    assert s3.keys(f"fail-{case}/") == set()


def test_step_rejects_a_bad_verify_tls_value(s3, workspace, tmp_path):
    result, _ = _upload(s3, workspace, tmp_path, **{"verify-tls": "yes"})
    assert result.returncode == 2
    assert "param verify-tls is 'yes'; use true or false" in result.stderr


def test_step_passes_the_ca_bundle_workspace(s3, workspace, tmp_path):
    ca = tmp_path / "ca"
    ca.mkdir()
    result, _ = _upload(s3, workspace, tmp_path, workspaces={"ca-bundle": ca})
    assert result.returncode == 2 and f"--ca-bundle {ca}/ca.crt: no such file" in result.stderr
    (ca / "ca.crt").write_text("-----BEGIN CERTIFICATE-----\n")  # unused over plain http
    result, _ = _upload(s3, workspace, tmp_path, prefix="with-ca", workspaces={"ca-bundle": ca})
    assert result.returncode == 0, result.stderr
    assert s3.keys("with-ca/")


def test_cli_destination_and_selection_errors(tmp_path):
    store = make_synthetic_run(tmp_path, configs=1, streams=(1,))
    bad = run_cli("upload", store.path.name, "http://bucket/x", "--root", str(tmp_path))
    assert bad.returncode == 2 and "use s3://BUCKET/PREFIX" in bad.stderr
    both = run_cli("upload", store.path.name, "--all", "s3://bucket/x", "--root", str(tmp_path))
    assert both.returncode == 2 and "not both" in both.stderr
    # a root that is not there is a typo, not "nothing": it fails (a CI job must not pass)
    absent = run_cli("upload", "--all", "s3://bucket/x", "--root", str(tmp_path / "none"))
    assert absent.returncode == 2 and "no such directory" in absent.stderr
    (tmp_path / "empty").mkdir()
    empty = run_cli("upload", "--all", "s3://bucket/x", "--root", str(tmp_path / "empty"))
    assert empty.returncode == 0 and "nothing to upload" in empty.stdout
    missing = run_cli("upload", "no-such-run", "s3://bucket/x", "--root", str(tmp_path))
    assert missing.returncode == 2 and "no run 'no-such-run'" in missing.stderr


def test_cli_honours_aws_endpoint_url(s3, tmp_path):
    store = make_synthetic_run(tmp_path, configs=1, streams=(1,))
    result = run_cli(
        "upload",
        store.path.name,
        f"s3://{BUCKET}/from-env",
        "--root",
        str(tmp_path),
        "-q",
        env={
            "AWS_ENDPOINT_URL": s3.endpoint,
            "AWS_ACCESS_KEY_ID": s3.key_id,
            "AWS_SECRET_ACCESS_KEY": s3.secret,
        },
    )
    assert result.returncode == 0, result.stderr
    assert s3.keys("from-env/") == {f"from-env/{store.path.name}/{f}" for f in _files(store.path)}
    assert "[1/" not in result.stdout  # --quiet: the summary only
