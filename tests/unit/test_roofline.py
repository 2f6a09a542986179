"""The decode roofline: bytes a step reads (from the checkpoint's headers, checked against
an independent count from config.json), the device bandwidth (table or measured), the bound
per point, and the reasons when there is none."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tunebench import demo
from tunebench.assemble import plan
from tunebench.errors import SpecError
from tunebench.kinds import KINDS
from tunebench.points.roofline import Roofline, roofline_columns
from tunebench.roofline.bandwidth import Bandwidth, gpu_bandwidth
from tunebench.roofline.model_bytes import model_bytes
from tunebench.roofline.plan import RooflinePlanner
from tunebench.spec.loading import load_spec
from tunebench.spec.models import RooflineSettings

LOCAL, HELM, RECORDED = (KINDS[k].whereabouts for k in ("local", "helm", "recorded"))

FIXTURES = Path(__file__).parents[1] / "fixtures" / "energy"


@pytest.fixture(scope="module")
def tiny() -> Path:
    return Path(demo.resolve_builtin("builtin:tiny-llama-random"))


def _config(tiny: Path) -> dict:
    return json.loads((tiny / "config.json").read_text())


def test_the_checkpoints_bytes_agree_with_a_count_from_its_config(tiny):
    config = _config(tiny)
    hidden, layers, inter = (
        config["hidden_size"],
        config["num_hidden_layers"],
        config["intermediate_size"],
    )
    heads, kv_heads, head_dim = (
        config["num_attention_heads"],
        config["num_key_value_heads"],
        config["head_dim"],
    )
    per_layer = (
        2 * hidden * heads * head_dim + 2 * hidden * kv_heads * head_dim + 3 * hidden * inter
    )
    per_layer += 2 * hidden  # the two RMSNorm weights
    # the output head is read every step; the input embedding only B rows of it (untied)
    params = layers * per_layer + config["vocab_size"] * hidden + hidden  # + final norm
    counted = model_bytes(tiny)
    assert not isinstance(counted, str)
    assert counted.weight_bytes == 4 * params  # float32 checkpoint
    assert counted.kv_bytes_per_token == 2 * layers * kv_heads * head_dim * 4
    assert counted.source.startswith("safetensors headers")


def test_the_served_dtype_online_quantization_and_kv_dtype_change_the_bytes(tiny):
    full = model_bytes(tiny)
    bf16 = model_bytes(tiny, served_dtype="bfloat16")
    fp8 = model_bytes(tiny, served_dtype="bfloat16", quantization="fp8", kv_cache_dtype="fp8")
    assert not isinstance(full, str) and not isinstance(bf16, str) and not isinstance(fp8, str)
    assert bf16.weight_bytes == full.weight_bytes / 2
    assert bf16.kv_bytes_per_token == full.kv_bytes_per_token / 2
    # linear layers at 1 byte, the head and norms stay at 2
    config = _config(tiny)
    head = config["vocab_size"] * config["hidden_size"] * 2
    assert head < fp8.weight_bytes < bf16.weight_bytes
    assert fp8.weight_bytes == pytest.approx((bf16.weight_bytes - head) / 2 + head, rel=0.01)
    assert fp8.kv_bytes_per_token == bf16.kv_bytes_per_token / 2


def test_without_safetensors_the_estimate_from_config_is_within_a_percent(tiny, tmp_path):
    (tmp_path / "config.json").write_text((tiny / "config.json").read_text())
    estimate = model_bytes(tmp_path, served_dtype="float32")
    exact = model_bytes(tiny)
    assert not isinstance(estimate, str) and not isinstance(exact, str)
    assert estimate.weight_bytes == pytest.approx(exact.weight_bytes, rel=0.01)
    assert "estimate" in estimate.source
    assert "not on this machine" in model_bytes(tmp_path / "missing")


def test_a_mixture_of_experts_counts_the_experts_one_token_uses(tmp_path):
    config = {
        "hidden_size": 64,
        "num_hidden_layers": 1,
        "num_attention_heads": 4,
        "num_key_value_heads": 4,
        "vocab_size": 100,
        "num_local_experts": 8,
        "num_experts_per_tok": 2,
    }
    (tmp_path / "config.json").write_text(json.dumps(config))
    header = {
        "model.layers.0.mlp.experts.0.w1.weight": {
            "dtype": "BF16",
            "shape": [64, 64],
            "data_offsets": [0, 0],
        },
        "lm_head.weight": {"dtype": "BF16", "shape": [100, 64], "data_offsets": [0, 0]},
        "model.embed_tokens.weight": {"dtype": "BF16", "shape": [100, 64], "data_offsets": [0, 0]},
    }
    raw = json.dumps(header).encode()
    (tmp_path / "model.safetensors").write_bytes(len(raw).to_bytes(8, "little") + raw)
    counted = model_bytes(tmp_path)
    assert not isinstance(counted, str)
    assert counted.weight_bytes == 64 * 64 * 2 * (2 / 8) + 100 * 64 * 2


def test_gpu_names_as_nvidia_smi_and_dcgm_print_them_find_their_bandwidth():
    table = (FIXTURES / "nvidia-smi-table-aicr-h100-20260224.txt").read_text()
    assert "NVIDIA H100 80GB HBM3" in table
    names = {
        "NVIDIA H100 80GB HBM3": 3350.0,
        "NVIDIA H100 PCIe": 2000.0,
        "NVIDIA H100 NVL": 3900.0,
        "NVIDIA A100-SXM4-80GB": 2039.0,
        "NVIDIA A100-SXM4-40GB": 1555.0,
        "NVIDIA L4": 300.0,
        "NVIDIA L40S": 864.0,
        "NVIDIA A10G": 600.0,
        "Tesla T4": 320.0,
        "Tesla V100-SXM2-16GB": 900.0,
        "AMD Instinct MI300X": 5300.0,
    }
    for name, gbs in names.items():
        found = gpu_bandwidth(name)
        assert found is not None and found.gbs == gbs, name
    assert gpu_bandwidth("Some Future Accelerator") is None


def test_the_bound_at_a_points_batch_and_context():
    roofline = Roofline(weight_bytes=1e9, kv_bytes_per_token=1e5, bandwidth_gbs=1000.0, note="")
    # batch 1, context 96 (64 prompt + half of 64 output): 1e12 / (1e9 + 9.6e6)
    row = {"achieved_concurrency": 1.0, "prompt_tokens_mean": 64, "output_tokens_mean": 64}
    out = roofline_columns({**row, "output_tok_s": 500.0}, roofline)
    assert out["roofline_decode_tok_s"] == pytest.approx(1e12 / (1e9 + 96 * 1e5), rel=1e-4)
    assert out["roofline_pct"] == pytest.approx(500 / out["roofline_decode_tok_s"] * 100, rel=1e-3)
    # a bigger batch shares the weight reads: the bound grows, less than linearly
    big = roofline_columns({**row, "achieved_concurrency": 8.0}, roofline)
    assert (
        7 * out["roofline_decode_tok_s"]
        < big["roofline_decode_tok_s"]
        < 8 * out["roofline_decode_tok_s"]
    )
    assert roofline_columns({"output_tok_s": 5.0}, roofline)["roofline_pct"] is None


class _Measure:
    def __init__(self):
        self.calls: list[tuple[int, object]] = []

    def __call__(self, size, cpus, log_dir):
        self.calls.append((size, cpus))
        return Bandwidth(50.0, f"measured: {size} bytes")


def test_a_cpu_server_is_measured_once_per_working_set_on_its_cpus(tiny, tmp_path):
    measure = _Measure()
    planner = RooflinePlanner(RooflineSettings(), LOCAL, "0", tmp_path, measure, lambda: [])
    effective = {"dtype": "bfloat16", "kv_cache_dtype": "auto"}
    first, record = planner.for_config("builtin:tiny-llama-random", {}, effective)
    again, _ = planner.for_config("builtin:tiny-llama-random", {"max-num-seqs": 2}, effective)
    assert first is not None and again is not None
    assert len(measure.calls) == 1 and measure.calls[0][1] == {0}
    assert record["bandwidth_gbs"] == 50.0 and record["devices"] == 1
    assert "measured" in record["note"]


def test_a_gpu_server_takes_the_table_times_its_tensor_parallel_gpus(tiny, tmp_path):
    planner = RooflinePlanner(
        RooflineSettings(), LOCAL, None, tmp_path, _Measure(), lambda: ["NVIDIA H100 80GB HBM3"]
    )
    roofline, record = planner.for_config(
        "builtin:tiny-llama-random", {}, {"tensor_parallel_size": 2}
    )
    assert roofline is not None and roofline.bandwidth_gbs == 2 * 3350.0
    assert record["devices"] == 2 and "table: NVIDIA H100 SXM" in record["note"]


def test_remote_servers_need_a_named_device_and_recorded_runs_have_none(tiny, tmp_path):
    helm = RooflinePlanner(RooflineSettings(), HELM, None, tmp_path, _Measure(), lambda: [])
    none, record = helm.for_config("builtin:tiny-llama-random", {}, {})
    assert none is None and "roofline.device" in record["note"]
    named = RooflinePlanner(RooflineSettings(device="L4"), HELM, None, tmp_path, _Measure())
    roofline, _ = named.for_config("builtin:tiny-llama-random", {}, {})
    assert roofline is not None and roofline.bandwidth_gbs == 300.0
    recorded = RooflinePlanner(RooflineSettings(), RECORDED, None, tmp_path, _Measure())
    assert recorded.for_config("builtin:tiny-llama-random", {}, {})[0] is None
    off = RooflinePlanner(RooflineSettings(enabled=False), LOCAL, None, tmp_path, _Measure())
    assert "enabled false" in off.for_config("builtin:tiny-llama-random", {}, {})[1]["note"]


def test_an_unknown_device_is_a_one_line_spec_error(tmp_path):
    spec_path = tmp_path / "s.yaml"
    spec_path.write_text(
        "name: s\nmodel: builtin:tiny-llama-random\ndeployment: {kind: local}\n"
        "load: {data: {kind: synthetic, prompt_tokens: 8, output_tokens: 8}, "
        "profiles: [{kind: concurrent, streams: [1], max_requests: 4}]}\n"
        "roofline: {device: TPU-v9}\n"
    )
    with pytest.raises(SpecError) as error:
        plan(load_spec(spec_path), spec_path)
    message = str(error.value)
    assert "roofline.device" in message and "TPU-v9" in message and "\n" not in message
