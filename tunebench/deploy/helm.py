"""`deployment.kind: helm`: the vllm-kserve chart, one release per server configuration.

For each configuration: write its complete values file (spec/kserve_chart.py) into the run,
remove a release of the same name left by an earlier configuration or run, run
`helm upgrade --install`, wait for the InferenceService to be Ready while watching its pod
for states that never recover (image pull errors, crash loops), then reach vLLM through
the Route (HTTPS) or `oc port-forward`, and wait for /health and /v1/models, because
Kubernetes readiness comes before vLLM has loaded its weights. `/metrics` is scraped from
the pod itself through a port-forward (the cluster's ServiceMonitor samples every 30 s).
`stop()` keeps the pod's log in the run and uninstalls the release unless `keep` is set.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from tunebench.deploy.kserve_status import CONTAINER, condition, pod_state
from tunebench.deploy.kube import KubeCli, first_line
from tunebench.deploy.local import server_error_line
from tunebench.deploy.port_forward import PortForwards
from tunebench.deploy.ready import wait_for_models
from tunebench.errors import DeploymentError, SpecError, tail
from tunebench.redact import remember
from tunebench.seams.deployment import ServerHandle, StatusCallback, tls_verify
from tunebench.spec.deployments import HelmSettings
from tunebench.spec.kserve_chart import chart_values, render_values_file, tokenizer_for
from tunebench.spec.plan import ServerConfig
from tunebench.store.layout import RunLayout

POLL_S = 5.0


class HelmDeployment:
    kind = "helm"
    poll_s = POLL_S  # how often the InferenceService and its pod are looked at

    def __init__(
        self,
        settings: HelmSettings,
        layout: RunLayout,
        on_status: StatusCallback | None = None,
        served_model_name: str | None = None,
    ):
        if not settings.release:
            raise ValueError("resolve the release name first (assemble.resolve_settings)")
        self.settings = settings
        self.release: str = settings.release
        self.layout = layout
        self.served_model_name = served_model_name
        self.on_status = on_status or (lambda message: None)
        self.kube = KubeCli(
            settings.helm,
            settings.oc,
            settings.namespace,
            settings.kube_context,
            layout.helm_commands,
        )
        self._forwards = PortForwards(self.kube, layout.logs)
        self._log_path: Path | None = None
        self._config: ServerConfig | None = None
        self._pod: str | None = None

    # -- the Deployment contract -------------------------------------------------------
    @property
    def log_path(self) -> Path | None:
        return self._log_path

    @property
    def pgid(self) -> int | None:
        """The first port-forward's group: the processes tunebench started for this release."""
        return self._forwards.pgid

    @property
    def last_pgid(self) -> int | None:
        return self._forwards.last_pgid

    def failure(self) -> str | None:
        """Why vLLM became unreachable during the load (a port-forward ended), or None."""
        return self._forwards.failure()

    def log_text(self) -> str:
        if self._log_path and self._log_path.exists():
            return self._log_path.read_text(errors="replace")
        return ""

    def start(self, config: ServerConfig) -> ServerHandle:
        self.stop()
        self._config = config
        self._log_path = self.layout.server_log(config.config_id)
        self._log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log_path.write_text("")
        values_path = self.write_values(config)
        headers = self._headers()
        launched = time.monotonic()
        self._remove_existing_release()
        self.on_status(f"helm upgrade --install {self.release} ({config.label})")
        self.kube.helm(*self.install_args(values_path), timeout=600)
        self._pod = self._wait_ready(launched)
        base_url, verify = self._endpoint()
        metrics_url = f"{base_url}/metrics"
        if self.settings.scrape == "pod" and self.settings.access == "route":
            metrics_url = f"{self._port_forward(self._pod)}/metrics"
        token_hint = self.settings.token_env or f"Secret {self.settings.token_secret}"
        served = wait_for_models(
            base_url,
            headers,
            tls_verify(verify, self.settings.ca_bundle),
            self.settings.health_timeout_s,
            self.served_model_name,
            self.on_status,
            token_hint,
            "deployment.health_timeout_s",
            check_health=True,
        )
        self._save_pod_log()  # now with vLLM's start-up lines (engine config, KV cache size)
        return ServerHandle(
            base_url=base_url,
            metrics_url=metrics_url,
            served_model=served,
            headers=headers,
            verify_tls=verify,
            ca_bundle=self.settings.ca_bundle,
            started_s=time.monotonic() - launched,
        )

    def stop(self) -> None:
        self._forwards.close()
        if self._config is None:
            return
        self._config = None
        if self._pod:
            self._save_pod_log()
        self._pod = None
        if self.settings.keep:
            self.on_status(f"keeping release {self.release} in {self.settings.namespace} (--keep)")
            return
        self._uninstall()

    # -- steps ------------------------------------------------------------------------------
    def write_values(self, config: ServerConfig) -> Path:
        try:
            values = chart_values(
                self.settings,
                config,
                self.release,
                self.served_model_name,
                Path("."),
                Path("deployment"),
            )
            tokenizer_for(config.model, config.tokenizer, config.label)
        except SpecError as exc:
            raise DeploymentError(str(exc)) from None
        path = self.layout.helm_values(config.config_id)
        path.write_text(
            render_values_file(
                values,
                [
                    f"vllm-kserve {self.settings.chart_version} values of {config.config_id} "
                    f"({config.label}), written by tunebench",
                ],
            )
        )
        return path

    def install_args(self, values_path: Path) -> list[str]:
        chart = self.settings.chart
        repo = (
            []
            if chart.startswith(("oci://", "/")) or not self.settings.repo
            else ["--repo", self.settings.repo]
        )
        return [
            "upgrade",
            "--install",
            self.release,
            chart,
            *repo,
            "--version",
            self.settings.chart_version,
            "--values",
            str(values_path),
        ]

    def _headers(self) -> dict[str, str]:
        settings = self.settings
        if settings.token_env:
            token = os.environ.get(settings.token_env)
            if not token:
                raise DeploymentError(
                    f"deployment.token_env: environment variable {settings.token_env} is not "
                    f"set; export {settings.token_env}=$(oc create token <service-account>)"
                )
            remember(token)
            return {"Authorization": f"Bearer {token}"}
        if settings.token_secret:
            token = self.kube.secret_value(settings.token_secret, "token")
            remember(token)
            return {"Authorization": f"Bearer {token}"}
        return {}

    def _remove_existing_release(self) -> None:
        status = self.kube.helm("status", self.release, check=False, quiet=True)
        if status.returncode == 0:
            self.on_status(f"removing the existing release {self.release}")
            self._uninstall()

    def _uninstall(self) -> None:
        timeout = self.settings.uninstall_timeout_s
        try:
            result = self.kube.helm(
                "uninstall",
                self.release,
                "--wait",
                "--timeout",
                f"{timeout:.0f}s",
                timeout=timeout + 30,
                check=False,
            )
        except DeploymentError as exc:
            problem = str(exc)
        else:
            if result.returncode == 0 or "not found" in result.stderr:
                return
            problem = first_line(result.stderr)
        # Teardown must not hide the configuration's own outcome; say what is left behind.
        print(
            f"warning: helm uninstall {self.release} failed ({problem}); remove it with: "
            f"helm uninstall {self.release} -n {self.settings.namespace}",
            file=sys.stderr,
        )

    def _wait_ready(self, launched: float) -> str:
        """The name of the ready predictor pod; DeploymentError with events and log tail."""
        deadline = launched + self.settings.ready_timeout_s
        reason = "no status yet"
        while True:
            isvc = self.kube.oc_json("inferenceservice", self.release) or {}
            ready, reason = condition(isvc, "Ready", reason)
            pods = (
                self.kube.oc_json(
                    "pods", "-l", f"serving.kserve.io/inferenceservice={self.release}"
                )
                or {}
            )
            pod, state, fatal = pod_state(pods.get("items") or [])
            if fatal:
                self._fail(f"InferenceService {self.release}: pod {pod} {fatal}", pod)
            if ready and pod and state == "ready":
                return pod
            elapsed = time.monotonic() - launched
            if time.monotonic() > deadline:
                self._fail(
                    f"InferenceService {self.release} not Ready after {elapsed:.0f} s "
                    f"(deployment.ready_timeout_s): {reason}; pod: {state}"
                    + self._crowded_hint(reason, state),
                    pod,
                )
            self.on_status(
                f"waiting for InferenceService {self.release}: {state} … {elapsed:.0f} s"
            )
            time.sleep(self.poll_s)

    def _crowded_hint(self, reason: str, state: str) -> str:
        """A release that could not be scheduled while others of the sweep held the GPUs or
        the quota: say so, and what to change."""
        parallel = self.settings.parallel
        if parallel > 1 and (state.startswith("Pending") or "quota" in reason.lower()):
            return (
                f" ({parallel} configurations are installed at a time (deployment.parallel) "
                "and the others may hold what this one needs: lower parallel, or raise the "
                "namespace's GPU quota)"
            )
        return ""

    def _fail(self, message: str, pod: str | None) -> None:
        details: list[str] = []
        if pod:
            events = (
                self.kube.oc_json("events", "--field-selector", f"involvedObject.name={pod}") or {}
            )
            for event in (events.get("items") or [])[-10:]:
                details.append(f"event {event.get('reason', '')}: {event.get('message', '')}")
            log = self._save_pod_log(pod)
            if log:
                message += f"; last log line: {server_error_line(log)}"
                details.append(tail(log))
        raise DeploymentError(message, log_tail="\n".join(details))

    def _save_pod_log(self, pod: str | None = None) -> str:
        pod = pod or self._pod
        if not pod or self._log_path is None:
            return ""
        result = self.kube.oc(
            "logs",
            f"pod/{pod}",
            "-c",
            CONTAINER,
            "--tail=5000",
            check=False,
            quiet=True,
            timeout=60,
        )
        if result.returncode == 0 and result.stdout:
            self._log_path.write_text(kept_pod_log(self.log_text(), result.stdout))
        return self.log_text()

    def _endpoint(self) -> tuple[str, bool]:
        """Base URL of vLLM and whether to verify TLS."""
        if self.settings.access == "port-forward":
            return self._port_forward(self._pod), True
        route = self.kube.oc_json("route", self.release) or {}
        host = (route.get("spec") or {}).get("host")
        if not host:
            isvc = self.kube.oc_json("inferenceservice", self.release) or {}
            url = (isvc.get("status") or {}).get("url", "")
            if not url.startswith("https://"):
                raise DeploymentError(
                    f"no Route {self.release} in {self.settings.namespace} and no https "
                    "status.url; enable endpoint.externalRoute or use access: port-forward"
                )
            return url.rstrip("/"), not self.settings.insecure_skip_tls_verify
        return f"https://{host}", not self.settings.insecure_skip_tls_verify

    def _port_forward(self, pod: str | None) -> str:
        return self._forwards.open(pod, self._config.config_id if self._config else "release")


LOG_GAP = "[tunebench] ... pod log lines between the saved start-up and the last {tail} not kept"


def kept_pod_log(saved: str, latest: str, tail: int = 5000) -> str:
    """The pod log to keep when `latest` (its last `tail` lines) is read again at stop: the
    start-up lines saved earlier are the read-back evidence (engine config, KV cache size),
    so when a long run pushed them out of the tail, they stay in front of it."""
    if not saved.strip() or latest.startswith(saved.splitlines()[0]):
        return latest
    start = saved.split(LOG_GAP.format(tail=tail))[0].rstrip("\n")
    return f"{start}\n{LOG_GAP.format(tail=tail)}\n{latest}"
