"""Fake `helm` and `oc` for the helm deployment's tests: they record every call and act out
a scenario read from $FAKE_KUBE_STATE/scenario.json.

scenario keys: mode (ready | slow | crashloop | imagepull | pending), ready_after_s,
backend ("host:port" that `oc port-forward` forwards to), route_host, sa_token,
pod_log (a file whose text `oc logs` prints), install_error (helm upgrade fails with it),
isvc_url (the InferenceService's status.url; default a cluster-local http URL),
pending_values (a release whose values file contains this text stays Pending: the GPUs it
asks for are not there).
Only the standard library: the fakes run under any python3.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import sys
import time
from pathlib import Path

STATE = Path(os.environ["FAKE_KUBE_STATE"])
POD_SUFFIX = "-predictor-7d9f8-x2x4q"


def scenario() -> dict:
    path = STATE / "scenario.json"
    return json.loads(path.read_text()) if path.exists() else {}


def record(tool: str, argv: list[str]) -> None:
    with open(STATE / "calls.jsonl", "a") as handle:
        handle.write(json.dumps({"tool": tool, "argv": argv, "time": time.time()}) + "\n")


def option(argv: list[str], name: str) -> str | None:
    for index, item in enumerate(argv):
        if item == name and index + 1 < len(argv):
            return argv[index + 1]
        if item.startswith(name + "="):
            return item.split("=", 1)[1]
    return None


def release_file(name: str) -> Path:
    return STATE / "releases" / f"{name}.json"


def fail(message: str, code: int = 1) -> None:
    print(message, file=sys.stderr)
    sys.exit(code)


# -- helm ----------------------------------------------------------------------------------
def helm(argv: list[str]) -> None:
    command = argv[0]
    if command == "upgrade":
        name, chart = argv[2], argv[3]
        if scenario().get("install_error"):
            fail(f"Error: UPGRADE FAILED: {scenario()['install_error']}")
        values = Path(option(argv, "--values")).read_text()
        release_file(name).parent.mkdir(exist_ok=True)
        release_file(name).write_text(
            json.dumps(
                {
                    "chart": chart,
                    "values": values,
                    "installed_at": time.time(),
                    "namespace": option(argv, "--namespace"),
                }
            )
        )
        print(f'Release "{name}" has been upgraded. Happy Helming!')
    elif command == "status":
        if not release_file(argv[1]).exists():
            fail("Error: release: not found")
        print(f"NAME: {argv[1]}\nSTATUS: deployed")
    elif command == "uninstall":
        if not release_file(argv[1]).exists():
            fail(f"Error: uninstall: Release not loaded: {argv[1]}: release: not found")
        release_file(argv[1]).unlink()
        print(f'release "{argv[1]}" uninstalled')
    else:
        fail(f"Error: unknown command {command!r} for fake helm")


# -- oc ------------------------------------------------------------------------------------
def release_names() -> list[str]:
    folder = STATE / "releases"
    return [p.stem for p in folder.glob("*.json")] if folder.exists() else []


def mode_of(name: str) -> str:
    """The scenario's mode, or pending for a release whose values hold `pending_values`."""
    s = scenario()
    marker = s.get("pending_values")
    if marker and release_file(name).exists():
        if marker in json.loads(release_file(name).read_text())["values"]:
            return "pending"
    return s.get("mode", "ready")


def ready_now(name: str) -> bool:
    info = json.loads(release_file(name).read_text())
    s = scenario()
    return mode_of(name) in ("ready", "slow") and (
        time.time() - info["installed_at"] >= float(s.get("ready_after_s", 0))
    )


def pod_of(name: str) -> dict:
    mode = mode_of(name)
    container = {
        "name": "kserve-container",
        "restartCount": 0,
        "ready": False,
        "state": {"running": {"startedAt": "2026-11-21T10:00:00Z"}},
    }
    conditions = [{"type": "PodScheduled", "status": "True"}]
    if mode in ("ready", "slow") and ready_now(name):
        container["ready"] = True
    elif mode == "crashloop":
        container.update(
            restartCount=3,
            state={"waiting": {"reason": "CrashLoopBackOff"}},
            lastState={"terminated": {"reason": "Error", "exitCode": 1}},
        )
    elif mode == "imagepull":
        container["state"] = {
            "waiting": {
                "reason": "ImagePullBackOff",
                "message": 'Back-off pulling image "quay.io/x/vllm:bad"',
            }
        }
    elif mode == "pending":
        conditions = [
            {
                "type": "PodScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "message": "0/3 nodes are available: 3 Insufficient nvidia.com/gpu.",
            }
        ]
        container = None
    return {
        "metadata": {"name": name + POD_SUFFIX, "creationTimestamp": "2026-11-21T10:00:00Z"},
        "status": {
            "phase": "Running" if container else "Pending",
            "conditions": conditions,
            "containerStatuses": [container] if container else [],
        },
    }


