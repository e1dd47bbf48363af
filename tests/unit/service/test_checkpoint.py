"""Checkpoint facts and the KV-cache guard on small model directories written by the tests.

Shapes follow field report F-B13 (ModelOpt NVFP4 hf_quant_config.json declaring FP8 KV) and the safetensors
format (8-byte little-endian header length, JSON header, data).
"""

import json
import struct

import pytest

from ansible_collections.blackwell.sglang.plugins.module_utils import _checkpoint as ck

LAYERS = 2


def tensor_names(with_scales, combined=False):
    names = ["model.embed_tokens.weight", "lm_head.weight"]
    for layer in range(LAYERS):
        base = "model.layers.%d.self_attn" % layer
        names += ["%s.q_proj.weight" % base, "%s.k_proj.weight" % base, "%s.v_proj.weight" % base,
                  "%s.k_proj.weight_scale" % base, "%s.k_proj.input_scale" % base]
        if with_scales and not combined:
            names += ["%s.k_proj.k_scale" % base, "%s.v_proj.v_scale" % base]
        if with_scales and combined:
            names += ["%s.kv_scale" % base]
    return names


def write_shard(path, names):
    """A valid safetensors file: one float32 scalar per tensor."""
    header, offset = {"__metadata__": {"format": "pt"}}, 0
    for name in names:
        header[name] = {"dtype": "F32", "shape": [1], "data_offsets": [offset, offset + 4]}
        offset += 4
    raw = json.dumps(header).encode()
    raw += b" " * ((8 - len(raw) % 8) % 8)
    with open(path, "wb") as handle:
        handle.write(struct.pack("<Q", len(raw)) + raw + b"\0" * offset)


def make_model(tmp_path, quant=None, in_config=None, with_scales=False, index=True, combined=False, shards=2,
               total_size=123456):
    tmp_path.mkdir(parents=True, exist_ok=True)
    config = {"model_type": "qwen3_moe", "architectures": ["Qwen3MoeForCausalLM"], "torch_dtype": "bfloat16"}
    if in_config is not None:
        config["quantization_config"] = in_config
    (tmp_path / "config.json").write_text(json.dumps(config))
    if quant is not None:
        (tmp_path / "hf_quant_config.json").write_text(json.dumps(quant))
    names = tensor_names(with_scales, combined)
    files = ["model-%05d-of-%05d.safetensors" % (i + 1, shards) for i in range(shards)]
    per = [names[i::shards] for i in range(shards)]
    for fname, part in zip(files, per):
        write_shard(str(tmp_path / fname), part)
    if index:
        weight_map = {n: fname for fname, part in zip(files, per) for n in part}
        (tmp_path / "model.safetensors.index.json").write_text(
            json.dumps({"metadata": {"total_size": total_size}, "weight_map": weight_map}))
    return str(tmp_path)


NVFP4_FP8KV = {"producer": {"name": "modelopt", "version": "0.37.0"},
               "quantization": {"quant_algo": "NVFP4", "kv_cache_quant_algo": "FP8", "group_size": 16}}


def test_nvfp4_fp8kv_without_scales_from_index(tmp_path):
    facts = ck.checkpoint_facts(make_model(tmp_path, quant=NVFP4_FP8KV))
    assert facts["quant_algo"] == "NVFP4"
    assert facts["kv_cache_quant_algo"] == "FP8"
    assert facts["quant_method"] == "modelopt"
    assert facts["has_kv_scales"] is False
    assert facts["num_shards"] == 2
    assert facts["total_bytes"] == 123456
    assert facts["tensor_names_from"] == "index"
    assert facts["missing_shards"] == []


def test_guard_defaults_to_bf16_with_warning_on_sm120(tmp_path):
    facts = ck.checkpoint_facts(make_model(tmp_path, quant=NVFP4_FP8KV))
    decision = ck.decide_kv_cache_dtype(facts, None, False, 12)
    assert decision["dtype"] == "bf16"
    assert any(w.startswith("fp8_kv_without_scales") for w in decision["warnings"])


def test_guard_refuses_forced_fp8_without_scales(tmp_path):
    facts = ck.checkpoint_facts(make_model(tmp_path, quant=NVFP4_FP8KV))
    with pytest.raises(ValueError) as err:
        ck.decide_kv_cache_dtype(facts, "fp8_e4m3", False, 12)
    assert "sglang_service_allow_fp8_kv_without_scales" in str(err.value)
    forced = ck.decide_kv_cache_dtype(facts, "fp8_e4m3", True, 12)
    assert forced["dtype"] == "fp8_e4m3" and len(forced["warnings"]) == 2


def test_guard_refuses_auto_on_sm120(tmp_path):
    facts = ck.checkpoint_facts(make_model(tmp_path, quant=NVFP4_FP8KV))
    with pytest.raises(ValueError) as err:
        ck.decide_kv_cache_dtype(facts, "auto", False, 12)
    assert "compute capability 12.x" in str(err.value)


