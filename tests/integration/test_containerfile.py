"""The Containerfile's invariants (no container engine here to build it): a base pinned by
digest, downloads checked against SHA-256s, CPU torch before GuideLLM, a non-root user and
group-0 writable directories for OpenShift's arbitrary UIDs, and the image tag the tasks
default to matching the package version."""

from __future__ import annotations

import re
import tomllib

import pytest

from tests.conftest import REPO
from tests.integration.tekton_steps import load_task

TEXT = (REPO / "Containerfile").read_text()
# Continuation lines joined: one instruction per entry.
INSTRUCTIONS = [
    line.strip()
    for line in re.sub(r"\\\n", " ", TEXT).splitlines()
    if line.strip() and not line.lstrip().startswith("#")
]
ARGS = dict(re.findall(r"^ARG (\w+)=(\S+)$", TEXT, re.M))
SHA256 = re.compile(r"^[0-9a-f]{64}$")


def _instructions(keyword: str) -> list[str]:
    return [i.split(None, 1)[1] for i in INSTRUCTIONS if i.split(None, 1)[0] == keyword]


def test_every_base_image_is_pinned_by_digest():
    froms = _instructions("FROM")
    assert froms
    for image in froms:
        assert re.search(r"@sha256:[0-9a-f]{64}(\s|$)", image), image
        assert image.startswith("registry.access.redhat.com/ubi9/python-311:")


def test_every_download_is_checked_against_a_pinned_sha256():
    runs = " ".join(_instructions("RUN"))
    downloads = re.findall(r"curl [^;]*-o (\S+) \"([^\"]+)\"", runs)
    assert {name for name, _ in downloads} == {"helm.tar.gz", "oc.tar.gz"}
    for name, url in downloads:
        check = re.search(
            rf'echo "\$\{{(\w+)\}}  {re.escape(name)}" \| sha256sum --check --strict -', runs
        )
        assert check, f"{name} is not verified"
        assert SHA256.match(ARGS[check[1]]), f"{check[1]} is not a SHA-256"
        assert runs.index(f"-o {name}") < runs.index(check[0]) < runs.index(f"tar -xzf {name}")
        version = re.search(r"\$\{(\w+_VERSION)\}", url)[1]
        assert re.match(r"^v?\d+\.\d+\.\d+$", ARGS[version]), version


def test_cpu_torch_is_installed_before_tunebench():
    runs = " ".join(_instructions("RUN"))
    torch = runs.index('pip install "torch==${TORCH_VERSION}" --index-url "${TORCH_INDEX_URL}"')
    assert torch < runs.index("pip install /opt/app-root/src")
    assert ARGS["TORCH_INDEX_URL"].endswith("/whl/cpu")


def test_runs_as_non_root_with_group_zero_writable_dirs():
    users = _instructions("USER")
    assert users[-1] == "1001"
    runs = " ".join(_instructions("RUN"))
    assert "chgrp -R 0 /opt/app-root" in runs and "chmod -R g=u /opt/app-root" in runs
    # the last RUN as root is the permission fix-up, after everything was installed
    last_root_run = max(
        i
        for i, ins in enumerate(INSTRUCTIONS)
        if ins.startswith("RUN")
        and [u for u in INSTRUCTIONS[:i] if u.startswith("USER")][-1] == "USER 0"
    )
    assert "chmod -R g=u" in INSTRUCTIONS[last_root_run]
    env = " ".join(_instructions("ENV"))
    assert "HOME=/opt/app-root/src" in env and "TUNEBENCH_HOME=/opt/app-root/src/" in env


def test_build_context_leaves_out_environments_and_runs():
    ignored = (REPO / ".containerignore").read_text().split()
    assert {".git", ".venv", "reports/*", "tools/tekton-lint/node_modules"} <= set(ignored)
    assert "sweeps" not in ignored  # the tasks' spec paths resolve in the image's copy


@pytest.mark.parametrize("task", ["tunebench-run", "tunebench-upload"])
def test_tasks_default_to_the_image_of_this_version(task):
    version = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    image = next(p for p in load_task(task)["spec"]["params"] if p["name"] == "image")
    assert image["default"].endswith(f"/tunebench:{version}")
