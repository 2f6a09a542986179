"""A stand-in for vLLM's HTTP surface (/health, /v1/models, /metrics) for deployment tests:
answers on loopback, optionally over TLS, optionally demanding a bearer token."""

from __future__ import annotations

import datetime
import json
import ssl
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

METRICS = """# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{model_name="fake"} 0.0
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{model_name="fake"} 0.0
"""


class FakeVllm:
    def __init__(
        self,
        model: str = "fake-model",
        token: str | None = None,
        cert: tuple[Path, Path] | None = None,
    ):
        self.model, self.token = model, token
        self.requests: list[tuple[str, str | None]] = []
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 - http.server's name
                auth = self.headers.get("Authorization")
                fake.requests.append((self.path, auth))
                if fake.token and auth != f"Bearer {fake.token}":
                    return self._send(401, "text/plain", b"Unauthorized")
                if self.path == "/health":
                    return self._send(200, "text/plain", b"")
                if self.path == "/v1/models":
                    body = {"data": [{"id": fake.model, "max_model_len": 4096}]}
                    return self._send(200, "application/json", json.dumps(body).encode())
                if self.path == "/metrics":
                    return self._send(200, "text/plain", METRICS.encode())
                return self._send(404, "text/plain", b"not found")

            def _send(self, code: int, kind: str, body: bytes) -> None:
                self.send_response(code)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        if cert:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(str(cert[0]), str(cert[1]))
            self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def self_signed_cert(folder: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 (the 'router' of the tests) and its key."""
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "router.apps.example.com")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = folder / "router.crt", folder / "router.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path
