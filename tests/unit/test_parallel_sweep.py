"""deployment.parallel: the scheduler of configurations measured at a time (slots, repeats,
GPU shares, failures, Ctrl-C), the checks made before anything starts, and the run store
written from several threads."""

from __future__ import annotations

import _thread
import signal
import threading
import time
from pathlib import Path

import pytest

from tunebench import assemble, kinds
from tunebench.deploy.gpu_share import GpuPool, gpus_needed
from tunebench.errors import SpecError
from tunebench.runner import ConfigOutcome
from tunebench.seams.progress import SilentReporter
from tunebench.spec.kserve_chart import config_release
from tunebench.spec.loading import validate_spec
from tunebench.spec.plan import ServerConfig
from tunebench.store.manifest import RunKind
from tunebench.store.run import RunStore, read_points
from tunebench.sweep.parallel import ParallelReporter, measure_in_parallel
from tunebench.sweep.work import WorkItem
from tunebench.tune.session import require_tune


def _config(config_id: str, **args) -> ServerConfig:
    return ServerConfig(config_id, config_id, "m", None, args)


def _items(*configs: ServerConfig, repeats: int = 1) -> list[WorkItem]:
    return [WorkItem(c, [], [], r) for r in range(1, repeats + 1) for c in configs]


class Recorder:
    """A fake measurement: sleeps in short steps (like the runner's waits) and records what
    ran when; `fail` ids come back failed, `raise_in` ids raise."""

    def __init__(self, seconds: float = 0.2, fail=(), raise_in=()):
        self.seconds = seconds
        self.fail, self.raise_in = set(fail), set(raise_in)
        self.lock = threading.Lock()
        self.running: dict[str, tuple] = {}
        self.max_running = 0
        self.overlaps: list[tuple] = []
        self.torn_down: list[str] = []
        self.interrupted: list[str] = []

    def __call__(self, item, slot, reporter) -> ConfigOutcome:
        key = f"{item.config.config_id}#{item.repeat}"
        with self.lock:
            for other, gpus in self.running.values():
                if other == item.config.config_id:
                    self.overlaps.append(("config", other))
                if gpus and slot.gpus and set(gpus) & set(slot.gpus):
                    self.overlaps.append(("gpus", gpus, slot.gpus))
            self.running[key] = (item.config.config_id, slot.gpus)
            self.max_running = max(self.max_running, len(self.running))
        try:
            if item.config.config_id in self.raise_in:
                raise RuntimeError(f"bug while measuring {item.config.config_id}")
            end = time.monotonic() + self.seconds
            while time.monotonic() < end:
                time.sleep(0.01)
            status = "failed" if item.config.config_id in self.fail else "complete"
            return ConfigOutcome(item.config.config_id, status, 0, error=None)
        except KeyboardInterrupt:
            self.interrupted.append(key)
            raise
        finally:
            with self.lock:
                del self.running[key]
                self.torn_down.append(key)


def test_at_most_n_at_a_time_and_every_item_measured_once():
    configs = [_config(f"c{i}") for i in range(1, 7)]
    measure = Recorder(0.3)
    outcomes = measure_in_parallel(_items(*configs), 3, measure, SilentReporter())
    assert sorted(o.config_id for o in outcomes) == [f"c{i}" for i in range(1, 7)]
    # three at once (never more), not six in turn
    assert measure.max_running == 3 and measure.overlaps == []


def test_repeats_of_one_configuration_never_overlap():
    measure = Recorder(0.1)
    outcomes = measure_in_parallel(
        _items(_config("c1"), _config("c2"), repeats=3), 4, measure, SilentReporter()
    )
    assert len(outcomes) == 6 and measure.overlaps == []
    assert measure.max_running == 2  # four slots, but only two configurations


def test_gpus_are_shared_out_by_parallel_size_and_never_twice():
    configs = [
        _config("c1", **{"tensor-parallel-size": 2}),
        _config("c2"),
        _config("c3", **{"tensor-parallel-size": 4}),
        _config("c4", **{"tensor-parallel-size": 2, "pipeline-parallel-size": 1}),
        _config("c5"),
    ]
    seen: dict[str, tuple] = {}

    class Watching(Recorder):
        def __call__(self, item, slot, reporter):
            seen[item.config.config_id] = slot.gpus
            return super().__call__(item, slot, reporter)

    measure = Watching(0.1)
    measure_in_parallel(_items(*configs), 4, measure, SilentReporter(), gpus=["0", "1", "2", "3"])
    assert measure.overlaps == []
    assert {k: len(v) for k, v in seen.items()} == {"c1": 2, "c2": 1, "c3": 4, "c4": 2, "c5": 1}
    assert seen["c3"] == ("0", "1", "2", "3")  # waited until the whole box was free
    assert seen["c1"] == ("0", "1") and seen["c2"] == ("2",)


