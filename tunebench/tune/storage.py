"""Where a tune run's Optuna study lives: the run's own sqlite file (`<run>/study.db`), or a
shared database that several `tunebench tune` workers add trials to, with a heartbeat per
running trial so that a worker that died leaves a trial another fails and retries
(docs/tuning.md#several-workers-on-one-study). The ask/tell loop is tunebench/tune/study.py.
"""

from __future__ import annotations

import random
import threading
import time
import warnings
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, Literal

import optuna
import sqlalchemy.exc

from tunebench.errors import UsageError
from tunebench.spec.models import Tune
from tunebench.tune.local_search import LocalSearchSampler

STUDY_FILE = "study.db"


# Each objective's values, in order: (the column it reads, which way is better).
Direction = Literal["minimize", "maximize"]
OBJECTIVES: dict[str, tuple[tuple[str, Direction], ...]] = {
    "capacity": (("capacity_rps", "maximize"),),
    "capacity-per-cost": (("requests_per_cost", "maximize"),),
    "throughput": (("output_tok_s", "maximize"),),
    "throughput-latency": (("output_tok_s", "maximize"), ("ttft_p95_ms", "minimize")),
}


def directions(objective: str) -> list[Direction]:
    return [direction for _, direction in OBJECTIVES[objective]]


def objective_names(objective: str) -> list[str]:
    return [name for name, _ in OBJECTIVES[objective]]


def storage_url(run_dir: Path) -> str:
    return f"sqlite:///{(run_dir / STUDY_FILE).resolve()}"


# A shared study fails a trial whose heartbeat stopped for this many heartbeat intervals.
GRACE_HEARTBEATS = 4
SCHEMA_ATTEMPTS = 5


def shared_storage(url: str, tune: Tune) -> optuna.storages.RDBStorage:
    """The RDB storage several workers share, with heartbeats and retries of dead trials.

    A URL the installed drivers cannot open is a UsageError that says what to install."""
    retry: dict[str, Any] = {}
    if tune.retries:
        with warnings.catch_warnings():  # "experimental" since Optuna 2.8; stable in use
            warnings.simplefilter("ignore")
            retry_class = getattr(optuna.storages, "RetryHeartbeatStaleTrialCallback", None)
            if retry_class is not None:  # Optuna >= 4.9
                retry["heartbeat_stale_trial_callback"] = retry_class(max_retry=tune.retries)
            else:
                retry["failed_trial_callback"] = optuna.storages.RetryFailedTrialCallback(
                    max_retry=tune.retries
                )
    for attempt in range(SCHEMA_ATTEMPTS):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                return optuna.storages.RDBStorage(
                    url,
                    heartbeat_interval=max(1, int(tune.heartbeat_s)),
                    grace_period=max(2, int(tune.heartbeat_s * GRACE_HEARTBEATS)),
                    **retry,
                )
        except ImportError:
            raise UsageError(
                f"--storage {url.split(':', 1)[0]}: its database driver is not installed; "
                "for PostgreSQL: pip install 'tunebench[distributed]' (psycopg)"
            ) from None
        except (sqlalchemy.exc.IntegrityError, sqlalchemy.exc.ProgrammingError):
            # workers started together race to create Optuna's tables: one wins, the
            # others find them on the next try
            if attempt == SCHEMA_ATTEMPTS - 1:
                raise
            time.sleep(0.5 + random.random())
    raise AssertionError("unreachable")


def make_sampler(tune: Tune, seed: int | None) -> optuna.samplers.BaseSampler:
    """The study's sampler as the spec names it (benchmarks/tune_efficiency.py grades them)."""
    if tune.sampler == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    # two objectives have no single "best" for the local search to search around: TPE
    if tune.sampler == "tpe" or len(directions(tune.objective)) > 1:
        # Optuna's default TPE (one density per param; a conditional param is modelled from
        # the trials that have it).
        return optuna.samplers.TPESampler(seed=seed, n_startup_trials=tune.startup_trials or 3)
    return LocalSearchSampler(startup=tune.startup_trials or 1, seed=seed)


def open_study(
    run_dir: Path, name: str, tune: Tune, create: bool, storage: str | None = None
) -> optuna.Study:
    """The run's own study (sqlite in the run), or with `storage` a shared one (created by the
    first worker, joined by the others)."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    # a shared study: a seed per worker (workers that proposed alike would claim the same args)
    sampler = make_sampler(tune, seed=tune.seed if storage is None else None)
    if storage is not None:
        return optuna.create_study(
            storage=shared_storage(storage, tune),
            study_name=name,
            directions=directions(tune.objective),
            sampler=sampler,
            load_if_exists=True,
        )
    if create:
        return optuna.create_study(
            storage=storage_url(run_dir),
            study_name=name,
            directions=directions(tune.objective),
            sampler=sampler,
        )
    return optuna.load_study(storage=storage_url(run_dir), study_name=name, sampler=sampler)


def fail_stale(study: optuna.Study) -> None:
    """Fail (and, with retries, enqueue again) trials whose worker stopped beating."""
    with warnings.catch_warnings():  # "experimental" since Optuna 2.9; stable in use
        warnings.simplefilter("ignore")
        optuna.storages.fail_stale_trials(study)


@contextmanager
def heartbeat(study: optuna.Study, trial: optuna.Trial, interval_s: float) -> Iterator[None]:
    """Record the trial's heartbeat every `interval_s` while it runs (shared studies)."""
    storage = study._storage  # Optuna wraps the RDBStorage: ask the wrapper
    get_interval = getattr(storage, "get_heartbeat_interval", None)
    if get_interval is None or not get_interval():
        yield
        return
    stop = threading.Event()

    record = getattr(storage, "record_heartbeat")  # noqa: B009  (RDBStorage has it; checked above)
    record(trial._trial_id)  # before anything else can happen

    def beat() -> None:
        while True:
            try:
                record(trial._trial_id)
            except Exception:  # a lost connection: the next beat may get through
                pass
            if stop.wait(interval_s):
                return

    thread = threading.Thread(target=beat, name="trial-heartbeat", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=10)
