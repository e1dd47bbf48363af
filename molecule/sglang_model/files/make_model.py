#!/usr/bin/env python3
"""Write a tiny safetensors checkpoint (two shards + index + config + tokenizer) and a tarball of it.

    make_model.py <out_dir>   ->  <out_dir>/tiny/ and <out_dir>/tiny.tar.gz

Stdlib only (the controller's Python has no safetensors package): the safetensors layout is an 8-byte
little-endian header length, the JSON header with dtype/shape/data_offsets per tensor, then the data.
"""

import json
import os
import struct
import sys
import tarfile


def shard(tensors):
    header, data = {}, b""
    for name, count in tensors:
        blob = struct.pack("<%df" % count, *[float(i % 97) for i in range(count)])
        header[name] = {"dtype": "F32", "shape": [count], "data_offsets": [len(data), len(data) + len(blob)]}
        data += blob
    raw = json.dumps(header).encode()
    return struct.pack("<Q", len(raw)) + raw + data


def main(out):
    model = os.path.join(out, "tiny")
    os.makedirs(model, exist_ok=True)
    files = {
        "config.json": json.dumps({"model_type": "llama", "architectures": ["LlamaForCausalLM"]}).encode(),
        "tokenizer.json": b'{"version": "1.0", "model": {"type": "BPE"}}',
        "model-00001-of-00002.safetensors": shard([("model.embed_tokens.weight", 4096)]),
        "model-00002-of-00002.safetensors": shard([("model.layers.0.mlp.weight", 2048), ("lm_head.weight", 512)]),
        "model.safetensors.index.json": json.dumps({"weight_map": {
            "model.embed_tokens.weight": "model-00001-of-00002.safetensors",
            "model.layers.0.mlp.weight": "model-00002-of-00002.safetensors",
            "lm_head.weight": "model-00002-of-00002.safetensors"}}).encode(),
    }
    for rel, data in files.items():
        with open(os.path.join(model, rel), "wb") as handle:
            handle.write(data)
    with tarfile.open(os.path.join(out, "tiny.tar.gz"), "w:gz") as tar:
        for rel in sorted(files):
            tar.add(os.path.join(model, rel), arcname=rel)


if __name__ == "__main__":
    main(sys.argv[1])
