"""A stand-in for a Prometheus that scrapes a DCGM exporter, for the energy meter tests: it
holds recorded `/api/v1/query` answers as the exporter's series and answers the one query
DcgmMeter makes (an instant query of a range selector), on loopback.

`scrape()` stores the series of the capture in force as samples at that moment (as
Prometheus stamps a scrape: milliseconds); `capture` picks which recorded answer the
exporter shows. A query `METRIC{label="value",...}[Ns]` at `time` answers, as a matrix, the
series whose labels match every `label="value"` pair, with their samples in (time - N,
time]. `down = True` answers 503, as a Prometheus that cannot serve queries."""

from __future__ import annotations

import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlparse

QUERY = re.compile(r"(?P<name>[A-Za-z_:][\w:]*)\{(?P<selector>.*)\}\[(?P<span>\d+)s\]")
MATCHER = re.compile(r'(\w+)="([^"]*)"')


class FakePrometheus:
    def __init__(self, captures: list[Path]):
        self.captures = [json.loads(p.read_text())["data"]["result"] for p in captures]
        self.capture = 0
        self.samples: list[tuple[float, dict[str, str], str]] = []
        self.queries: list[str] = []
        self.down = False
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 - http.server's name
                url = urlparse(self.path)
                params = {k: v[0] for k, v in parse_qs(url.query).items()}
                if url.path != "/api/v1/query":
                    return self._send(404, {"status": "error", "error": "not found"})
                if fake.down:
                    return self._send(
                        503, {"status": "error", "errorType": "unavailable", "error": "down"}
                    )
                fake.queries.append(params.get("query", ""))
                code, body = fake.answer(params.get("query", ""), float(params["time"]))
                return self._send(code, body)

            def _send(self, code: int, body: dict) -> None:
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def scrape(self) -> None:
        now = round(time.time(), 3)
        for series in self.captures[self.capture]:
            self.samples.append((now, series["metric"], series["value"][1]))

    def answer(self, query: str, at: float) -> tuple[int, dict]:
        found = QUERY.fullmatch(query)
        pieces = [m for m in found["selector"].split(",") if m] if found else []
        pairs = [MATCHER.fullmatch(m) for m in pieces]
        if not found or not all(pairs):
            # what this stand-in does not implement is refused, never answered wrongly
            return 400, {"status": "error", "errorType": "bad_data", "error": query}
        wanted = {"__name__": found["name"], **dict(p.groups() for p in pairs if p)}
        span = int(found["span"])
        series: dict[tuple, dict] = {}
        for when, labels, value in self.samples:
            if at - span < when <= at and all(labels.get(k) == v for k, v in wanted.items()):
                key = tuple(sorted(labels.items()))
                entry = series.setdefault(key, {"metric": labels, "values": []})
                entry["values"].append([when, value])
        result = {"resultType": "matrix", "result": list(series.values())}
        return 200, {"status": "success", "data": result}

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