def test_scales_present_in_index(tmp_path):
    facts = ck.checkpoint_facts(make_model(tmp_path, quant=NVFP4_FP8KV, with_scales=True))
    assert facts["has_kv_scales"] is True
    assert facts["kv_scale_tensors"] == {"k_scale": LAYERS, "v_scale": LAYERS, "kv_scale": 0}
    assert ck.recommend_kv_cache_dtype(facts, 10)[0] == "fp8_e4m3"
    assert ck.recommend_kv_cache_dtype(facts, 12)[0] == "bf16"
    decision = ck.decide_kv_cache_dtype(facts, "fp8_e4m3", False, 12)
    assert decision["dtype"] == "fp8_e4m3" and "SM120" in decision["warnings"][0]


def test_combined_kv_scale_counts(tmp_path):
    facts = ck.checkpoint_facts(make_model(tmp_path, quant=NVFP4_FP8KV, with_scales=True, combined=True))
    assert facts["has_kv_scales"] is True and facts["kv_scale_tensors"]["kv_scale"] == LAYERS


def test_shard_headers_without_index(tmp_path):
    path = make_model(tmp_path, quant=NVFP4_FP8KV, with_scales=True, index=False, shards=3)
    facts = ck.checkpoint_facts(path)
    assert facts["tensor_names_from"] == "headers"
    assert facts["num_shards"] == 3
    assert facts["has_kv_scales"] is True
    sizes = sum(p.stat().st_size for p in tmp_path.glob("*.safetensors"))
    assert facts["total_bytes"] == sizes == facts["shard_bytes_on_disk"]


def test_shard_headers_without_scales(tmp_path):
    facts = ck.checkpoint_facts(make_model(tmp_path, quant=NVFP4_FP8KV, index=False))
    assert facts["has_kv_scales"] is False


def test_quantization_config_in_config_json_with_kv_scheme(tmp_path):
    qcfg = {"quant_method": "compressed-tensors", "format": "float-quantized",
            "kv_cache_scheme": {"type": "float", "num_bits": 8, "strategy": "tensor"}}
    facts = ck.checkpoint_facts(make_model(tmp_path, in_config=qcfg))
    assert facts["kv_cache_quant_algo"] == "FP8"
    assert facts["quant_config_source"] == "config.json:quantization_config"
    assert ck.decide_kv_cache_dtype(facts, None, False, 9)["dtype"] == "bf16"


def test_modelopt_quantization_config_lowercase(tmp_path):
    qcfg = {"quant_method": "modelopt", "quant_algo": "nvfp4", "kv_cache_quant_algo": "fp8"}
    facts = ck.checkpoint_facts(make_model(tmp_path, in_config=qcfg))
    assert (facts["quant_algo"], facts["kv_cache_quant_algo"]) == ("NVFP4", "FP8")


def test_unquantised_model(tmp_path):
    facts = ck.checkpoint_facts(make_model(tmp_path))
    assert facts["quant_algo"] is None and facts["kv_cache_quant_algo"] is None
    assert ck.decide_kv_cache_dtype(facts, None, False, 12)["dtype"] == "bf16"
    assert ck.decide_kv_cache_dtype(facts, None, False, 9)["dtype"] == "auto"
    assert ck.decide_kv_cache_dtype(facts, None, False, 9)["warnings"] == []


def test_kv_algo_none_string(tmp_path):
    quant = {"quantization": {"quant_algo": "FP8", "kv_cache_quant_algo": None}}
    facts = ck.checkpoint_facts(make_model(tmp_path, quant=quant))
    assert facts["quant_algo"] == "FP8" and facts["kv_cache_quant_algo"] is None


def test_missing_shard_reported(tmp_path):
    path = make_model(tmp_path, quant=NVFP4_FP8KV)
    (tmp_path / "model-00002-of-00002.safetensors").unlink()
    assert ck.checkpoint_facts(path)["missing_shards"] == ["model-00002-of-00002.safetensors"]


def test_corrupt_header_length(tmp_path):
    path = make_model(tmp_path, index=False, shards=1)
    shard = tmp_path / "model-00001-of-00001.safetensors"
    shard.write_bytes(struct.pack("<Q", 2 ** 40) + b"{}")
    with pytest.raises(ck.CheckpointError) as err:
        ck.checkpoint_facts(path)
    assert "implausible" in str(err.value)


@pytest.mark.parametrize("setup,match", [
    (lambda p: None, "does not exist"),
    (lambda p: p.mkdir(), "no config.json"),
    (lambda p: (p.mkdir(), (p / "config.json").write_text("{}")), "neither"),
    (lambda p: (p.mkdir(), (p / "config.json").write_text("{not json")), "not valid JSON"),
])
def test_unreadable_dirs(tmp_path, setup, match):
    path = tmp_path / "model"
    setup(path)
    with pytest.raises(ck.CheckpointError) as err:
        ck.checkpoint_facts(str(path))
    assert match in str(err.value)


def test_not_inspected_checkpoint():
    assert ck.decide_kv_cache_dtype(None, None, False, 12)["dtype"] == "bf16"
    with pytest.raises(ValueError):
        ck.decide_kv_cache_dtype(None, "fp8_e4m3", False, 12)
    assert ck.decide_kv_cache_dtype(None, "bf16", False, 12)["dtype"] == "bf16"
