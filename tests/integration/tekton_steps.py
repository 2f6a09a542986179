"""Run a Tekton Task's step script here, with the environment the Task would give it.

Tekton substitutes `$(params.x)`, `$(workspaces.x.path|bound)` and `$(results.x.path)` in
a step's env values and resolves `secretKeyRef`s; this module does the same from the
Task's YAML (param defaults plus overrides), so a test exercises the Task's real mapping
of params to environment variables, not a copy of it.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

from tunebench.processes import run_in_own_session

REPO = Path(__file__).resolve().parent.parent.parent
PIPELINES = REPO / "pipelines"
_VARIABLE = re.compile(r"\$\(([^)]+)\)")


def documents(path: Path) -> list[dict]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def load_task(name: str) -> dict:
    return documents(PIPELINES / "tasks" / f"{name}.yaml")[0]


def step(task: dict, name: str) -> dict:
    return next(s for s in task["spec"]["steps"] if s["name"] == name)


def substitute(text: str, values: dict[str, str]) -> str:
    def one(match: re.Match) -> str:
        if match.group(1) not in values:
            raise KeyError(f"unknown Tekton variable $({match.group(1)})")
        return values[match.group(1)]

    return _VARIABLE.sub(one, text)


def step_env(
    task: dict,
    step_name: str,
    params: dict[str, str] | None = None,
    workspaces: dict[str, Path] | None = None,
    results_dir: Path | None = None,
    secrets: dict[tuple[str, str], str] | None = None,
) -> dict[str, str]:
    """The variables Tekton would set for the step (from the Task's env list)."""
    spec = task["spec"]
    params = dict(params or {})
    workspaces = workspaces or {}
    secrets = secrets or {}
    declared = {p["name"] for p in spec.get("params", [])}
    unknown = set(params) - declared
    assert not unknown, f"params not declared by {task['metadata']['name']}: {unknown}"
    values: dict[str, str] = {}
    for param in spec.get("params", []):
        value = params.get(param["name"], param.get("default"))
        assert value is not None, f"param {param['name']} has no default and was not given"
        values[f"params.{param['name']}"] = str(value)
    for workspace in spec.get("workspaces", []):
        path = workspaces.get(workspace["name"])
        assert path is not None or workspace.get("optional"), (
            f"workspace {workspace['name']} is required"
        )
        values[f"workspaces.{workspace['name']}.path"] = str(path) if path else ""
        values[f"workspaces.{workspace['name']}.bound"] = "true" if path else "false"
    for result in spec.get("results", []):
        assert results_dir is not None
        values[f"results.{result['name']}.path"] = str(results_dir / result["name"])
    env: dict[str, str] = {}
    for item in step(task, step_name).get("env", []):
        if "value" in item:
            env[item["name"]] = substitute(item["value"], values)
            continue
        ref = item["valueFrom"]["secretKeyRef"]
        key = (substitute(ref["name"], values), substitute(ref["key"], values))
        if key in secrets:
            env[item["name"]] = secrets[key]
        else:
            assert ref.get("optional"), f"secret key {key} is missing and not optional"
    return env


def run_step(
    task: dict, step_name: str, env: dict[str, str], cwd: Path, timeout: float = 300
) -> subprocess.CompletedProcess:
    """`bash` the step's script in `cwd` with `env` over this process's environment.

    `tunebench` is found on PATH: this interpreter's bin directory comes first, and
    PYTHONPATH is kept, so the script runs the tunebench under test.
    """
    handle, name = tempfile.mkstemp(prefix=f"{task['metadata']['name']}-{step_name}-", suffix=".sh")
    script = Path(name)
    with os.fdopen(handle, "w") as out:
        out.write(step(task, step_name)["script"])
    full = dict(os.environ)
    full["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{full.get('PATH', '')}"
    full["COLUMNS"] = "200"  # xdist's workers export 80 (tests/conftest.py run_cli)
    full.update(env)
    try:  # stopped with everything it started at its timeout (tests/conftest.py)
        return run_in_own_session(["bash", str(script)], cwd, full, timeout)
    finally:
        script.unlink()
