"""What a study found: best configuration, gain over the baseline, importances, exports."""

from __future__ import annotations

import json
import shlex
import warnings
from pathlib import Path
from typing import Any

import optuna
import yaml

from tunebench.points.records import TrialRecord
from tunebench.redact import redact, redact_text
from tunebench.spec.kserve_chart import chart_args
from tunebench.spec.plan import engine_arg_list
from tunebench.store.files import write_atomic
from tunebench.store.run import RunStore
from tunebench.tune.claims import BASELINE_ATTR
from tunebench.tune.storage import objective_names

COMPLETE = optuna.trial.TrialState.COMPLETE


def _deployed_complete(study: optuna.Study) -> list[optuna.trial.FrozenTrial]:
    return [
        t
        for t in study.get_trials(deepcopy=False)
        if t.state == COMPLETE and t.user_attrs.get("deployed")
    ]


def trial_row(trial: optuna.trial.FrozenTrial) -> TrialRecord:
    attrs = trial.user_attrs
    return {
        "trial": trial.number,
        "config_id": attrs.get("config_id"),
        "state": trial.state.name,
        "baseline": bool(attrs.get(BASELINE_ATTR)),
        "params": dict(attrs.get("param_values", trial.params)),
        "values": list(trial.values) if trial.values else None,
        "note": attrs.get("fail_reason")
        or attrs.get("pruned_reason")
        or (f"same args as trial {attrs['repeat_of']}" if "repeat_of" in attrs else "")
        or attrs.get("hint", ""),
    }


CAPACITY_ATTRS = ("converged", "capped", "client_bound", "upper", "drift")


def capacity_of(trial: optuna.trial.FrozenTrial) -> dict[str, Any]:
    """The capacity search's own flags of a trial (empty for a throughput objective)."""
    attrs = trial.user_attrs
    if "capacity_rps" not in attrs:
        return {}
    return {"rate": attrs["capacity_rps"], **{k: attrs.get(k) for k in CAPACITY_ATTRS}}


def importances(study: optuna.Study) -> dict[str, float]:
    """PED-ANOVA importances (no scikit-learn needed) of the first objective; {} if too few."""
    trials = [t for t in _deployed_complete(study) if t.params]
    if len(trials) < 3 or not {k for t in trials for k in t.params}:
        return {}
    try:
        with warnings.catch_warnings():  # "may be inaccurate" with few trials: it is shown as is
            warnings.simplefilter("ignore")
            return dict(
                optuna.importance.get_param_importances(
                    study,
                    target=lambda t: t.values[0],
                    evaluator=optuna.importance.PedAnovaImportanceEvaluator(),
                )
            )
    except (RuntimeError, ValueError, ZeroDivisionError):
        return {}


def summarize(study: optuna.Study, objective: str) -> dict[str, Any]:
    names = objective_names(objective)
    trials = study.get_trials(deepcopy=False)
    deployed = _deployed_complete(study)
    baseline = next((t for t in trials if t.user_attrs.get(BASELINE_ATTR)), None)
    out: dict[str, Any] = {
        "objective": objective,
        "objective_names": names,
        "trials": [trial_row(t) for t in trials],
        "deployments": sum(1 for t in trials if t.user_attrs.get("deployed")),
        "failed": sum(
            1
            for t in trials
            if t.state == optuna.trial.TrialState.FAIL and t.user_attrs.get("deployed")
        ),
        "pruned": sum(1 for t in trials if t.state == optuna.trial.TrialState.PRUNED),
        "baseline": trial_row(baseline) if baseline else None,
        "best": None,
        "pareto": [],
        "improvement_pct": None,
        "importances": importances(study),
    }
    if not deployed:
        return out
    if len(names) == 1:
        best = max(deployed, key=lambda t: t.values[0])
        out["best"] = trial_row(best)
        out["best"]["args"] = best.user_attrs.get("args", {})
        capacity = capacity_of(best)
        if capacity:
            # what the search behind the best value proved: a capped, client-bound or
            # unconverged search gives only a lower bound (analysis/best.py capacity_bound)
            out["best"]["capacity"] = capacity
        if baseline is not None and baseline.state == COMPLETE and baseline.values[0] > 0:
            out["improvement_pct"] = 100.0 * (best.values[0] / baseline.values[0] - 1)
    else:
        front = [t for t in study.best_trials if t.user_attrs.get("deployed")]
        out["pareto"] = [
            {**trial_row(t), "args": t.user_attrs.get("args", {})}
            for t in sorted(front, key=lambda t: -t.values[0])
        ]
        out["best"] = out["pareto"][0] if out["pareto"] else None
    return out


def vllm_serve_command(model: str, args: dict[str, Any]) -> str:
    return " ".join(shlex.quote(part) for part in ["vllm", "serve", model, *engine_arg_list(args)])


def tuned_values_file(model: str, args: dict[str, Any], header: list[str]) -> str:
    """A vllm-kserve values file of the best args (model.args; model.uri for a hub id)."""
    values: dict[str, Any] = {"model": {"args": chart_args(args)}}
    is_hub_id = "/" in model and not model.startswith(("/", ".", "~", "builtin:"))
    if is_hub_id:
        values["model"]["uri"] = f"hf://{model}"
    comments = [f"# {line}" for line in header]
    if not is_hub_id:
        comments.append(
            "# set model.uri to where the cluster finds this model (oci://, pvc://, s3://, hf://)"
        )
    return "\n".join(comments) + "\n" + yaml.safe_dump(values, sort_keys=False, width=1000)


def write_exports(
    summary: dict[str, Any], model: str, store: RunStore, name: str, helm_dir: Path, slo_text: str
) -> dict[str, str]:
    """helm-values/<name>.yaml, <run>/serve-command.sh and <run>/tune-result.json."""
    run_id = store.run_id
    best = summary.get("best")
    files: dict[str, str] = {}
    if best is not None:
        args = best["args"]
        value = ", ".join(
            f"{n} {v:.4g}" for n, v in zip(summary["objective_names"], best["values"])
        )
        header = [f"tunebench tune {run_id}: best configuration, trial {best['trial']} ({value})"]
        if slo_text:
            header.append(f"SLO: {slo_text}")
        if summary.get("improvement_pct") is not None:
            header.append(f"{summary['improvement_pct']:+.1f}% over the baseline (vLLM defaults)")
        header.append(f"helm upgrade --install {name} vllm-kserve -f {helm_dir / (name + '.yaml')}")
        helm_dir.mkdir(parents=True, exist_ok=True)
        helm_path = helm_dir / f"{name}.yaml"
        write_atomic(helm_path, redact_text(tuned_values_file(model, args, header)))
        files["helm_values"] = str(helm_path)
        command = vllm_serve_command(model, args)
        store.write_text(store.layout.serve_command, f"#!/bin/sh\n# {header[0]}\n{command}\n")
        files["serve_command"] = command
    store.write_text(
        store.layout.tune_result,
        json.dumps(redact({**summary, "exports": files}), indent=2, default=str),
    )
    return files
