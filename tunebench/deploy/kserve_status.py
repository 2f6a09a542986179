"""What an InferenceService and its predictor pod say about a release's progress: read from
`oc get -o json` output, with no cluster access of its own (deploy/helm.py asks).

A release is ready when the InferenceService's Ready condition is True and the newest
predictor pod's vLLM container is ready; some pod states never recover by waiting (an image
that cannot be pulled, a container that keeps crashing) and fail the configuration at once.
"""

from __future__ import annotations

from typing import Any

CONTAINER = "kserve-container"  # the chart's ServingRuntime container that runs vLLM
# Pod states that do not recover by waiting: fail the configuration at once.
FATAL_WAITING = {
    "ImagePullBackOff",
    "ErrImagePull",
    "InvalidImageName",
    "CreateContainerConfigError",
    "CreateContainerError",
}
CRASH_RESTARTS = 2


def condition(obj: dict[str, Any], kind: str, previous: str) -> tuple[bool, str]:
    """Whether `obj`'s condition `kind` is True, and its message (`previous` while it has
    none: the last thing it said)."""
    for entry in (obj.get("status") or {}).get("conditions") or []:
        if entry.get("type") == kind:
            text = entry.get("message") or entry.get("reason") or previous
            return entry.get("status") == "True", text
    return False, previous


def pod_state(pods: list[dict[str, Any]]) -> tuple[str | None, str, str | None]:
    """(pod name, a short state, a fatal reason or None) of the newest predictor pod."""
    if not pods:
        return None, "no pod yet", None
    pod = max(pods, key=lambda p: (p.get("metadata") or {}).get("creationTimestamp") or "")
    name = (pod.get("metadata") or {}).get("name")
    status = pod.get("status") or {}
    for entry in status.get("conditions") or []:
        if entry.get("type") == "PodScheduled" and entry.get("status") == "False":
            return (
                name,
                f"Pending ({entry.get('reason')}: {entry.get('message', '')})",
                None,
            )
    for container in status.get("containerStatuses") or []:
        if container.get("name") != CONTAINER:
            continue
        state = container.get("state") or {}
        waiting = state.get("waiting") or {}
        restarts = int(container.get("restartCount") or 0)
        if waiting.get("reason") in FATAL_WAITING:
            return name, waiting["reason"], f"{waiting['reason']}: {waiting.get('message', '')}"
        if waiting.get("reason") == "CrashLoopBackOff" and restarts >= CRASH_RESTARTS:
            last = (container.get("lastState") or {}).get("terminated") or {}
            why = last.get("reason") or "Error"
            return (
                name,
                "CrashLoopBackOff",
                (
                    f"CrashLoopBackOff after {restarts} restarts "
                    f"(last exit: {why}, code {last.get('exitCode')})"
                ),
            )
        if container.get("ready"):
            return name, "ready", None
        if state.get("running"):
            return name, "Running, not ready (loading the model)", None
        if waiting:
            return name, waiting.get("reason") or "Waiting", None
    return name, status.get("phase") or "Pending", None
