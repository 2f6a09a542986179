"""Fakes for the deployment contract: `helm`/`oc` executables on PATH and a fake vLLM."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.fakes.fake_vllm import FakeVllm, self_signed_cert

FAKE_BIN = Path(__file__).resolve().parent.parent / "fakes" / "bin"


@dataclass
class FakeCluster:
    state: Path

    def scenario(self, **values) -> None:
        (self.state / "scenario.json").write_text(json.dumps(values))

    def calls(self, tool: str | None = None) -> list[list[str]]:
        path = self.state / "calls.jsonl"
        rows = [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
        return [r["argv"] for r in rows if tool is None or r["tool"] == tool]

    def releases(self) -> list[str]:
        return sorted(p.stem for p in (self.state / "releases").glob("*.json"))

    def installed_values(self, release: str) -> str:
        return json.loads((self.state / "releases" / f"{release}.json").read_text())["values"]


@pytest.fixture
def cluster(tmp_path, monkeypatch) -> FakeCluster:
    state = tmp_path / "cluster"
    state.mkdir()
    monkeypatch.setenv("FAKE_KUBE_STATE", str(state))
    monkeypatch.setenv("PATH", f"{FAKE_BIN}:{__import__('os').environ['PATH']}")
    return FakeCluster(state)


@pytest.fixture
def vllm():
    server = FakeVllm(model="granite", token="sa-token-8c1e77f0")
    yield server
    server.close()


@pytest.fixture
def tls_vllm(tmp_path):
    cert, key = self_signed_cert(tmp_path)
    server = FakeVllm(model="granite", token="sa-token-8c1e77f0", cert=(cert, key))
    server.ca_bundle = cert
    yield server
    server.close()


@pytest.fixture(autouse=True)
def quick_polling(monkeypatch):
    """The fake cluster answers at once: look at it every 0.2 s instead of every 5 s."""
    from tunebench.deploy.helm import HelmDeployment

    monkeypatch.setattr(HelmDeployment, "poll_s", 0.2)
