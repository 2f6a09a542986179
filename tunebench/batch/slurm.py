"""`tunebench batch SPEC --slurm PATH`: the same job as an sbatch script for an HPC cluster."""

from __future__ import annotations

import shlex
from pathlib import Path

import jinja2

from tunebench.batch.run import plan_configs
from tunebench.batch.spec import BatchSpec
from tunebench.spec.plan import gpus_per_server

SBATCH = jinja2.Template("""#!/bin/bash
# tunebench batch {{ spec.name }}: written by `tunebench batch {{ spec_path }} --slurm {{ target }}`
#SBATCH --job-name=tunebench-{{ spec.name }}
{% if s.partition %}#SBATCH --partition={{ s.partition }}
{% endif %}#SBATCH --nodes=1
#SBATCH --ntasks=1
#SBATCH --cpus-per-task={{ s.cpus_per_task }}
#SBATCH --mem={{ s.memory }}
#SBATCH --time={{ s.time }}
{% if s.gpus_per_node %}#SBATCH --gres=gpu:{{ s.gpus_per_node }}
{% endif %}#SBATCH --output=tunebench-{{ spec.name }}-%j.log
set -euo pipefail
{% for line in s.setup %}{{ line }}
{% endfor %}cd {{ workdir }}
{% if s.container_image %}srun --container-image={{ s.container_image | q }} {# same line:
#}--container-mounts={{ workdir | q }}:{{ workdir | q }} --container-workdir={{ workdir | q }} \\
  {{ command }}
{% else %}srun {{ command }}
{% endif %}""")


def write_sbatch(spec: BatchSpec, spec_path: Path, target: Path, shards: int) -> Path:
    """One node; one shard per engine's GPUs (`--shards` defaults to the GPUs per node over
    the GPUs one engine holds: tensor x pipeline x data parallel, the largest of the
    configurations)."""
    settings = spec.slurm
    if shards <= 1:
        per_engine = max(gpus_per_server(c.args) for c in plan_configs(spec, spec_path))
        shards = max(1, settings.gpus_per_node // per_engine)
    command = " ".join(
        shlex.quote(p) for p in ["tunebench", "batch", str(spec_path), "--shards", str(shards)]
    )
    environment = SBATCH.environment
    environment.filters["q"] = shlex.quote
    text = SBATCH.render(
        spec=spec,
        s=settings,
        spec_path=spec_path,
        target=target,
        workdir=shlex.quote(str(Path.cwd())),
        command=command,
    )
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text)
    target.chmod(0o755)
    return target