def test_gpus_needed_multiplies_the_parallel_sizes():
    assert gpus_needed(_config("c")) == 1
    assert (
        gpus_needed(_config("c", **{"tensor-parallel-size": 2, "pipeline-parallel-size": 2})) == 4
    )
    pool = GpuPool(["GPU-a", "GPU-b", "GPU-c"])
    assert pool.take(4) is None and pool.take(2) == ("GPU-a", "GPU-b")
    pool.give_back(("GPU-b",))
    assert pool.take(2) == ("GPU-b", "GPU-c") and pool.free == 0


def test_a_failed_configuration_fails_alone():
    measure = Recorder(0.1, fail={"c2"})
    outcomes = measure_in_parallel(
        _items(*[_config(f"c{i}") for i in range(1, 5)]), 2, measure, SilentReporter()
    )
    assert {o.config_id: o.status for o in outcomes} == {
        "c1": "complete",
        "c2": "failed",
        "c3": "complete",
        "c4": "complete",
    }


def test_an_error_in_one_stops_the_others_after_their_teardown():
    measure = Recorder(5.0, raise_in={"c2"})
    with pytest.raises(RuntimeError, match="bug while measuring c2"):
        measure_in_parallel(
            _items(*[_config(f"c{i}") for i in range(1, 5)]), 3, measure, SilentReporter()
        )
    # c1 and c3 were stopped (interrupted), not waited for (5 s each)
    assert sorted(measure.interrupted) == ["c1#1", "c3#1"]
    assert sorted(measure.torn_down) == ["c1#1", "c2#1", "c3#1"]  # c4 never started
    assert measure.running == {}


def test_ctrl_c_interrupts_every_running_configuration_and_waits_for_each():
    # Python's own SIGINT handler, as the CLI has (a pytest-xdist worker ignores SIGINT)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        _ctrl_c_during_two_configurations()
    finally:
        signal.signal(signal.SIGINT, previous)


def _ctrl_c_during_two_configurations():
    measure = Recorder(10.0)
    threading.Timer(0.5, _thread.interrupt_main).start()  # what Ctrl-C does to the main thread
    with pytest.raises(KeyboardInterrupt):
        measure_in_parallel(
            _items(*[_config(f"c{i}") for i in range(1, 5)]), 2, measure, SilentReporter()
        )
    # both running configurations were interrupted (10 s each otherwise), c3 and c4 never ran
    assert sorted(measure.interrupted) == ["c1#1", "c2#1"]
    assert measure.running == {} and sorted(measure.torn_down) == ["c1#1", "c2#1"]


class Lines(SilentReporter):
    def __init__(self):
        self.lines: list[str] = []

    def note(self, message):
        self.lines.append(message)


