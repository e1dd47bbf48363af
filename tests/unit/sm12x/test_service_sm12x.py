"""S19 through the service's real entry points: the sglang_checkpoint_facts module reads head_dim from config.json
(or hidden_size / num_attention_heads), and the flag rendering of module_utils/_server_flags (what roles/sglang_service/tasks/flags.yml
renders the unit with) turns an unset attention backend into --attention-backend triton below 64; an explicit
backend is kept as set."""

import json
import os
import struct
import subprocess
import sys

import pytest

from ansible_collections.blackwell.sglang.plugins.module_utils import _server_flags

# paths from this file (the module name conftest depends on the collection order)
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
COLLECTIONS = os.path.join(ROOT, "collections")

MODULES = os.path.join(ROOT, "plugins", "modules")


def run_module(name, args, tmp_path):
    path = tmp_path / ("args-%s.json" % name)
    path.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": args}))
    env = dict(os.environ, PYTHONPATH=COLLECTIONS)
    proc = subprocess.run([sys.executable, os.path.join(MODULES, name + ".py"), str(path)], env=env,
                          capture_output=True, text=True, timeout=120, check=False)
    return json.loads(proc.stdout)


def checkpoint(root, config, name="model"):
    d = root / name
    d.mkdir()
    (d / "config.json").write_text(json.dumps(config))
    header = json.dumps({"model.embed_tokens.weight": {"dtype": "BF16", "shape": [1], "data_offsets": [0, 2]}})
    (d / "model.safetensors").write_bytes(struct.pack("<Q", len(header)) + header.encode() + b"\0\0")
    return str(d)


# F-S19 [C: head_dim 32 as tested in MEDS_EIC_AR#169; other values illustrative]
SMALL = {"hidden_size": 512, "num_attention_heads": 16, "head_dim": 32, "model_type": "llama"}


@pytest.mark.parametrize("config,expect", [
    (SMALL, 32),
    ({"hidden_size": 512, "num_attention_heads": 16, "model_type": "llama"}, 32),   # no head_dim: hidden / heads
    ({"text_config": {"hidden_size": 4096, "num_attention_heads": 32}, "model_type": "x"}, 128),
    ({"model_type": "x"}, None),
])
def test_checkpoint_facts_read_head_dim(tmp_path, config, expect):
    args = {"model_path": checkpoint(tmp_path, config), "compute_capability": "12.1"}
    result = run_module("sglang_checkpoint_facts", args, tmp_path)
    assert not result.get("failed"), result
    assert result["checkpoint"]["head_dim"] == expect


BASE = {"model_path": "/m", "host": "127.0.0.1", "port": 30000, "tp_size": 1}


def _backend(argv):
    return argv[argv.index("--attention-backend") + 1] if "--attention-backend" in argv else None


@pytest.mark.parametrize("attention,head_dim,extra,expect", [
    ("", 32, [], "triton"),                    # unset, small head_dim: triton
    ("", 64, [], None),                        # 64 is fine: SGLang chooses
    ("", None, [], None),                      # unknown (checkpoint not inspected): SGLang chooses
    ("flashinfer", 32, [], "flashinfer"),      # explicit: kept as set
    ("", 32, ["--attention-backend", "torch_native"], "torch_native"),   # through extra args: not doubled
])
def test_small_head_dim_renders_triton_when_no_backend_is_set(attention, head_dim, extra, expect):
    argv = _server_flags.render_server_args(dict(BASE, attention_backend=attention, head_dim=head_dim, extra_args=extra))
    assert _backend(argv) == expect
    assert argv.count("--attention-backend") == (1 if expect else 0)