def events_for(pod: str) -> list[dict]:
    mode = mode_of(pod.removesuffix(POD_SUFFIX))
    text = {
        "crashloop": ("BackOff", "Back-off restarting failed container kserve-container"),
        "imagepull": ("Failed", 'Failed to pull image "quay.io/x/vllm:bad": not found'),
        "pending": ("FailedScheduling", "0/3 nodes are available: 3 Insufficient nvidia.com/gpu."),
    }.get(mode, ("Started", "Started container kserve-container"))
    return [{"reason": text[0], "message": text[1], "involvedObject": {"name": pod}}]


def not_found(kind: str, name: str) -> None:
    fail(f'Error from server (NotFound): {kind} "{name}" not found')


def oc_get(argv: list[str]) -> None:
    kind = argv[1]
    if kind == "inferenceservice":
        name = argv[2]
        if name not in release_names():
            not_found("inferenceservices.serving.kserve.io", name)
        ready = ready_now(name)
        print(
            json.dumps(
                {
                    "metadata": {"name": name},
                    "status": {
                        "url": scenario().get(
                            "isvc_url", f"http://{name}-predictor.bench.svc.cluster.local"
                        ),
                        "conditions": [
                            {
                                "type": "Ready",
                                "status": "True" if ready else "False",
                                "reason": None if ready else "RevisionMissing",
                                "message": None if ready else "predictor pod not ready",
                            }
                        ],
                    },
                }
            )
        )
    elif kind == "pods":
        selector = option(argv, "-l") or ""
        name = selector.split("=", 1)[1]
        print(json.dumps({"items": [pod_of(name)] if name in release_names() else []}))
    elif kind == "events":
        pod = (option(argv, "--field-selector") or "").split("=", 1)[1]
        print(json.dumps({"items": events_for(pod)}))
    elif kind == "route":
        host = scenario().get("route_host")
        if not host or argv[2] not in release_names():
            not_found("routes.route.openshift.io", argv[2])
        print(json.dumps({"metadata": {"name": argv[2]}, "spec": {"host": host}}))
    elif kind == "secret":
        token = scenario().get("sa_token")
        if not token or argv[2] != scenario().get("sa_secret", argv[2]):
            not_found("secrets", argv[2])
        print(base64.b64encode(token.encode()).decode(), end="")
    else:
        fail(f'error: the server doesn\'t have a resource type "{kind}"')


def oc_logs() -> None:
    s = scenario()
    if s.get("pod_log") and Path(s["pod_log"]).exists():
        print(Path(s["pod_log"]).read_text(), end="")
    elif s.get("mode") == "crashloop":
        print(
            "INFO starting vLLM API server\nValueError: User-specified max_model_len (65536) "
            "is greater than the derived max_model_len (8192)"
        )
    else:
        print("INFO 11-21 10:00:00 api_server.py: vLLM API server version 0.11.0")


async def _proxy(local: int, backend: str) -> None:
    host, port = backend.rsplit(":", 1)

    async def pipe(reader, writer):
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        except ConnectionError:
            pass
        finally:
            writer.close()

    async def handle(client_reader, client_writer):
        try:
            server_reader, server_writer = await asyncio.open_connection(host, int(port))
        except OSError:
            client_writer.close()
            return
        await asyncio.gather(pipe(client_reader, server_writer), pipe(server_reader, client_writer))

    server = await asyncio.start_server(handle, "127.0.0.1", local)
    print(f"Forwarding from 127.0.0.1:{local} -> 8080", flush=True)
    async with server:
        await server.serve_forever()


def oc(argv: list[str]) -> None:
    if argv[0] == "get":
        oc_get(argv)
    elif argv[0] == "logs":
        oc_logs()
    elif argv[0] == "port-forward":
        local = int(argv[2].split(":")[0])
        asyncio.run(_proxy(local, scenario()["backend"]))
    else:
        fail(f'error: unknown command "{argv[0]}" for fake oc')


def main(tool: str) -> None:
    argv = sys.argv[1:]
    record(tool, argv)
    (helm if tool == "helm" else oc)(argv)
