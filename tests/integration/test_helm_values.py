"""Generated vllm-kserve values: every helm sweep in sweeps/ renders with the chart of its
version (helm's Go library via helm-python-sdk, as `helm template` would) and every rendered
object validates against the strict KServe schemas; the chart's quirks give one-line errors."""

from __future__ import annotations

import json
import re
import textwrap
from functools import cache
from pathlib import Path

import helm_python as helm
import jsonschema
import pytest
import yaml

from tests.conftest import FIXTURES, REPO, run_cli
from tunebench.assemble import plan as build_plan
from tunebench.errors import SpecError
from tunebench.spec.kserve_chart import chart_values, release_name
from tunebench.spec.loading import load_spec

K8S = FIXTURES / "k8s"
HELM_SWEEPS = sorted(p for p in (REPO / "sweeps").glob("*.yaml") if "kind: helm" in p.read_text())
DNS_1123 = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


@cache
def chart(version: str) -> helm.Chart:
    return helm.Chart.load(K8S / "charts" / f"vllm-kserve-{version}")


@cache
def validator(kind: str, version: str) -> jsonschema.Draft7Validator | None:
    for group in ("kserve", "tekton"):
        path = K8S / "schemas" / group / f"{kind.lower()}_{version}.json"
        if path.exists():
            return jsonschema.Draft7Validator(json.loads(path.read_text()))
    return None


def rendered_objects(spec_path: Path) -> list[tuple[str, dict, dict]]:
    spec = load_spec(spec_path)
    plan = build_plan(spec, spec_path)
    settings = spec.deployment
    out = []
    for config in plan.configs:
        values = chart_values(
            settings, config, spec.name, spec.served_model_name, spec_path.parent, spec_path
        )
        manifests = chart(settings.chart_version).render(
            values=values, name=release_name(settings, spec.name), namespace=settings.namespace
        )
        for name, text in manifests.items():
            if not name.endswith(".yaml"):
                continue
            for obj in yaml.safe_load_all(text):
                if obj:
                    out.append((config.label, values, obj))
    return out


def test_the_repository_has_helm_sweeps_for_each_workshop_case():
    names = {p.name for p in HELM_SWEEPS}
    assert {
        "openshift-latency.yaml",
        "openshift-quantized.yaml",
        "openshift-speculative.yaml",
    } <= names
    versions = {load_spec(p).deployment.chart_version for p in HELM_SWEEPS}
    assert {"0.5.11", "0.7.0"} <= versions


@pytest.mark.parametrize("spec_path", HELM_SWEEPS, ids=lambda p: p.name)
def test_every_configuration_renders_and_validates(spec_path):
    objects = rendered_objects(spec_path)
    spec = load_spec(spec_path)
    configs = build_plan(spec, spec_path).configs
    kinds = {(label, obj["kind"]) for label, _, obj in objects}
    for config in configs:
        assert (config.label, "InferenceService") in kinds
        assert (config.label, "ServingRuntime") in kinds
    for label, values, obj in objects:
        schema = validator(obj["kind"], obj["apiVersion"].split("/")[-1])
        if schema is not None:
            errors = [f"{'/'.join(map(str, e.path))}: {e.message}" for e in schema.iter_errors(obj)]
            assert not errors, (label, obj["kind"], errors)
        else:  # core objects (ServiceAccount, Role, Secret, the chart's test Pod)
            assert obj["apiVersion"] and DNS_1123.match(obj["metadata"]["name"]), obj
        if obj["kind"] == "InferenceService":
            model = obj["spec"]["predictor"]["model"]
            config = next(c for c in configs if c.label == label)
            args = model["args"]
            # The chart's own default arg is kept unless the sweep changes it ...
            assert any(a.startswith("--gpu-memory-utilization=") for a in args)
            # ... and every engine arg of the configuration is on the command line.
            for name, value in config.args.items():
                present = any(a == f"--{name}" or a.startswith(f"--{name}=") for a in args)
                assert present == (value is not None), (label, name, args)
            assert model["storageUri"] == values["model"]["uri"]
            assert obj["metadata"]["name"] == release_name(spec.deployment, spec.name)


def test_variant_null_removes_an_arg_of_the_values_file():
    spec_path = REPO / "sweeps" / "openshift-speculative.yaml"
    by_label = {
        label: obj
        for label, _, obj in rendered_objects(spec_path)
        if obj["kind"] == "InferenceService"
    }

    def spec_arg(label):
        args = by_label[label]["spec"]["predictor"]["model"]["args"]
        return [a for a in args if a.startswith("--speculative-config")]

    assert spec_arg("no-spec") == []
    assert json.loads(spec_arg("eagle3")[0].split("=", 1)[1])["method"] == "eagle3"


def test_chart_070_values_carry_no_resources():
    for label, values, obj in rendered_objects(REPO / "sweeps" / "openshift-speculative.yaml"):
        assert "resources" not in values
        if obj["kind"] == "InferenceService":
            assert obj["metadata"]["annotations"]["security.opendatahub.io/enable-auth"] == "true"


def test_a_tensor_parallel_server_asks_the_cluster_for_all_its_gpus(tmp_path):
    rest = "server: {matrix: {tensor-parallel-size: [1, 2], data-parallel-size: [2]}}\n"
    spec_path = write_spec(tmp_path, version="0.6.1", rest=rest)
    resources = {
        label: obj["spec"]["predictor"]["model"]["resources"]
        for label, _, obj in rendered_objects(spec_path)
        if obj["kind"] == "InferenceService"
    }
    assert len(resources) == 2
    for label, wanted in (("tensor-parallel-size=1", "2"), ("tensor-parallel-size=2", "4")):
        got = next(r for name, r in resources.items() if name.startswith(label))
        assert got["limits"]["nvidia.com/gpu"] == wanted, (label, got)
        assert got["requests"]["nvidia.com/gpu"] == wanted
        assert got["limits"]["memory"] == "8Gi"  # the chart's other limits kept


