"""Offline vs online: a batch run's throughput against a sweep's, same model and engine args.

The batch engine pushes every request at once; a server adds HTTP, tokenization in the API
process, streaming and scheduling gaps. For each batch configuration, the sweep
configuration with the same model and engine args is found, and its best measured output
tok/s (over its load points) is set against the batch's: ratio = serving / offline.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tunebench.errors import UsageError
from tunebench.numbers import to_float
from tunebench.spec.plan import args_key
from tunebench.store.manifest import RunKind
from tunebench.store.run import RunStore


def is_batch_run(path: Path) -> bool:
    return RunStore.open(path).kind is RunKind.BATCH


def serving_overhead(batch_path: Path, sweep_path: Path) -> list[dict[str, Any]]:
    batch, sweep = RunStore.open(batch_path), RunStore.open(sweep_path)
    rows = []
    for config in batch.manifest.configs:
        offline = next((r for r in batch.rows if r["config_id"] == config.config_id), None)
        if offline is None:
            continue
        twins = [
            c
            for c in sweep.manifest.configs
            if args_key(c.args) == args_key(config.args)
            and Path(str(c.model)).name == Path(str(config.model)).name
        ]
        for twin in twins:
            measured = [
                (tok_s, r)
                for r in sweep.rows
                if r["config_id"] == twin.config_id
                and (tok_s := to_float(r.get("output_tok_s"))) is not None
            ]
            if not measured:
                continue
            online_tok_s, best = max(measured, key=lambda pair: pair[0])
            offline_tok_s = to_float(offline["output_tok_s"])
            rows.append(
                {
                    "config": config.label,
                    "sweep_config": twin.label,
                    "offline_tok_s": offline_tok_s,
                    "online_tok_s": online_tok_s,
                    "online_point": best["point_id"],
                    "ratio": online_tok_s / offline_tok_s if offline_tok_s else None,
                }
            )
    if not rows:
        raise UsageError(
            f"no configuration of {sweep_path.name} has the model and engine args of "
            f"one in {batch_path.name}; compare runs of the same model and args"
        )
    return rows
