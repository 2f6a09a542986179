"""The helm deployment's own behaviour, through fake `helm`/`oc` executables that record
their arguments and act out ready, slow and failing releases."""

from __future__ import annotations

import time

import pytest
import yaml

from tests.contract.test_deployment_contract import CONFIG, CONFIG_2, TOKEN, helm_settings
from tunebench.deploy.helm import HelmDeployment
from tunebench.errors import DeploymentError
from tunebench.store.layout import RunLayout


def start(cluster, server, tmp_path, statuses=None, **overrides):
    settings = helm_settings(**overrides)
    deployment = HelmDeployment(
        settings, RunLayout(tmp_path), on_status=(statuses.append if statuses is not None else None)
    )
    return deployment, deployment.start(CONFIG)


def test_install_arguments_and_the_complete_values_file(cluster, vllm, tmp_path):
    cluster.scenario(mode="ready", backend=vllm.address, sa_token=TOKEN)
    deployment, handle = start(cluster, vllm, tmp_path)
    install = next(argv for argv in cluster.calls("helm") if argv[0] == "upgrade")
    assert install[:4] == ["upgrade", "--install", "tb-contract", "vllm-kserve"]
    assert (
        install[install.index("--repo") + 1] == "https://redhat-ai-services.github.io/helm-charts/"
    )
    assert install[install.index("--version") + 1] == "0.5.11"
    assert install[install.index("--namespace") + 1] == "bench"
    values = yaml.safe_load(cluster.installed_values("tb-contract"))
    # The chart replaces its default list: tunebench writes all of it, defaults included.
    assert values["model"]["args"] == [
        "--gpu-memory-utilization=0.90",
        "--max-num-seqs=8",
        "--max-model-len=4096",
    ]
    assert values["model"]["uri"] == "hf://ibm-granite/granite-3.3-8b-instruct"
    assert values["deploymentMode"] == "RawDeployment"
    assert values["fullnameOverride"] == "tb-contract"
    # The same file is kept in the run, and the pod's log is saved for effective-config parsing.
    assert RunLayout(tmp_path).helm_values("c1").read_text().count("--max-num-seqs=8") == 1
    assert "vLLM API server" in deployment.log_text()
    deployment.stop()
    uninstall = [argv for argv in cluster.calls("helm") if argv[0] == "uninstall"]
    assert uninstall and "--wait" in uninstall[-1]
    assert cluster.releases() == []


def test_keep_leaves_the_last_release_and_the_next_start_replaces_it(cluster, vllm, tmp_path):
    cluster.scenario(mode="ready", backend=vllm.address, sa_token=TOKEN)
    deployment = HelmDeployment(helm_settings(keep=True), RunLayout(tmp_path))
    deployment.start(CONFIG)
    deployment.stop()
    assert cluster.releases() == ["tb-contract"]
    deployment.start(CONFIG_2)
    commands = [argv[0] for argv in cluster.calls("helm")]
    # status finds the kept release, which is removed before the next configuration installs.
    assert commands[-3:] == ["status", "uninstall", "upgrade"]
    assert "--max-num-seqs=32" in cluster.installed_values("tb-contract")
    deployment.stop()
    assert cluster.releases() == ["tb-contract"]


def test_a_slow_release_is_waited_for_with_progress(cluster, vllm, tmp_path):
    cluster.scenario(mode="slow", ready_after_s=6, backend=vllm.address, sa_token=TOKEN)
    statuses: list[str] = []
    began = time.monotonic()
    deployment, handle = start(cluster, vllm, tmp_path, statuses)
    assert time.monotonic() - began >= 6
    assert handle.started_s >= 6
    assert any(
        "waiting for InferenceService tb-contract: Running, not ready" in s for s in statuses
    )
    deployment.stop()


@pytest.mark.parametrize(
    "mode, expected",
    [
        ("crashloop", "CrashLoopBackOff after 3 restarts"),
        ("imagepull", "ImagePullBackOff"),
    ],
)
def test_a_failing_pod_ends_the_configuration_at_once(cluster, vllm, tmp_path, mode, expected):
    cluster.scenario(mode=mode, backend=vllm.address, sa_token=TOKEN)
    deployment = HelmDeployment(helm_settings(ready_timeout_s=600), RunLayout(tmp_path))
    began = time.monotonic()
    with pytest.raises(DeploymentError, match=expected) as caught:
        deployment.start(CONFIG)
    assert time.monotonic() - began < 30  # not the 600 s ready timeout
    assert "event " in caught.value.log_tail
    if mode == "crashloop":
        assert "last log line: ValueError: User-specified max_model_len" in str(caught.value)
    deployment.stop()
    assert cluster.releases() == []  # uninstalled even though it never became ready


def test_a_release_that_never_schedules_times_out_with_the_reason(cluster, vllm, tmp_path):
    cluster.scenario(mode="pending", backend=vllm.address, sa_token=TOKEN)
    deployment = HelmDeployment(helm_settings(ready_timeout_s=3), RunLayout(tmp_path))
    with pytest.raises(
        DeploymentError,
        match=r"not Ready after \d+ s \(deployment.ready_timeout_s\)"
        r".*Unschedulable: 0/3 nodes are available",
    ) as caught:
        deployment.start(CONFIG)
    assert "event FailedScheduling" in caught.value.log_tail
    deployment.stop()
    assert cluster.releases() == []


