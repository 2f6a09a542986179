"""The `helm` and `oc` command lines, bounded in time, each in its own process group.

Every call is appended to a transcript (argv and the first lines of its output) that is
kept in the run directory; stderr becomes the one-line message of a DeploymentError.
Tokens never pass through here: the bearer token is read from a Secret by `secret_value`,
whose output is not transcribed.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from tunebench.errors import DeploymentError
from tunebench.redact import redact_text


class KubeCli:
    def __init__(
        self, helm: str, oc: str, namespace: str, kube_context: str | None, transcript: Path
    ):
        self.helm_exe, self.oc_exe = helm, oc
        self.namespace = namespace
        self.kube_context = kube_context
        self.transcript = transcript

    def helm(
        self, *args: str, timeout: float = 120, check: bool = True, quiet: bool = False
    ) -> subprocess.CompletedProcess:
        context = ["--kube-context", self.kube_context] if self.kube_context else []
        return self._run(
            [self.helm_exe, *args, "--namespace", self.namespace, *context], timeout, check, quiet
        )

    def oc(
        self, *args: str, timeout: float = 60, check: bool = True, quiet: bool = False
    ) -> subprocess.CompletedProcess:
        context = ["--context", self.kube_context] if self.kube_context else []
        return self._run(
            [self.oc_exe, *args, "-n", self.namespace, *context], timeout, check, quiet
        )

    def oc_json(self, *args: str, timeout: float = 60) -> dict[str, Any] | None:
        """`oc get ... -o json`, or None when the object does not exist (yet)."""
        result = self.oc("get", *args, "-o", "json", timeout=timeout, check=False, quiet=True)
        if result.returncode != 0:
            if "NotFound" in result.stderr or "not found" in result.stderr:
                return None
            raise DeploymentError(f"oc get {' '.join(args)}: {first_line(result.stderr)}")
        try:
            return json.loads(result.stdout)
        except json.JSONDecodeError:
            raise DeploymentError(f"oc get {' '.join(args)}: output is not JSON") from None

    def secret_value(self, name: str, key: str) -> str:
        result = self.oc(
            "get", "secret", name, "-o", f"jsonpath={{.data.{key}}}", check=False, quiet=True
        )
        if result.returncode != 0 or not result.stdout.strip():
            raise DeploymentError(
                f"deployment.token_secret: cannot read key {key!r} of Secret {name} in "
                f"{self.namespace}: {first_line(result.stderr) or 'empty'}; check the name and "
                "that your user may read it"
            )
        return base64.b64decode(result.stdout.strip()).decode()

    def executable_argv(self, *args: str) -> list[str]:
        """An `oc` command line for a long-running child (port-forward)."""
        context = ["--context", self.kube_context] if self.kube_context else []
        return [self._resolve(self.oc_exe), *args, "-n", self.namespace, *context]

    def _resolve(self, exe: str) -> str:
        found = shutil.which(exe)
        if not found:
            what = "deployment.helm" if exe == self.helm_exe else "deployment.oc"
            raise DeploymentError(f"{exe}: not found on PATH; install it or set {what}")
        return found

    def _run(
        self, argv: list[str], timeout: float, check: bool, quiet: bool
    ) -> subprocess.CompletedProcess:
        argv = [self._resolve(argv[0]), *argv[1:]]
        started = time.monotonic()
        process = subprocess.Popen(
            argv,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
            start_new_session=True,
        )
        try:
            stdout, stderr = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_group(process)
            self._note(argv, None, "", f"timed out after {timeout:g} s", started)
            raise DeploymentError(
                f"{Path(argv[0]).name} {argv[1]}: no answer within "
                f"{timeout:g} s; check the cluster connection"
            ) from None
        except BaseException:
            _kill_group(process)  # Ctrl-C: never leave a helm or oc call behind
            raise
        result = subprocess.CompletedProcess(argv, process.returncode, stdout, stderr)
        self._note(argv, result.returncode, "" if quiet else stdout, stderr, started)
        if check and result.returncode != 0:
            raise DeploymentError(
                f"{Path(argv[0]).name} {argv[1]} failed: "
                f"{first_line(stderr) or f'exit code {result.returncode}'}"
            )
        return result

    def _note(
        self, argv: list[str], code: int | None, stdout: str, stderr: str, started: float
    ) -> None:
        lines = [
            f"$ {' '.join([Path(argv[0]).name, *argv[1:]])}  "
            f"# exit {code}, {time.monotonic() - started:.1f} s"
        ]
        lines += [f"  {line}" for line in (stdout + stderr).splitlines()[:20]]
        self.transcript.parent.mkdir(parents=True, exist_ok=True)
        with open(self.transcript, "a", encoding="utf-8") as handle:
            handle.write(redact_text("\n".join(lines)) + "\n")


def first_line(text: str) -> str:
    for line in (text or "").splitlines():
        if line.strip():
            return line.strip()[:300]
    return ""


def _kill_group(process: subprocess.Popen) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    process.wait()
