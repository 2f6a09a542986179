"""A local server whose free port is taken between tunebench picking it and the server
binding it (two servers starting at the same moment) starts again on another port."""

from __future__ import annotations

import socket
import sys

import pytest

from tunebench.deploy import local
from tunebench.deploy.local import LocalVllmServer
from tunebench.errors import DeploymentError
from tunebench.spec.deployments import LocalSettings
from tunebench.spec.plan import ServerConfig
from tunebench.store.layout import RunLayout

# binds its port as vLLM does (failing the same way when it is taken) and answers /health
SERVE = (
    "import http.server, sys\n"
    "class H(http.server.BaseHTTPRequestHandler):\n"
    "    def do_GET(self):\n"
    "        self.send_response(200); self.end_headers()\n"
    "    def log_message(self, *a): pass\n"
    "http.server.HTTPServer(('127.0.0.1', int(sys.argv[1])), H).serve_forever()\n"
)


class HealthOnlyServer(LocalVllmServer):
    def command(self, config, model_path, port):
        return [sys.executable, "-c", SERVE, str(port)]


def config() -> ServerConfig:
    return ServerConfig("c1", "port", "/nonexistent/model", None, {})


@pytest.fixture
def taken():
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        yield holder.getsockname()[1]


def test_a_port_taken_before_the_server_binds_it_is_picked_again(tmp_path, monkeypatch, taken):
    picks = iter([taken, local.free_port()])
    monkeypatch.setattr(local, "free_port", lambda host="127.0.0.1": next(picks))
    server = HealthOnlyServer(LocalSettings(kind="local", start_timeout_s=30), RunLayout(tmp_path))
    try:
        handle = server.start(config())
        assert not handle.base_url.endswith(f":{taken}"), handle.base_url
    finally:
        server.stop()


def test_a_port_the_user_set_is_never_changed(tmp_path, taken):
    settings = LocalSettings(kind="local", start_timeout_s=30, port=taken)
    server = HealthOnlyServer(settings, RunLayout(tmp_path))
    with pytest.raises(DeploymentError, match="already in use"):
        server.start(config())
    server.stop()
