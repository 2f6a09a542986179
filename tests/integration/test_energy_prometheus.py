"""The DCGM energy path against a real Prometheus (Debian's, installed by
scripts/setup-test-deps.sh) scraping, on loopback, recorded DCGM exporter output of an
8 x H100 node (tests/fixtures/energy: one capture with a vLLM pod on gpu 6, one of the same
GPUs idle five days later). The exporter switches captures half-way and logs what it served
at each scrape: the expected energy comes from that log, not from the meter."""

from __future__ import annotations

import shutil
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest

from tunebench.deploy.local import free_port
from tunebench.energy.dcgm import DcgmMeter
from tunebench.metrics.parse import parse_samples
from tunebench.points.energy import EnergyReading
from tunebench.processes import ManagedProcess

FIXTURES = Path(__file__).parents[1] / "fixtures" / "energy"
BUSY = (FIXTURES / "dcgm-aicr-h100x8-vllm-20260219.prom").read_text()
IDLE = (FIXTURES / "dcgm-aicr-h100x8-idle-20260224.prom").read_text()
NODE = 'Hostname="ip-100-64-171-120.ec2.internal"'
VLLM_POD = 'pod="vllm-agg-0-vllmdecodeworker-5fljt"'
SCRAPE_S = 0.5


def _power(text: str) -> dict[str, float]:
    """gpu -> watts, and the pod's gpu under the key 'pod' (the capture's own numbers)."""
    out = {}
    for labels, value in parse_samples(text)["DCGM_FI_DEV_POWER_USAGE"]:
        out[labels["gpu"]] = value
        if labels.get("pod"):
            out["pod"] = value
    return out


class Exporter:
    """Serves one capture or the other; logs (time, capture) of every scrape."""

    def __init__(self):
        self.text = BUSY
        self.served: list[tuple[float, str]] = []
        exporter = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                body = exporter.text.encode()
                exporter.served.append((time.time(), exporter.text))
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def count(self, text: str) -> int:
        return sum(served == text for _, served in self.served)

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def wait_until(condition, what: str, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def newest_sample(url: str) -> float:
    """The time of the newest power sample Prometheus holds (0 before the first)."""
    answer = httpx.get(
        f"{url}/api/v1/query", params={"query": "max(timestamp(DCGM_FI_DEV_POWER_USAGE))"}
    ).json()
    result = answer.get("data", {}).get("result", [])
    return float(result[0]["value"][1]) if result else 0.0


def start_prometheus(binary: str, work, attempts: int = 3):
    """Prometheus on a free port, ready; picked again when another process took the port
    between picking it and Prometheus binding it."""
    for attempt in range(attempts):
        port = free_port()
        log = work / f"prometheus-{attempt}.log"
        process = ManagedProcess(
            [
                binary,
                f"--config.file={work / 'prometheus.yml'}",
                f"--storage.tsdb.path={work / 'data'}",
                f"--web.listen-address=127.0.0.1:{port}",
            ],
            log_path=log,
        )
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and process.poll() is None:
            try:
                if httpx.get(f"{url}/-/ready", timeout=1).status_code == 200:
                    return process, url
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        process.stop()
        if "address already in use" not in log.read_text():
            raise AssertionError(f"prometheus did not become ready: {log.read_text()[-2000:]}")
    raise AssertionError(f"prometheus found no free port in {attempts} tries")


@pytest.fixture(scope="module")
def scraped(tmp_path_factory):
    """A Prometheus that scraped the exporter for ~3 s of each capture: (url, exporter)."""
    binary = shutil.which("prometheus")
    assert binary, "Debian's prometheus is missing: run scripts/setup-test-deps.sh"
    work = tmp_path_factory.mktemp("prometheus")
    exporter = Exporter()
    (work / "prometheus.yml").write_text(
        "global:\n"
        f"  scrape_interval: {int(SCRAPE_S * 1000)}ms\n"
        f"  scrape_timeout: {int(SCRAPE_S * 800)}ms\n"
        "scrape_configs:\n"
        "  - job_name: dcgm\n"
        "    honor_labels: true\n"
        f"    static_configs: [{{targets: ['127.0.0.1:{exporter.port}']}}]\n"
    )
    process, url = start_prometheus(binary, work)
    per_capture = round(3.0 / SCRAPE_S)  # about 3 s of scrapes of each capture
    try:
        wait_until(lambda: exporter.count(BUSY) >= per_capture + 1, "the busy scrapes")
        exporter.text = IDLE
        wait_until(lambda: exporter.count(IDLE) >= per_capture, "the idle scrapes")
        last = exporter.served[-1][0]
        # the last scrape is in the database: Prometheus answers with a sample that new
        wait_until(lambda: newest_sample(url) >= last - SCRAPE_S / 2, "the last scrape stored")
        yield url, exporter
    finally:
        process.stop()
        exporter.close()


def _expected(exporter: Exporter, start: float, end: float, key: str | None) -> float:
    """Mean power of the scrapes served inside the window (per GPU, summed) x its length."""
    inside = [text for when, text in exporter.served if start <= when <= end]
    per_gpu: dict[str, list[float]] = {}
    for text in inside:
        for gpu, watts in _power(text).items():
            if (key is None and gpu != "pod") or gpu == key:
                per_gpu.setdefault(gpu, []).append(watts)
    return sum(sum(v) / len(v) for v in per_gpu.values()) * (end - start)


def test_a_window_across_the_change_of_load_counts_every_gpu_of_the_node(scraped):
    url, exporter = scraped
    first, last = exporter.served[1][0], exporter.served[-1][0]
    start, end = first + 1.0, last - 1.0
    meter = DcgmMeter(url, NODE)
    reading = meter.window(start, end)
    meter.stop()
    assert isinstance(reading, EnergyReading), reading
    expected = _expected(exporter, start, end, None)
    assert reading.joules == pytest.approx(expected, rel=0.02)
    assert reading.devices == "8 GPU(s) (NVIDIA H100 80GB HBM3)"
    # the busy capture's vLLM GPU draws more than the idle one: the window saw both
    assert _power(BUSY)["6"] > _power(IDLE)["6"] + 30
    # one reading per scrape the exporter served inside the window (an edge may fall out)
    served = sum(1 for when, _ in exporter.served if start <= when <= end)
    assert served - 1 <= reading.samples <= served + 1


def test_the_selector_keeps_only_the_servers_pod(scraped):
    url, exporter = scraped
    busy_times = [when for when, text in exporter.served if text is BUSY]
    start, end = busy_times[1], busy_times[-1]
    meter = DcgmMeter(url, VLLM_POD)
    reading = meter.window(start, end)
    meter.stop()
    assert isinstance(reading, EnergyReading), reading
    assert reading.devices == "1 GPU(s) (NVIDIA H100 80GB HBM3)"
    assert reading.mean_watts == pytest.approx(_power(BUSY)["pod"], rel=0.001)
    assert reading.joules == pytest.approx(_expected(exporter, start, end, "pod"), rel=0.01)


def test_too_few_samples_or_a_selector_that_matches_nothing_is_a_reason(scraped):
    url, exporter = scraped
    when = exporter.served[3][0]
    meter = DcgmMeter(url, NODE)
    short = meter.window(when + 0.05, when + 0.3)  # no scrape inside
    assert isinstance(short, str) and "at least 2 are needed" in short
    nothing = DcgmMeter(url, 'namespace="no-such-namespace"').window(when, when + 2)
    assert isinstance(nothing, str) and "no DCGM_FI_DEV_POWER_USAGE" in nothing
    meter.stop()
