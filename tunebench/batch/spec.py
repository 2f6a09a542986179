"""Batch spec (`sweeps/batch-*.yaml`): a dataset pushed through a model offline.

name: batch-recipes
model: builtin:tiny-llama-random
engine: vllm                     # vllm | transformers | ray
dataset: {path: recipes.jsonl, id_field: id, limit: 200}
prompt:
  mode: completion               # or chat (the model's chat template)
  template: "Extract ... {{ directions | join(' ') }}"
sampling: {temperature: 0, max_tokens: 128}
structured_output: {json_schema: {...}}    # or {choice: [a, b]}
engine_args:
  args: {max-model-len: 1024}
  matrix: {max-num-seqs: [8, 32]}
output: reports
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError, model_validator

from tunebench.errors import SpecError
from tunebench.spec.engine_args import check_server, token_count
from tunebench.spec.file_kind import other_command
from tunebench.spec.loading import describe_validation_error, read_yaml_mapping
from tunebench.spec.models import Quality, Server, Strict
from tunebench.spec.slurm import Slurm

DATASET_SUFFIXES = (".jsonl", ".json", ".csv", ".parquet")


class Dataset(Strict):
    path: str = Field(description="relative to the spec file; .jsonl .json .csv .parquet")
    id_field: str = Field("id", description="the record field that keys its output")
    limit: int | None = Field(None, gt=0, description="only the first N records")

    @model_validator(mode="after")
    def _known_suffix(self) -> "Dataset":
        if not self.path.lower().endswith(DATASET_SUFFIXES):
            raise ValueError(f"path: use a file ending in one of {', '.join(DATASET_SUFFIXES)}")
        return self


class Prompt(Strict):
    mode: Literal["completion", "chat"] = "completion"
    template: str | None = Field(None, description="Jinja2 over the record's fields")
    template_file: str | None = Field(None, description="a Jinja2 file, relative to the spec")
    system: str | None = Field(None, description="chat mode: a system message")

    @model_validator(mode="after")
    def _one_template(self) -> "Prompt":
        if (self.template is None) == (self.template_file is None):
            raise ValueError("give exactly one of template or template_file")
        if self.system is not None and self.mode != "chat":
            raise ValueError("system only applies to mode chat")
        return self


class Sampling(Strict):
    temperature: float = Field(0.0, ge=0)
    top_p: float = Field(1.0, gt=0, le=1)
    max_tokens: int = Field(128, gt=0)
    seed: int | None = 0
    ignore_eos: bool = Field(
        False,
        description="always generate max_tokens (as vllm bench throughput does); for benchmarks",
    )


class StructuredOutput(Strict):
    choice: list[str] | None = Field(None, min_length=1)
    json_schema: dict[str, Any] | None = None
    json_schema_file: str | None = None

    @model_validator(mode="after")
    def _one_kind(self) -> "StructuredOutput":
        given = [
            k for k in ("choice", "json_schema", "json_schema_file") if getattr(self, k) is not None
        ]
        if len(given) != 1:
            raise ValueError("give exactly one of choice, json_schema or json_schema_file")
        return self


class TransformersSettings(Strict):
    batch_size: int = Field(16, gt=0, description="prompts per left-padded generate() call")
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = "auto"


class RaySettings(Strict):
    address: str | None = Field(None, description="a running Ray cluster; None: start a local one")
    concurrency: int = Field(1, gt=0, description="vLLM engine replicas")
    batch_size: int = Field(64, gt=0, description="records per Ray Data batch")


class BatchSpec(Strict):
    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$", max_length=64)
    description: str | None = None
    model: str = Field(min_length=1)
    tokenizer: str | None = None
    engine: Literal["vllm", "transformers", "ray"] = "vllm"
    dataset: Dataset
    prompt: Prompt
    sampling: Sampling = Field(default_factory=Sampling)
    structured_output: StructuredOutput | None = None
    engine_args: Server = Field(default_factory=Server)
    transformers: TransformersSettings = Field(default_factory=TransformersSettings)
    ray: RaySettings = Field(default_factory=RaySettings)
    slurm: Slurm = Field(default_factory=Slurm)
    quality: Quality | None = None  # answers vs a reference configuration (docs/quality.md)
    shards: int = Field(1, ge=1, le=64, description="data-parallel worker processes")
    start_timeout_s: float = Field(1800.0, gt=0, description="per shard, load to last output")
    output: str = "reports"

    @model_validator(mode="after")
    def _engine_fits(self) -> "BatchSpec":
        if self.engine == "transformers" and (self.engine_args.matrix or self.engine_args.variants):
            raise ValueError(
                "engine transformers has no engine args to vary; remove "
                "engine_args.matrix/variants (batch size: transformers.batch_size)"
            )
        if self.engine == "transformers" and self.structured_output is not None:
            raise ValueError("structured_output needs engine vllm or ray")
        if self.quality is not None and self.engine != "vllm":
            raise ValueError("quality needs engine vllm (the engine's own logprobs)")
        if self.quality is not None and self.quality.lm_eval is not None:
            raise ValueError(
                "quality.lm_eval needs a server to ask; a batch engine has none: drop it"
            )
        return self


def load_batch_spec(path: Path) -> tuple[BatchSpec, dict[str, Any]]:
    """Read and validate a batch file: the spec and the mapping as written (for the manifest).

    Every problem is a one-line SpecError naming the file and the key; the dataset and the
    prompts are checked later, by `tunebench.batch.run.render_prompts`.
    """
    path = Path(path)
    data = read_yaml_mapping(path, "batch file", "sweeps/batch-recipes.yaml")
    try:
        spec = BatchSpec.model_validate(data)
    except ValidationError as exc:
        message = other_command(data, path, "batch")  # a sweep file given to batch
        raise SpecError(message or f"{path}: {describe_validation_error(exc, BatchSpec)}") from None
    check_server(spec.engine_args, path, "engine_args")
    _check_room_for_prompts(spec, path)
    if spec.prompt.template is not None:
        from tunebench.batch.dataset import PromptRenderer

        PromptRenderer(spec.prompt.template, f"{path}: prompt.template")
    if spec.structured_output is not None and spec.structured_output.json_schema is not None:
        check_json_schema(
            spec.structured_output.json_schema, f"{path}: structured_output.json_schema"
        )
    return spec, data


def _check_room_for_prompts(spec: BatchSpec, path: Path) -> None:
    server = spec.engine_args
    places = [("engine_args.args", server.args)] + [
        (f"engine_args.variants[{n}].args", v.args) for n, v in enumerate(server.variants)
    ]
    values = [
        (f"{where}.max-model-len", args["max-model-len"])
        for where, args in places
        if "max-model-len" in args
    ]
    values += [
        (f"engine_args.matrix.max-model-len[{n}]", v)
        for n, v in enumerate(server.matrix.get("max-model-len", []))
    ]
    for key, value in values:
        limit = token_count(value)
        if limit is not None and spec.sampling.max_tokens >= limit:
            raise SpecError(
                f"{path}: {key}: max-model-len {value} leaves no room for a prompt besides "
                f"sampling.max_tokens {spec.sampling.max_tokens}; raise max-model-len or lower "
                "max_tokens"
            )


def check_json_schema(schema: Any, where: str) -> None:
    """A SpecError unless `schema` is a valid JSON Schema (draft 2020-12)."""
    import jsonschema

    try:
        jsonschema.Draft202012Validator.check_schema(schema)
    except jsonschema.SchemaError as exc:
        at = "/".join(str(p) for p in exc.absolute_path)
        message = " ".join(exc.message.split())
        if len(message) > 160:
            message = message[:157] + "..."
        raise SpecError(
            f"{where}: not a valid JSON Schema{f' at {at}' if at else ''}: {message}"
        ) from None
