"""The `slurm:` section shared by batch and sweep files: what an sbatch script asks for."""

from __future__ import annotations

from pydantic import Field

from tunebench.spec.base import Strict


class Slurm(Strict):
    """One job (batch) or one array task per configuration (sweep) on one node."""

    partition: str | None = None
    gpus_per_node: int = Field(1, ge=0)
    cpus_per_task: int = Field(8, gt=0)
    memory: str = "64G"
    time: str = "04:00:00"
    container_image: str | None = Field(None, description="run inside this image (pyxis/enroot)")
    setup: list[str] = Field(
        default_factory=list, description="shell lines before the job, e.g. module load"
    )
