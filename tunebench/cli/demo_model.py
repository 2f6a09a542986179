"""`tunebench demo-model`: build the embedded tiny model (cached)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer


def register(app: typer.Typer) -> None:
    @app.command("demo-model")
    def demo_model(
        output: Optional[Path] = typer.Option(
            None, "--output", "-o", help="Where to build it (default: ~/.cache/tunebench/models/)."
        ),
        name: str = typer.Option(
            "tiny-llama",
            "--name",
            metavar="NAME",
            help="Which builtin model: tiny-llama (trained, the default); tiny-llama-draft or "
            "tiny-llama-eagle (its draft model or EAGLE head for speculative decoding); "
            "tiny-llama-w8a8, tiny-llama-w4a16 or tiny-llama-fp8 (its quantized checkpoints); "
            "tiny-llama-random and its -draft, -eagle, -w8a8, -w4a16, -fp8 (random weights: "
            "outputs that carry no information). In a spec: `builtin:NAME`.",
        ),
    ) -> None:
        """Build a builtin model and its tokenizer (the demo sweep serves `tiny-llama`).

        Deterministic, offline, a few seconds; skipped when a finished build is already there.
        The trained model's weights ship with tunebench (docs/trained-model.md); the random
        ones are generated.

        Examples: tunebench demo-model --output /tmp/tiny-llama;
        tunebench demo-model --name tiny-llama-draft;
        tunebench demo-model --name tiny-llama-w4a16
        """
        from tunebench import demo
        from tunebench.errors import UsageError

        if name not in demo.BUILTIN_MODELS:
            raise UsageError(
                f"--name {name}: not a builtin model; use one of {', '.join(demo.BUILTIN_MODELS)}"
            )
        if output is not None:
            from tunebench.cli.common import writable_dir

            writable_dir(output, "--output")  # a typo is one line, not a crash mid-build
        target = output or demo.default_model_path(name)
        existed = demo.is_built(target)
        path = demo.build_demo_model(target, name)
        typer.echo(f"{'already built' if existed else 'built'}: {path}")
