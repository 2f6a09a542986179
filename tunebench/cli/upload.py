"""`tunebench upload RUN... s3://BUCKET/PREFIX`: copy runs to S3 or MinIO."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from tunebench.cli.common import existing_root, root_of, root_option
from tunebench.errors import UsageError


def register(app: typer.Typer) -> None:
    @app.command("upload")
    def upload(
        items: List[str] = typer.Argument(
            ...,
            metavar="[RUN...] s3://BUCKET/PREFIX",
            help="Runs (path, id or unique part), then the destination.",
        ),
        all_runs: bool = typer.Option(
            False,
            "--all",
            help="Upload everything under --root (every run, comparison JSON, helm values) "
            "instead of named runs.",
        ),
        root: Optional[Path] = root_option(
            "Where runs are stored; with --all, everything under it is uploaded "
            "(default: reports/)."
        ),
        endpoint_url: Optional[str] = typer.Option(
            None,
            "--endpoint-url",
            metavar="URL",
            help="S3-compatible endpoint, e.g. https://minio.example.com "
            "(default: $AWS_ENDPOINT_URL, else AWS).",
        ),
        region: Optional[str] = typer.Option(
            None, "--region", help="Region (default: $AWS_DEFAULT_REGION, else us-east-1)."
        ),
        ca_bundle: Optional[Path] = typer.Option(
            None,
            "--ca-bundle",
            metavar="FILE",
            help="CA certificate(s) for the endpoint's TLS, e.g. MinIO with a self-signed cert "
            "(default: $AWS_CA_BUNDLE, else the system CAs).",
        ),
        verify_tls: bool = typer.Option(
            True,
            "--verify-tls/--no-verify-tls",
            help="--no-verify-tls skips TLS verification (test setups only).",
        ),
        quiet: bool = typer.Option(
            False, "--quiet", "-q", help="No line per file; only the summary."
        ),
    ) -> None:
        """Upload runs to s3://BUCKET/PREFIX/<run-id>/..., from the AWS environment's credentials.

        Credentials: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or AWS_SESSION_TOKEN, an
        AWS profile), never on the command line, never printed. Any failure (no such
        bucket, rejected credentials, unreachable endpoint, TLS) is one line and exit 1.

        Examples:
          tunebench upload cpu-demo s3://benchmarks/tunebench
          tunebench upload --all s3://benchmarks/ci --root /workspace/reports/runs --endpoint-url https://minio.example.com
          AWS_ENDPOINT_URL=http://127.0.0.1:9000 tunebench upload RUN_A RUN_B s3://runs
        """
        from tunebench.store.run import resolve_run
        from tunebench.upload import (
            collect_root,
            collect_runs,
            endpoint_from_env,
            human_size,
            make_client,
            parse_destination,
        )
        from tunebench.upload import upload as put_all

        *runs, destination = items
        root = root_of(root)
        dest = parse_destination(destination)
        if all_runs and runs:
            raise UsageError("give runs or --all, not both")
        if not all_runs and not runs:
            raise UsageError("name the runs to upload before the destination, or use --all")
        if ca_bundle is not None and not ca_bundle.is_file():
            raise UsageError(f"--ca-bundle {ca_bundle}: no such file")
        if all_runs:
            root = existing_root(root)
            found = collect_root(root)
            target = dest.url()
        else:
            paths = [resolve_run(r, root) for r in runs]
            found = collect_runs(paths)
            target = dest.url(paths[0].name) if len(paths) == 1 else dest.url()
        if not found:
            typer.echo(f"nothing to upload: {root} holds no files")
            return
        endpoint = endpoint_url or endpoint_from_env()
        where = endpoint or "AWS S3"
        verify: bool | str = False if not verify_tls else (str(ca_bundle) if ca_bundle else True)
        client = make_client(endpoint, region, verify)
        total = sum(item.size for item in found)
        typer.echo(f"uploading {len(found)} files ({human_size(total)}) to {target} at {where}")
        width = len(str(len(found)))

        def progress(index: int, count: int, item) -> None:
            if not quiet:
                typer.echo(f"[{index:>{width}}/{count}] {item.relative} ({human_size(item.size)})")

        put_all(found, dest, client, where, progress)
        typer.echo(f"uploaded {len(found)} files ({human_size(total)}) to {target}")
