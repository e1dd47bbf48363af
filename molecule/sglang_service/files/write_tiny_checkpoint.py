"""Write a tiny ModelOpt-NVFP4-shaped checkpoint for the sandbox (test fixture, not a usable model).

config.json + hf_quant_config.json (quant_algo NVFP4, kv_cache_quant_algo FP8, the shape of field report F-B13) +
two real safetensors shards (8-byte little-endian header length, JSON header, data) + the index. No k_scale/v_scale
tensors: the KV-cache guard must render --kv-cache-dtype bf16 and warn.
"""
import json
import os
import struct
import sys

dest = sys.argv[1]
os.makedirs(dest, exist_ok=True)
config = {"model_type": "qwen3_moe", "architectures": ["Qwen3MoeForCausalLM"], "torch_dtype": "bfloat16",
          "_comment": "blackwell.sglang molecule fixture: headers only, not a usable model"}
quant = {"producer": {"name": "modelopt", "version": "0.37.0"},
         "quantization": {"quant_algo": "NVFP4", "kv_cache_quant_algo": "FP8", "group_size": 16}}
names = ["model.embed_tokens.weight", "lm_head.weight"]
for layer in range(2):
    base = "model.layers.%d.self_attn" % layer
    names += [base + ".q_proj.weight", base + ".k_proj.weight", base + ".v_proj.weight",
              base + ".k_proj.weight_scale", base + ".k_proj.input_scale"]
shards = {"model-00001-of-00002.safetensors": names[0::2], "model-00002-of-00002.safetensors": names[1::2]}
weight_map, total = {}, 0
for fname, part in shards.items():
    header, offset = {"__metadata__": {"format": "pt"}}, 0
    for name in part:
        header[name] = {"dtype": "F32", "shape": [1], "data_offsets": [offset, offset + 4]}
        offset += 4
        weight_map[name] = fname
    raw = json.dumps(header).encode()
    raw += b" " * ((8 - len(raw) % 8) % 8)
    with open(os.path.join(dest, fname), "wb") as handle:
        handle.write(struct.pack("<Q", len(raw)) + raw + b"\0" * offset)
    total += offset
with open(os.path.join(dest, "config.json"), "w") as handle:
    json.dump(config, handle)
with open(os.path.join(dest, "hf_quant_config.json"), "w") as handle:
    json.dump(quant, handle)
with open(os.path.join(dest, "model.safetensors.index.json"), "w") as handle:
    json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, handle)
