"""The quality check as a step before a configuration's load (seams/before_load.py): greedy
completions with logprobs from the ready server, then lm-eval when the spec asks for it.
What it collects is judged later (quality/divergence.py, quality/verdicts.py)."""

from __future__ import annotations

from tunebench.errors import LoadError
from tunebench.points.records import LmEvalRecord, QualityRecord
from tunebench.quality.collect import QualityRequest, collect, write_completions
from tunebench.quality.lmeval import run_lm_eval
from tunebench.quality.verdicts import gate_failure
from tunebench.redact import redact_text
from tunebench.seams.deployment import ServerHandle
from tunebench.seams.progress import Reporter
from tunebench.spec.plan import ServerConfig
from tunebench.store.run import RunStore


class QualityCheck:
    def __init__(
        self,
        store: RunStore,
        reporter: Reporter,
        request: QualityRequest,
        gates_load: bool = False,
    ):
        self.store = store
        self.reporter = reporter
        self.request = request
        # A tune: a trial that fails the gate is infeasible whatever its speed, so its load
        # is not measured (it would cost time and tell nothing).
        self.gates_load = gates_load

    def run(self, config: ServerConfig, handle: ServerHandle, repeat: int) -> str | None:
        """The check, then (with `gates_load`) "quality gate: <why>" when the configuration
        fails the gate: its load is then not measured."""
        self._collect(config, handle, repeat)
        if not self.gates_load:
            return None
        failed = gate_failure(self.store, config.config_id)
        return f"quality gate: {failed}" if failed else None

    def _collect(self, config: ServerConfig, handle: ServerHandle, repeat: int) -> None:
        """The quality check's completions, before any load point (its time is recorded and
        is in no point's window). A failure is recorded on the configuration and the load
        points still run: speed is measured either way, the gate judges later."""
        request, config_id = self.request, config.config_id
        if repeat > 1:
            return
        path = self.store.layout.quality(config_id)
        entry = self.store.manifest.config(config_id)  # the runner recorded it as it started
        if entry is not None and (entry.quality or {}).get("prompts"):
            return  # an earlier attempt of a resumed run collected them
        self.reporter.note(
            f"  quality check: {len(request.prompts)} prompts x {request.max_tokens} greedy tokens"
        )
        try:
            got = collect(
                handle.base_url,
                handle.served_model,
                request.prompts,
                request.max_tokens,
                request.top_logprobs,
                handle.headers,
                handle.tls,
                max_seconds=request.max_seconds,
                on_completion=lambda so_far: write_completions(path, so_far),
            )
        except LoadError as exc:
            self.store.update_config(config_id, quality={"error": redact_text(str(exc))})
            self.reporter.note(f"  [yellow]quality check failed:[/] {exc}")
            return
        write_completions(path, got.completions)
        failed = sum(1 for c in got.completions if c.error)
        summary: QualityRecord = {
            "prompts": len(got.completions),
            "max_tokens": request.max_tokens,
            "top_logprobs": request.top_logprobs,
            "seconds": round(got.seconds, 2),
            "failed": failed,
        }
        self.store.update_config(config_id, quality=summary)
        if request.lm_eval is not None and request.tokenizer is not None:
            summary["lm_eval"] = self._lm_eval(config, handle, request)
            self.store.update_config(config_id, quality=summary)

    def _lm_eval(
        self, config: ServerConfig, handle: ServerHandle, request: QualityRequest
    ) -> LmEvalRecord:
        assert request.lm_eval is not None and request.tokenizer is not None
        task = request.lm_eval.task
        self.reporter.note(f"  lm-eval: {task} (limit {request.lm_eval.limit})")
        try:
            result = run_lm_eval(
                request.lm_eval,
                handle.base_url,
                handle.served_model,
                request.tokenizer(config),
                self.store.layout.lm_eval_dir(config.config_id),
                handle.api_key,
            )
        except LoadError as exc:
            self.reporter.note(f"  [yellow]lm-eval failed:[/] {exc}")
            return {"task": task, "error": redact_text(str(exc))}
        self.reporter.note(
            f"  lm-eval: {result.metric} {result.score:.3f} ({result.seconds:.0f} s)"
        )
        return {
            "task": result.task,
            "metric": result.metric,
            "score": result.score,
            "stderr": result.stderr,
            "samples": result.samples,
            "seconds": result.seconds,
        }
