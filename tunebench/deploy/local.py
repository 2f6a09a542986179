"""A vLLM OpenAI server started on this host, one process group per configuration."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import signal
import socket
import sys
import time
from pathlib import Path
from typing import Sequence

import httpx

from tunebench import demo
from tunebench.deploy.gpu_free import wait_for_free_gpus
from tunebench.environment import cache_root, gpu_visible
from tunebench.errors import DeploymentError, tail
from tunebench.processes import ManagedProcess, parse_cpus
from tunebench.redact import remember
from tunebench.seams.deployment import ServerHandle, StatusCallback
from tunebench.spec.deployments import LocalSettings
from tunebench.spec.plan import ServerConfig
from tunebench.store.layout import RunLayout

VLLM_MODULE = "vllm.entrypoints.openai.api_server"
_ERROR_LINE = re.compile(
    r"(error|exception|invalid|unrecognized|not supported|out of memory|Address already in use|"
    r"died unexpectedly)",
    re.IGNORECASE,
)
_NOISE = re.compile(r"(FutureWarning|DeprecationWarning|warnings\.warn|Traceback \(most recent)")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
# vLLM's own log prefix: "(EngineCore pid=28101) ERROR 11-23 12:55:34 [core.py:1510] message".
_VLLM_PREFIX = re.compile(
    r"\((?P<process>[^()\s]+) pid=\d+\) (?P<level>[A-Z]+) \S+ \S+ \[[^\]]*\] ?(?P<message>.*)"
)
_ENGINE_PROCESS = re.compile(r"Engine|Worker")  # EngineCore, EngineCore_DP0, Worker_TP1, ...
_QUIET_LEVELS = {"DEBUG", "INFO", "WARNING"}
# The line Python prints for a raised exception: "NotImplementedError: ...", "OSError: [Errno
# 98] Address already in use", "torch.OutOfMemoryError: ...", a bare "AssertionError".
_EXCEPTION = re.compile(r"(?:[A-Za-z_]\w*\.)*[A-Z]\w*(?:Error|Exception)(?:\(\w+\))?(?::|$)")
# Exceptions that only say that something else failed, without saying what (or that the
# server was stopped). "Worker failed with error '...'" is not one: it quotes the cause.
_WRAPPER = re.compile(
    r"See root cause above|Engine core initialization failed|EngineCore encountered an issue|"
    r"EngineDeadError|CancelledError|KeyboardInterrupt",
    re.IGNORECASE,
)
_PYDANTIC = re.compile(r"ValidationError: \d+ validation errors? for ")
_ARGPARSE = re.compile(r"[\w./ -]+: error: ")
_TRACEBACK_CODE = re.compile(r'(File "|raise |\^+$)')


_PORT_TAKEN = "Address already in use"


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def port_is_free(host: str, port: int) -> bool:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        try:
            probe.bind((host, port))
        except OSError:
            return False
    return True


def server_error_line(log: str) -> str:
    """The root cause of a failed vLLM process, as one line of at most 400 characters.

    A failed start-up reports one failure several times, outermost last: the worker's
    traceback ("NotImplementedError: FP8 KV cache on CPU requires ..."), the engine core's
    ("RuntimeError: Worker failed with error '...', please check the stack trace above for
    the root cause"), then the API server's ("RuntimeError: Engine core initialization
    failed. See root cause above."). So the last error-like line is the least telling one,
    and the rule looks for the innermost, earliest exception instead. First match wins:

    1. the first exception line an engine-core or worker process logged at ERROR that is
       not a wrapper (what the worker raised comes before whatever re-raises or wraps it);
    2. the first non-wrapper exception line outside vLLM's log format: an uncaught
       exception that ended a process, e.g. "OSError: [Errno 98] Address already in use"
       or a pydantic config error (completed with the field and its complaint);
    3. argparse's "prog: error: ..." (a rejected command-line argument raises nothing);
    4. the last other error-like line, e.g. "Engine core proc EngineCore died unexpectedly"
       after a kill, or an exception the API server logged; vLLM lines below ERROR (such
       as the ulimit warning) and traceback code lines are not causes, so they are skipped;
    5. the first wrapper exception, better than nothing;
    6. the last line: how far a server that is still starting (a timeout) got.

    An exception line comes back bare; other vLLM lines keep "(Process LEVEL)" in front.
    """
    entries: list[tuple[str | None, str | None, str]] = []  # process, level, message
    for raw in log.splitlines():
        line = _ANSI.sub("", raw).strip()
        if not line:
            continue
        prefix = _VLLM_PREFIX.search(line)
        if prefix:
            entries.append((prefix["process"], prefix["level"], prefix["message"].strip()))
        else:
            entries.append((None, None, line))
    if not entries:
        return "(the server wrote nothing)"

    def exception_at(index: int) -> str:
        message = entries[index][2]
        if _PYDANTIC.search(message):  # the field and its complaint follow on their own lines
            details = [detail for _, _, detail in entries[index + 1 : index + 3]]
            message = ": ".join([message, *details]).split(" [type=")[0]
        return message[:400]

    def shown(index: int) -> str:
        process, level, message = entries[index]
        return (message if process is None else f"({process} {level}) {message}")[:400]

    exceptions = [
        index
        for index, (_, level, message) in enumerate(entries)
        if level not in _QUIET_LEVELS and _EXCEPTION.match(message)
    ]
    causes = [index for index in exceptions if not _WRAPPER.search(entries[index][2])]
    for index in causes:  # 1
        process = entries[index][0]
        if process and _ENGINE_PROCESS.search(process):
            return exception_at(index)
    for index in causes:  # 2
        if entries[index][0] is None:
            return exception_at(index)
    for _, _, message in entries:  # 3
        if _ARGPARSE.match(message):
            return message[:400]
    for index in reversed(range(len(entries))):  # 4
        _, level, message = entries[index]
        if level in _QUIET_LEVELS or _TRACEBACK_CODE.match(message) or _WRAPPER.search(message):
            continue
        if _ERROR_LINE.search(message) and not _NOISE.search(message):
            return exception_at(index) if index in causes else shown(index)
    if exceptions:  # 5
        return exception_at(exceptions[0])
    return shown(len(entries) - 1)  # 6


def _speculative(config: ServerConfig) -> dict | None:
    """The configuration's `speculative-config` as a mapping (it may be given as JSON text)."""
    speculative = config.args.get("speculative-config")
    if isinstance(speculative, str) and speculative.startswith("{"):
        speculative = json.loads(speculative)
    return speculative if isinstance(speculative, dict) else None


def with_builtin_drafts(config: ServerConfig) -> ServerConfig:
    """`config` with a `builtin:` speculative draft resolved to its built path."""
    speculative = _speculative(config)
    draft = speculative.get("model") if speculative else None
    if not speculative or not (isinstance(draft, str) and draft.startswith("builtin:")):
        return config
    resolved = {**speculative, "model": demo.resolve_builtin(draft)}
    return dataclasses.replace(config, args={**config.args, "speculative-config": resolved})


def referenced_models(config: ServerConfig) -> list[str]:
    """The models a configuration loads besides its own: the tokenizer and a speculative
    draft (`speculative-config.model`), as paths for builtin names."""
    found = [config.tokenizer] if config.tokenizer else []
    speculative = _speculative(config)
    if speculative and isinstance(speculative.get("model"), str):
        found.append(speculative["model"])
    return [demo.resolve_builtin(m) for m in found]


def vllm_environment(
    model_path: str,
    cpu: bool,
    kv_cache_space_gib: float = 1.0,
    python: str | None = None,
    extra: dict[str, str] | None = None,
    threads_bind: str = "auto",
    other_models: Sequence[str] = (),
) -> dict[str, str]:
    """The environment a vLLM process (server or offline engine) runs with. `other_models`:
    every other model the process loads (a tokenizer, a speculative draft)."""
    env = dict(os.environ)
    env.setdefault("VLLM_NO_USAGE_STATS", "1")
    env.setdefault("VLLM_CACHE_ROOT", str(cache_root() / "vllm-cache"))
    # offline only when nothing is fetched from the hub: a draft or tokenizer given as a hub
    # id must still download
    if all(Path(m).exists() for m in (model_path, *other_models)):
        env.setdefault("HF_HUB_OFFLINE", "1")
    # NVML numbers GPUs in PCI order, CUDA by default fastest first: one order for both, so
    # the GPUs a configuration is given are the ones its energy is read from
    env.setdefault("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
    if cpu:
        # Without an explicit KV space vLLM-CPU sizes memory per NUMA node and fails.
        env.setdefault("VLLM_CPU_KVCACHE_SPACE", f"{kv_cache_space_gib:g}")
        env.setdefault("VLLM_CPU_OMP_THREADS_BIND", threads_bind)
        # vLLM-CPU 0.32 on torch 2.13 saves its compiled model as an AOT artifact that it
        # cannot load again ("'function' object has no attribute 'finalize_loading'"), so
        # every start compiled anew; without AOT the compile cache is read back (a warm
        # start 24.1 s instead of 32.7 s: benchmarks/server_start.py)
        env.setdefault("VLLM_USE_AOT_COMPILE", "0")
        prefix = Path(python or sys.executable).resolve().parent.parent
        iomp = prefix / "lib" / "libiomp5.so"
        if iomp.exists() and "LD_PRELOAD" not in env:
            env["LD_PRELOAD"] = str(iomp)  # bundled Intel OpenMP: faster decode
    env.update(extra or {})
    return env


class LocalVllmServer:
    """`python -m vllm.entrypoints.openai.api_server` (or `vllm serve`) with the config's args."""

    kind = "local"

    def __init__(
        self,
        settings: LocalSettings,
        layout: RunLayout,
        on_status: StatusCallback | None = None,
        served_model_name: str | None = None,
    ):
        self.settings = settings
        self.served_model_name = served_model_name
        self.layout = layout
        self.on_status = on_status or (lambda message: None)
        self._process: ManagedProcess | None = None
        self._log_path: Path | None = None
        self.last_pgid: int | None = None  # the latest server's group, kept after it stops

    @property
    def log_path(self) -> Path | None:
        return self._log_path

    @property
    def pgid(self) -> int | None:
        return self._process.pgid if self._process else None

    def command(self, config: ServerConfig, model_path: str, port: int) -> list[str]:
        python = self.settings.python or sys.executable
        head = (
            [python, "-m", VLLM_MODULE, "--model", model_path]
            if self.settings.launcher == "module"
            else [str(Path(python).parent / "vllm"), "serve", model_path]
        )
        argv = head + ["--host", self.settings.host, "--port", str(port)]
        if self.served_model_name:
            argv += ["--served-model-name", self.served_model_name]
        if config.tokenizer:
            argv += ["--tokenizer", demo.resolve_builtin(config.tokenizer)]
        return argv + with_builtin_drafts(config).command_args()

    def on_cpu(self) -> bool:
        return self.settings.cpu == "on" or (self.settings.cpu == "auto" and not gpu_visible())

    def environment(self, model_path: str, config: ServerConfig | None = None) -> dict[str, str]:
        return vllm_environment(
            model_path,
            self.on_cpu(),
            self.settings.kv_cache_space_gib,
            self.settings.python,
            self.settings.env,
            # pinned: vLLM-CPU's OpenMP threads on exactly those cores
            threads_bind=self.settings.cpus or "auto",
            other_models=referenced_models(config) if config else (),
        )

    def start(self, config: ServerConfig, retry_port: bool = True) -> ServerHandle:
        self.stop()
        model_path = demo.resolve_builtin(config.model)
        port = self.settings.port or free_port(self.settings.host)
        if self.settings.port and not port_is_free(self.settings.host, port):
            raise DeploymentError(
                f"deployment.port {port} on {self.settings.host} is already in use; stop what "
                "listens there, choose another port, or leave port unset for a free one"
            )
        host = f"[{self.settings.host}]" if ":" in self.settings.host else self.settings.host
        base_url = f"http://{host}:{port}"
        self._log_path = self.layout.server_log(config.config_id)
        self._log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log_path.write_bytes(b"")
        argv = self.command(config, model_path, port)
        env = self.environment(model_path, config)
        if not self.on_cpu():
            # the previous server's GPU memory must be free, or vLLM refuses to start
            wait_for_free_gpus(env.get("CUDA_VISIBLE_DEVICES"), on_status=self.on_status)
        try:
            self._process = ManagedProcess(
                argv,
                env=env,
                log_path=self._log_path,
                cpus=parse_cpus(self.settings.cpus) if self.settings.cpus else None,
            )
        except OSError as exc:
            raise DeploymentError(
                f"cannot launch {argv[0]}: {exc.strerror}"
                + ("; check deployment.cpus against this host's CPUs" if self.settings.cpus else "")
            ) from None
        self.last_pgid = self._process.pgid
        launched = time.monotonic()
        try:
            self._wait_healthy(base_url, launched)
        except DeploymentError as exc:
            # the free port was taken between picking it and vLLM binding it (another
            # server starting at the same moment): pick again, once per start
            if self.settings.port or _PORT_TAKEN not in str(exc) or retry_port is False:
                raise
            self.on_status(f"port {port} was taken while vLLM started; starting on another")
            return self.start(config, retry_port=False)
        key = config.args.get("api-key")
        remember(key)
        return ServerHandle(
            base_url=base_url,
            metrics_url=f"{base_url}/metrics",
            served_model=self.served_model_name or model_path,
            # vLLM started with --api-key answers /v1 only with it
            headers={"Authorization": f"Bearer {key}"} if key else {},
            started_s=time.monotonic() - launched,
        )

    def _wait_healthy(self, base_url: str, launched: float) -> None:
        assert self._process is not None
        deadline = launched + self.settings.start_timeout_s
        with httpx.Client(timeout=2.0) as client:
            while True:
                code = self._process.poll()
                if code is not None:
                    log = self.log_text()
                    self.stop()
                    raise DeploymentError(
                        f"vLLM exited with code {code} during start-up: {server_error_line(log)}",
                        log_tail=tail(log),
                    )
                try:
                    if client.get(f"{base_url}/health").status_code == 200:
                        return
                except httpx.HTTPError:
                    pass
                elapsed = time.monotonic() - launched
                if time.monotonic() > deadline:
                    log = self.log_text()
                    self.stop()
                    raise DeploymentError(
                        f"vLLM not healthy after {elapsed:.0f} s (start_timeout_s "
                        f"{self.settings.start_timeout_s:g}); last log line: "
                        f"{server_error_line(log)}",
                        log_tail=tail(log),
                    )
                self.on_status(f"starting vLLM … {elapsed:.0f} s")
                time.sleep(0.5)

    def failure(self) -> str | None:
        """Why the started server is gone (it exited), or None while it runs."""
        if self._process is None:
            return None
        code = self._process.poll()
        if code is None:
            return None
        how = f"signal {signal.Signals(-code).name}" if code < 0 else f"code {code}"
        cause = server_error_line(self.log_text())
        return f"vLLM server exited ({how}) while load was running: {cause}"

    def log_text(self) -> str:
        if self._log_path and self._log_path.exists():
            return self._log_path.read_text(errors="replace")
        return ""

    def stop(self) -> None:
        if self._process is not None:
            self._process.stop()
            self._process = None