def test_the_reporter_names_the_configuration_of_every_line():
    lines = Lines()
    shared = ParallelReporter(lines)

    def worker(config_id):
        shared.config_starting(_config(config_id), 1, 2)
        shared.note("  unverified (no read-back here): max-num-seqs")

    threads = [threading.Thread(target=worker, args=(c,)) for c in ("c1", "c2")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(lines.lines) == [
        "c1: [1/2] c1: starting",
        "c1: unverified (no read-back here): max-num-seqs",
        "c2: [1/2] c2: starting",
        "c2: unverified (no read-back here): max-num-seqs",
    ]


def test_points_written_from_many_threads_are_all_kept_in_plan_order(tmp_path):
    store = RunStore.create(tmp_path, RunKind.SWEEP, "threads", varied_args=[])
    for index in range(1, 9):
        store.update_config(f"c{index}", label=f"c{index}")

    def add(config_id):
        for point in range(20):
            store.add_point({"config_id": config_id, "point_id": f"p{point}", "repeat": 1})
            store.update_config(config_id, points_done=point + 1)

    threads = [threading.Thread(target=add, args=(f"c{i}",)) for i in range(8, 0, -1)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    store.order_points()
    rows = read_points(store.path)
    assert len(rows) == 160
    assert [r["config_id"] for r in rows] == [f"c{i}" for i in range(1, 9) for _ in range(20)]
    assert [r["point_id"] for r in rows[:20]] == [f"p{i}" for i in range(20)]
    assert all(e.points_done == 20 for e in RunStore.open(store.path).manifest.configs)


def _spec(tmp_path: Path, deployment: str, server: str = "{matrix: {max-num-seqs: [2, 4]}}"):
    data = {
        "name": "par",
        "model": "builtin:tiny-llama-random",
        "deployment": __import__("yaml").safe_load(deployment),
        "server": __import__("yaml").safe_load(server),
        "load": {
            "data": {"kind": "synthetic", "prompt_tokens": 8, "output_tokens": 8},
            "profiles": [{"kind": "concurrent", "streams": 1, "max_seconds": 1}],
        },
    }
    path = tmp_path / "par.yaml"
    return validate_spec(data, path), path


def test_local_parallel_without_gpus_is_refused_with_the_fix(tmp_path, monkeypatch):
    monkeypatch.setattr(assemble.environment, "gpus", lambda: [])
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    spec, path = _spec(tmp_path, "{kind: local, parallel: 2}")
    with pytest.raises(SpecError, match="no GPU is visible here.*deployment.gpus"):
        assemble.check_parallel(spec, path, [])
    spec, path = _spec(tmp_path, "{kind: local, parallel: 2, gpus: ['0', '1']}")
    assert assemble.parallel_gpus(spec) == ["0", "1"]


def test_a_configuration_needing_more_gpus_than_shared_out_is_refused(tmp_path):
    spec, path = _spec(
        tmp_path,
        "{kind: local, parallel: 2, gpus: ['0', '1']}",
        "{matrix: {tensor-parallel-size: [1, 4]}}",
    )
    with pytest.raises(SpecError, match=r"c2 .*needs 4 GPUs.*2 are shared out \(0, 1\)"):
        assemble.plan(spec, path)


def test_local_servers_at_once_cannot_share_a_fixed_port(tmp_path):
    spec, path = _spec(tmp_path, "{kind: local, parallel: 2, gpus: ['0', '1'], port: 8000}")
    with pytest.raises(SpecError, match="deployment.port: servers measured at once"):
        assemble.plan(spec, path)


def test_visible_devices_are_the_default_gpu_list(tmp_path, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-a,GPU-b")
    spec, _ = _spec(tmp_path, "{kind: local, parallel: 2}")
    assert assemble.parallel_gpus(spec) == ["GPU-a", "GPU-b"]
    spec, _ = _spec(tmp_path, "{kind: local, parallel: 2, env: {CUDA_VISIBLE_DEVICES: '3,5'}}")
    assert assemble.parallel_gpus(spec) == ["3", "5"]


def test_a_slot_gives_a_local_server_its_gpus_and_a_helm_release_its_own_name(tmp_path):
    spec, path = _spec(tmp_path, "{kind: local, parallel: 2, gpus: ['0', '1', '2']}")
    settings = assemble.resolve_settings(spec, path, tmp_path)
    slotted = kinds.KINDS["local"].for_slot(settings, kinds.Slot("c1", ("1", "2")))
    assert (
        slotted.env["CUDA_VISIBLE_DEVICES"] == "1,2" and "CUDA_VISIBLE_DEVICES" not in settings.env
    )
    helm, helm_path = _spec(
        tmp_path,
        "{kind: helm, chart_version: 0.5.11, namespace: bench, parallel: 3}",
    )
    resolved = assemble.resolve_settings(helm, helm_path, tmp_path)
    assert kinds.KINDS["helm"].for_slot(resolved, kinds.Slot("c2")).release == "tb-par-c2"
    assert resolved.release == "tb-par"


def test_release_names_stay_within_helms_limit():
    assert config_release("tb-latency", "c12") == "tb-latency-c12"
    assert len(config_release("r" * 40, "c999")) <= 53


def test_a_tune_with_parallel_points_to_distributed_workers(tmp_path):
    spec, path = _spec(tmp_path, "{kind: local, parallel: 2, gpus: ['0', '1']}")
    spec = spec.model_copy(update={"tune": object()})
    with pytest.raises(SpecError, match="--storage postgresql://"):
        require_tune(spec, path)


def test_endpoint_has_no_parallel(tmp_path):
    with pytest.raises(SpecError, match="parallel"):
        _spec(tmp_path, "{kind: endpoint, url: 'http://127.0.0.1:1', parallel: 2}")


def test_a_part_of_a_split_sweep_gives_each_configuration_its_own_release(tmp_path, monkeypatch):
    """Parts (`sweep --only`) may run beside each other in one namespace: each configuration
    gets the slot that names its own release, and --keep keeps only the last one; a sweep in
    one go keeps its one release (and --keep its last configuration)."""
    from types import SimpleNamespace

    from tunebench.sweep.run import run_configs

    spec, path = _spec(tmp_path, "{kind: helm, chart_version: 0.5.11, namespace: bench}")
    built: list = []

    class FakeRunner:
        deployment = SimpleNamespace(stop=lambda: None)

        def run(self, config, points, **kwargs):
            return ConfigOutcome(config.config_id, "complete", 0)

    def build_runner(spec, spec_path, store, root, reporter, keep=False, slot=None):
        built.append((slot, keep))
        return FakeRunner()

    monkeypatch.setattr(assemble, "build_runner", build_runner)
    work = _items(_config("c1"), _config("c2"))
    for only, expected in (
        (["c1", "c2"], [(kinds.Slot("c1"), False), (kinds.Slot("c2"), True)]),
        (None, [(None, True)]),
    ):
        built.clear()
        fields = {"only": only} if only else {}
        store = RunStore.create(tmp_path / "runs", RunKind.SWEEP, "part", **fields)
        result = run_configs(spec, path, store, tmp_path, SilentReporter(), work, True, "sweep")
        assert [o.status for o in result.outcomes] == ["complete", "complete"]
        assert built == expected
