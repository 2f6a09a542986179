"""`tunebench sweep SPEC --slurm PATH`: a sweep as a Slurm job array, one task per
configuration, and a merge job that runs after every task has ended.

Three files are written beside each other:

- PATH (e.g. `latency.sbatch`): the array; task i runs `tunebench sweep SPEC --only <id i>`
  into `<output>/parts/<sweep>/<id>/`, on a node of its own with the spec's `slurm:` request;
- `<stem>-merge.sbatch`: `tunebench merge` of every part into one run under `<output>`,
  with its report;
- `<stem>-submit.sh`: submits the array, then the merge with `--dependency=afterany:<array>`
  (a failed configuration fails its task; the merge still joins the others and the run says
  which failed). `bash latency-submit.sh --wait` waits for the merge to end.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path

import jinja2

from tunebench.errors import UsageError
from tunebench.spec.models import SweepSpec
from tunebench.spec.slurm import Slurm

HEADER = jinja2.Template(
    """#!/bin/bash
# tunebench sweep {{ spec.name }}: {{ what }},
# written by `tunebench sweep {{ spec_path }} --slurm {{ target }}`
#SBATCH --job-name=tunebench-{{ spec.name }}{{ suffix }}
{% if s.partition %}#SBATCH --partition={{ s.partition }}
{% endif %}#SBATCH --nodes=1
#SBATCH --ntasks=1
#SBATCH --cpus-per-task={{ cpus }}
#SBATCH --mem={{ memory }}
#SBATCH --time={{ s.time }}
{% for line in extra %}#SBATCH {{ line }}
{% endfor %}set -euo pipefail
{% for line in s.setup %}{{ line }}
{% endfor %}cd {{ workdir }}
""",
    keep_trailing_newline=True,
)

SUBMIT = jinja2.Template(
    """#!/bin/bash
# Submit the sweep {{ spec.name }} to Slurm: the array of {{ count }} configurations, then
# the merge once every task has ended. `--wait`: return when the merge has ended (its exit).
set -euo pipefail
cd {{ workdir }}
array=$(sbatch --parsable {{ array }})
echo "array job ${array%%;*}: {{ count }} configurations"
wait_flag=()
if [ "${1:-}" = "--wait" ]; then wait_flag=(--wait); fi
merge=$(sbatch --parsable "${wait_flag[@]}" --dependency="afterany:${array%%;*}" {{ merge }})
echo "merge job ${merge%%;*}"
""",
    keep_trailing_newline=True,
)


@dataclass(frozen=True)
class SlurmScripts:
    array: Path
    merge: Path
    submit: Path


def _srun(settings: Slurm, workdir: str, command: str) -> str:
    """`command` (shell words, already quoted) as the job's step, in the image if one is set."""
    if settings.container_image:
        return (
            f"srun --container-image={shlex.quote(settings.container_image)} "
            f"--container-mounts={workdir}:{workdir} --container-workdir={workdir} \\\n"
            f"  {command}\n"
        )
    return f"srun {command}\n"


def write_sweep_array(
    spec: SweepSpec, spec_path: Path, config_ids: list[str], target: Path, output: Path
) -> SlurmScripts:
    """The array, merge and submit scripts of a sweep of `config_ids` (plan order)."""
    if len(config_ids) < 2:
        raise UsageError(
            f"{spec_path}: one configuration: run `tunebench sweep {spec_path}` in an sbatch "
            "script of your own; --slurm spreads two or more over an array"
        )
    settings = spec.slurm or Slurm()
    workdir = shlex.quote(str(Path.cwd()))
    parts = output.resolve() / "parts" / spec.name
    merge_path = target.with_name(f"{target.stem}-merge.sbatch")
    submit_path = target.with_name(f"{target.stem}-submit.sh")
    common = {"spec": spec, "s": settings, "spec_path": spec_path, "target": target}
    array = HEADER.render(
        **common,
        what=f"one array task per configuration ({len(config_ids)})",
        suffix="",
        cpus=settings.cpus_per_task,
        memory=settings.memory,
        extra=[
            f"--array=0-{len(config_ids) - 1}",
            *([f"--gres=gpu:{settings.gpus_per_node}"] if settings.gpus_per_node else []),
            f"--output=tunebench-{spec.name}-%A_%a.log",
        ],
        workdir=workdir,
    )
    array += (
        f"ids=({' '.join(config_ids)})\n"
        "id=${ids[$SLURM_ARRAY_TASK_ID]}\n"
        f'mkdir -p {shlex.quote(str(parts))}/"$id"\n'
        "# a failed configuration ends its task non-zero; the merge runs after every task\n"
    )
    q = shlex.quote
    array += _srun(
        settings,
        workdir,
        f'tunebench sweep {q(str(spec_path))} --only "$id" --root {q(str(parts))}/"$id" '
        "--no-report",
    )
    merge = HEADER.render(
        **common,
        what="the merge of every configuration's part",
        suffix="-merge",
        cpus=1,
        memory="4G",
        extra=[f"--output=tunebench-{spec.name}-merge-%j.log"],
        workdir=workdir,
    )
    merge += f"parts=({q(str(parts))}/*/*/)\n"
    merge += _srun(
        settings, workdir, f'tunebench merge "${{parts[@]}}" --root {q(str(output.resolve()))}'
    )
    submit = SUBMIT.render(
        spec=spec,
        count=len(config_ids),
        workdir=workdir,
        array=shlex.quote(str(target.resolve())),
        merge=shlex.quote(str(merge_path.resolve())),
    )
    target.parent.mkdir(parents=True, exist_ok=True)
    for path, text in ((target, array), (merge_path, merge), (submit_path, submit)):
        path.write_text(text)
        path.chmod(0o755)
    return SlurmScripts(target, merge_path, submit_path)