def test_a_failed_install_names_helms_error(cluster, vllm, tmp_path):
    cluster.scenario(
        install_error='cannot patch "tb-contract": admission webhook denied',
        backend=vllm.address,
        sa_token=TOKEN,
    )
    deployment = HelmDeployment(helm_settings(), RunLayout(tmp_path))
    with pytest.raises(
        DeploymentError, match="helm upgrade failed: Error: UPGRADE FAILED: cannot patch"
    ):
        deployment.start(CONFIG)
    deployment.stop()


def test_missing_helm_executable(cluster, vllm, tmp_path):
    cluster.scenario(mode="ready", backend=vllm.address, sa_token=TOKEN)
    deployment = HelmDeployment(helm_settings(helm="helm-not-installed"), RunLayout(tmp_path))
    with pytest.raises(
        DeploymentError,
        match="helm-not-installed: not found on PATH; install it or set deployment.helm",
    ):
        deployment.start(CONFIG)


def test_token_from_the_environment(cluster, vllm, tmp_path, monkeypatch):
    cluster.scenario(mode="ready", backend=vllm.address)
    monkeypatch.delenv("TB_HELM_TOKEN", raising=False)
    deployment = HelmDeployment(
        helm_settings(token_secret=None, token_env="TB_HELM_TOKEN"), RunLayout(tmp_path)
    )
    with pytest.raises(DeploymentError, match="TB_HELM_TOKEN is not set"):
        deployment.start(CONFIG)
    monkeypatch.setenv("TB_HELM_TOKEN", TOKEN)
    handle = deployment.start(CONFIG)
    assert handle.headers["Authorization"] == f"Bearer {TOKEN}"
    assert ("/v1/models", f"Bearer {TOKEN}") in vllm.requests
    deployment.stop()


def test_missing_secret_is_a_clear_error(cluster, vllm, tmp_path):
    cluster.scenario(mode="ready", backend=vllm.address)  # no token in the cluster
    deployment = HelmDeployment(helm_settings(), RunLayout(tmp_path))
    with pytest.raises(
        DeploymentError,
        match="deployment.token_secret: cannot read key 'token' "
        "of Secret tunebench-client in bench",
    ):
        deployment.start(CONFIG)


def test_route_certificate_needs_a_ca_bundle_or_insecure(cluster, tls_vllm, tmp_path):
    cluster.scenario(
        mode="ready", backend=tls_vllm.address, route_host=tls_vllm.address, sa_token=TOKEN
    )
    strict = HelmDeployment(
        helm_settings(access="route", health_timeout_s=2), RunLayout(tmp_path / "a")
    )
    with pytest.raises(DeploymentError, match="CERTIFICATE_VERIFY_FAILED"):
        strict.start(CONFIG)
    strict.stop()
    insecure = HelmDeployment(
        helm_settings(access="route", insecure_skip_tls_verify=True), RunLayout(tmp_path / "b")
    )
    handle = insecure.start(CONFIG)
    assert handle.base_url == f"https://{tls_vllm.address}" and handle.verify_tls is False
    # metrics come from the pod through a port-forward, not through the router
    assert handle.metrics_url.startswith("http://127.0.0.1:") and insecure.pgid is not None
    insecure.stop()


def test_without_a_route_the_https_status_url_is_used(cluster, tls_vllm, tmp_path):
    cluster.scenario(mode="ready", backend=tls_vllm.address, sa_token=TOKEN)  # no Route
    deployment = HelmDeployment(helm_settings(access="route"), RunLayout(tmp_path / "a"))
    with pytest.raises(
        DeploymentError,
        match="no Route tb-contract in bench and no https "
        "status.url; enable endpoint.externalRoute",
    ):
        deployment.start(CONFIG)
    deployment.stop()
    cluster.scenario(
        mode="ready",
        backend=tls_vllm.address,
        sa_token=TOKEN,
        isvc_url=f"https://{tls_vllm.address}",
    )
    deployment = HelmDeployment(
        helm_settings(access="route", ca_bundle=str(tls_vllm.ca_bundle)), RunLayout(tmp_path / "b")
    )
    assert deployment.start(CONFIG).base_url == f"https://{tls_vllm.address}"
    deployment.stop()


def test_a_port_forward_that_ends_is_reported_to_the_server_watch(cluster, vllm, tmp_path):
    import os
    import signal

    cluster.scenario(mode="ready", backend=vllm.address, sa_token=TOKEN)
    deployment, handle = start(cluster, vllm, tmp_path)
    assert deployment.failure() is None
    os.killpg(deployment.pgid, signal.SIGKILL)  # the pod went away: oc port-forward ends
    deadline = time.monotonic() + 10
    while deployment.failure() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    assert deployment.failure().startswith("oc port-forward to pod/tb-contract-predictor")
    deployment.stop()
