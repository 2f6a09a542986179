"""Every path inside a run directory: the one place that spells the run format's file names.

    reports/<run-id>/
      manifest.json               the typed manifest (store/manifest.py)
      points.csv                  one row per configuration x load point (points/columns.py)
      requests/<config>.csv       per-request samples of every point of a configuration
      metrics/<config>.csv        the /metrics time series scraped during that configuration
      quality/<config>.jsonl      the quality check's greedy completions with top logprobs
      quality/lm-eval-<config>/   lm-eval's task, log and results for that configuration
      quality/summary.csv         the quality table: each configuration vs its reference
      cross-check/table.csv, cross-check/verdicts.csv   load.driver cross-check: the two
                                  drivers' disagreement per point and metric, and verdicts
      logs/server-<config>.log    the server log (secrets redacted); earlier attempts of a
                                  resumed run keep theirs as server-<config>.attempt<N>.log,
                                  earlier repeats as server-<config>.repeat<N>.log
      logs/helm-values-<config>.yaml, logs/helm-commands.log   helm kind: values and calls
      guidellm/<config>[-repeatN][-attemptN]/  the GuideLLM job, its log, raw point reports
      batch/<config>/ outputs/<config>.jsonl   batch runs: shard work and merged outputs
      study.db tune-result.json serve-command.sh   tune runs
      report.html                 the self-contained report
      .lock                       held by the process writing the run

docs/run-format.md describes the contents; readers go through `RunLayout` (and
analysis/frames.py), never through literal names.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

MANIFEST = "manifest.json"


@dataclass(frozen=True)
class RunLayout:
    root: Path  # the run directory itself

    @property
    def manifest(self) -> Path:
        return self.root / MANIFEST

    @property
    def points(self) -> Path:
        return self.root / "points.csv"

    @property
    def lock(self) -> Path:
        return self.root / ".lock"

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    def quality(self, config_id: str) -> Path:
        return self.root / "quality" / f"{config_id}.jsonl"

    @property
    def quality_table(self) -> Path:
        return self.root / "quality" / "summary.csv"

    @property
    def cross_check_table(self) -> Path:
        return self.root / "cross-check" / "table.csv"

    @property
    def cross_check_verdicts(self) -> Path:
        return self.root / "cross-check" / "verdicts.csv"

    def lm_eval_dir(self, config_id: str) -> Path:
        return self.root / "quality" / f"lm-eval-{config_id}"

    @property
    def report(self) -> Path:
        return self.root / "report.html"

    @property
    def study(self) -> Path:
        return self.root / "study.db"

    @property
    def tune_result(self) -> Path:
        return self.root / "tune-result.json"

    @property
    def serve_command(self) -> Path:
        return self.root / "serve-command.sh"

    @property
    def requests_dir(self) -> Path:
        return self.root / "requests"

    def requests(self, config_id: str) -> Path:
        return self.requests_dir / f"{config_id}.csv"

    def series(self, config_id: str) -> Path:
        return self.root / "metrics" / f"{config_id}.csv"

    def machine(self, config_id: str) -> Path:
        """The machine under a configuration: probe and telemetry samples over time."""
        return self.root / "machine" / f"{config_id}.csv"

    def server_log(
        self, config_id: str, attempt: int | None = None, repeat: int | None = None
    ) -> Path:
        """The log of a configuration's server now; with `attempt` or `repeat`, where an
        earlier attempt's (a resumed run) or repeat's log was kept."""
        suffix = f".attempt{attempt}" if attempt else (f".repeat{repeat}" if repeat else "")
        return self.logs / f"server-{config_id}{suffix}.log"

    @property
    def tuned_values_dir(self) -> Path:
        """Where `tune` writes the tuned vllm-kserve values file (unless --helm-dir)."""
        return self.root / "helm-values"

    def helm_values(self, config_id: str) -> Path:
        return self.logs / f"helm-values-{config_id}.yaml"

    @property
    def helm_commands(self) -> Path:
        return self.logs / "helm-commands.log"

    def load_dir(self, config_id: str, attempt: int = 1, repeat: int = 1) -> Path:
        suffix = (f"-repeat{repeat}" if repeat > 1 else "") + (
            f"-attempt{attempt}" if attempt > 1 else ""
        )
        return self.root / "guidellm" / f"{config_id}{suffix}"

    def raw_report(self, config_id: str, index: int) -> Path:
        """Where runs written before points.csv had `raw_report` kept point `index`'s report."""
        return self.root / "guidellm" / config_id / "benchmarks" / f"{index:03d}.json"

    def batch_dir(self, config_id: str) -> Path:
        return self.root / "batch" / config_id

    def outputs(self, config_id: str) -> Path:
        return self.root / "outputs" / f"{config_id}.jsonl"

    def relative(self, path: Path) -> str:
        """`path` as stored in the run's own files (relative to the run directory)."""
        return Path(path).relative_to(self.root).as_posix()


def is_run(path: Path) -> bool:
    return (Path(path) / MANIFEST).is_file()