SPEC_HEAD = """
name: helm-bad
model: ibm-granite/granite-3.3-8b-instruct
deployment:
  kind: helm
  chart_version: {version}
  namespace: bench
  token_env: TB_TOKEN
{extra}
load:
  data: {{kind: synthetic, prompt_tokens: 64, output_tokens: 16}}
  profiles: [{{kind: concurrent, streams: [1], max_seconds: 5}}]
"""


def write_spec(tmp_path: Path, version="0.5.11", deployment_extra="", rest="") -> Path:
    extra = (
        textwrap.indent(textwrap.dedent(deployment_extra).strip(), "  ") if deployment_extra else ""
    )
    path = tmp_path / "spec.yaml"
    path.write_text(SPEC_HEAD.format(version=version, extra=extra) + textwrap.dedent(rest))
    return path


BAD_SPECS = [
    (
        "resources on 0.7.0",
        dict(version="0.7.0", deployment_extra="resources: {limits: {nvidia.com/gpu: '1'}}"),
        "resources: vllm-kserve 0.7.0 cannot render resources",
    ),
    (
        "nodeSelector",
        dict(deployment_extra="overrides: {nodeSelector: {gpu: a100}}"),
        "nodeSelector: vllm-kserve 0.5.11 renders it under predictor.model",
    ),
    (
        "Serverless on 0.7.0",
        dict(version="0.7.0", deployment_extra="overrides: {deploymentMode: Serverless}"),
        "deploymentMode: vllm-kserve 0.7.0 supports only RawDeployment",
    ),
    (
        "port arg",
        dict(rest="server: {args: {port: 9000}}\n"),
        "server arg port: the chart runs vLLM on --port=8080; remove it",
    ),
    (
        "local model",
        dict(rest="server: {variants: [{name: local, model: ./models/tiny}]}\n"),
        "local model path",
    ),
    (
        "builtin model",
        dict(rest="server: {variants: [{name: tiny, model: 'builtin:tiny-llama-random'}]}\n"),
        "is on this machine, which the cluster cannot read",
    ),
    (
        "uri without tokenizer",
        dict(rest="server: {variants: [{name: oci, model: 'oci://quay.io/x/y:z'}]}\n"),
        "is a storage URI; set tokenizer:",
    ),
    (
        "literal secret env",
        dict(deployment_extra="env: {HF_TOKEN: hf_abcdefghijkl}"),
        "model.env HF_TOKEN holds a literal secret; use valueFrom",
    ),
    (
        "two token sources",
        dict(deployment_extra="token_secret: client"),
        "token_env and token_secret: give one source",
    ),
    (
        "values file missing",
        dict(deployment_extra="values: [../helm-values/none.yaml]"),
        "deployment.values[0]: values file",
    ),
    (
        "chart dir version",
        dict(deployment_extra=f"chart: {K8S / 'charts' / 'vllm-kserve-0.7.0'}\nrepo: null"),
        "deployment.chart_version 0.5.11 but",
    ),
    ("bad namespace", {}, "deployment.namespace"),
    (
        "tp=2 on 0.7.0 without a hardware profile",
        dict(version="0.7.0", rest="server: {args: {tensor-parallel-size: 2}}\n"),
        "2 GPUs per server (tensor x pipeline x data parallel): vllm-kserve 0.7.0 cannot",
    ),
    (
        "ca bundle missing",
        dict(deployment_extra="ca_bundle: router-ca.pem"),
        "deployment.ca_bundle: router-ca.pem does not exist",
    ),
]


@pytest.mark.parametrize("case, parts, message", BAD_SPECS, ids=[c[0] for c in BAD_SPECS])
def test_bad_helm_specs_give_one_line_and_exit_2(tmp_path, case, parts, message):
    path = write_spec(tmp_path, **parts)
    if case == "bad namespace":
        path.write_text(path.read_text().replace("namespace: bench", "namespace: Bench_1", 1))
    with pytest.raises(SpecError, match=re.escape(message)):
        build_plan(load_spec(path), path)
    result = run_cli("sweep", str(path), "--dry-run")
    assert result.returncode == 2, result.stdout + result.stderr
    lines = [line for line in (result.stdout + result.stderr).splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in lines[0] and str(path) in lines[0], lines


def test_token_is_required_where_the_chart_always_enables_auth(tmp_path):
    path = write_spec(tmp_path, version="0.7.0")
    path.write_text(path.read_text().replace("  token_env: TB_TOKEN\n", ""))
    with pytest.raises(
        SpecError, match="requires a bearer token .chart 0.7.0 auth.; set token_env"
    ):
        build_plan(load_spec(path), path)
    write_spec(tmp_path, version="0.5.11")  # auth off by default on 0.5.11: no token needed
    path.write_text(path.read_text().replace("  token_env: TB_TOKEN\n", ""))
    build_plan(load_spec(path), path)


def test_helm_values_command_writes_one_file_per_configuration(tmp_path):
    result = run_cli("helm-values", "sweeps/openshift-latency.yaml", "-o", str(tmp_path))
    assert result.returncode == 0, result.stderr
    files = sorted(tmp_path.glob("*.yaml"))
    assert [f.name for f in files] == [f"openshift-latency-c{i}.yaml" for i in range(1, 5)]
    values = yaml.safe_load(files[1].read_text())
    assert values["model"]["args"] == [
        "--gpu-memory-utilization=0.90",
        "--max-model-len=8192",
        "--max-num-seqs=8",
    ]
    assert "helm upgrade --install tb-openshift-latency" in files[1].read_text()
