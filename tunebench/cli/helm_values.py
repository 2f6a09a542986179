"""`tunebench helm-values SPEC`: the chart values tunebench generates for a helm sweep."""

from __future__ import annotations

from pathlib import Path

import typer

from tunebench.errors import UsageError


def register(app: typer.Typer) -> None:
    @app.command("helm-values")
    def helm_values(
        spec_path: Path = typer.Argument(
            ..., metavar="SPEC", help="A sweep file with deployment kind helm."
        ),
        output: Path = typer.Option(
            Path("helm-values/generated"),
            "--to",
            "--output",
            "-o",
            metavar="DIR",
            help="Directory for <sweep>-<config>.yaml (not a run root).",
        ),
    ) -> None:
        """Write the complete vllm-kserve values file of every configuration of a helm sweep.

        These are the files `tunebench sweep` installs with `helm upgrade --install`: the
        whole model.args list, model.uri, env, resources and the chart version's quirks.

        Examples:
          tunebench helm-values sweeps/openshift-latency.yaml --to /tmp/values
          helm template x redhat-ai-services/vllm-kserve --version 0.5.11 \\
            -f /tmp/values/openshift-latency-c1.yaml
        """
        from tunebench import assemble
        from tunebench.cli.common import writable_dir
        from tunebench.spec.deployments import HelmSettings
        from tunebench.spec.kserve_chart import chart_values, release_name, render_values_file
        from tunebench.spec.loading import load_spec

        spec = load_spec(spec_path)
        if not isinstance(spec.deployment, HelmSettings):
            raise UsageError(
                f"{spec_path}: deployment.kind is {spec.deployment.kind}; "
                "helm-values needs deployment kind helm"
            )
        plan = assemble.plan(spec, spec_path)
        writable_dir(output, "--to")  # its last level only: a deep path is a typo
        settings = spec.deployment
        release = release_name(settings, spec.name)
        repo = (
            f" --repo {settings.repo}"
            if settings.repo and not settings.chart.startswith(("oci://", "/", ".", "~"))
            else ""
        )
        install = (
            f"helm upgrade --install {release} {settings.chart}{repo} "
            f"--version {settings.chart_version} -n {settings.namespace}"
        )
        for config in plan.configs:
            values = chart_values(
                settings, config, spec.name, spec.served_model_name, spec_path.parent, spec_path
            )
            path = output / f"{spec.name}-{config.config_id}.yaml"
            path.write_text(
                render_values_file(
                    values,
                    [
                        f"vllm-kserve {settings.chart_version} values of {spec.name} "
                        f"{config.config_id} ({config.label}), written by tunebench",
                        f"{install} -f {path}",
                    ],
                )
            )
            typer.echo(f"{path}  {config.label}")
