"""A small HTTP proxy in front of the real vLLM server that plants one fault, for the
adversarial tests (tests/e2e/test_adversarial_cpu.py). It runs in the test process (a
uvicorn server on a thread, loopback only) and forwards everything else unchanged:

- `truncate`: every streamed completion reaches the client cut after `keep_events` text
  events and a clean `data: [DONE]`; the proxy still reads the server's whole stream, so
  the server generates (and counts) every token it was asked for;
- `fail`: every second completion request is answered 500 without reaching the server.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import AsyncIterator

import httpx
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

HOP_HEADERS = {"host", "content-length", "connection", "transfer-encoding", "accept-encoding"}


class PlantedProxy:
    def __init__(self, upstream: str, mode: str, keep_events: int = 4):
        self.upstream = upstream.rstrip("/")
        self.mode = mode
        self.keep_events = keep_events
        self.completions = 0
        self.failed = 0
        self.cut = 0
        self._client: httpx.AsyncClient | None = None
        self._draining: set[asyncio.Task] = set()
        # bound here and handed to uvicorn: no window for another process to take the port
        self._socket = socket.socket()
        self._socket.bind(("127.0.0.1", 0))
        self.port = self._socket.getsockname()[1]
        app = Starlette(
            routes=[Route("/{path:path}", self._forward, methods=["GET", "POST"])],
        )
        config = uvicorn.Config(app, log_level="warning")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [self._socket]}, daemon=True
        )

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> PlantedProxy:
        self._thread.start()
        deadline = time.monotonic() + 30
        while not self._server.started:
            if time.monotonic() > deadline:
                raise RuntimeError("the planted proxy did not start")
            time.sleep(0.05)
        return self

    def __exit__(self, *exc) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10)
        self._socket.close()

    async def _forward(self, request: Request) -> Response:
        if self._client is None:
            self._client = httpx.AsyncClient(timeout=httpx.Timeout(120.0))
        headers = {k: v for k, v in request.headers.items() if k.lower() not in HOP_HEADERS}
        url = f"{self.upstream}{request.url.path}"
        if request.url.query:
            url += f"?{request.url.query}"
        body = await request.body()
        is_completion = request.method == "POST" and request.url.path.endswith("completions")
        if is_completion:
            self.completions += 1
            if self.mode == "fail" and self.completions % 2 == 0:
                self.failed += 1
                return JSONResponse(
                    {"error": {"message": "planted failure", "type": "server_error"}},
                    status_code=500,
                )
        upstream = await self._client.send(
            self._client.build_request(request.method, url, headers=headers, content=body),
            stream=True,
        )
        kept = {k: v for k, v in upstream.headers.items() if k.lower() not in HOP_HEADERS}
        if is_completion and self.mode == "truncate" and upstream.status_code == 200:
            self.cut += 1
            return StreamingResponse(self._cut(upstream), headers=kept)
        return StreamingResponse(
            self._relay(upstream), status_code=upstream.status_code, headers=kept
        )

    async def _relay(self, upstream: httpx.Response) -> AsyncIterator[bytes]:
        try:
            async for chunk in upstream.aiter_raw():
                yield chunk
        finally:
            await upstream.aclose()

    async def _cut(self, upstream: httpx.Response) -> AsyncIterator[bytes]:
        lines = upstream.aiter_lines()
        sent = 0
        async for line in lines:
            if line.startswith("data: ") and line != "data: [DONE]" and '"text"' in line:
                yield f"{line}\n\n".encode()
                sent += 1
                if sent == self.keep_events:
                    break
        # The rest is read to its end apart from the client's response (whose closing
        # cancels this generator), so the server generates and counts every token.
        drain = asyncio.create_task(self._drain(upstream, lines))
        self._draining.add(drain)
        drain.add_done_callback(self._draining.discard)
        yield b"data: [DONE]\n\n"

    async def _drain(self, upstream: httpx.Response, lines: AsyncIterator[str]) -> None:
        try:
            async for _ in lines:
                pass
        finally:
            await upstream.aclose()
