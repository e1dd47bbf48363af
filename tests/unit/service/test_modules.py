"""The module wrappers run as Ansible runs them (a subprocess with ANSIBLE_MODULE_ARGS), on fixtures.

sglang_server_args gets a stand-in interpreter: an executable that prints the recorded introspection output of the
real sglang 0.5.9 / 0.5.6 (tests/fixtures/service/parsers), i.e. what the venv python prints on a host.
"""

import json
import os

import ansible_run
from conftest import FIXTURES


def run_module(name, args, tmp_path):
    return ansible_run.module_file(name, args, tmp_path, timeout=60)


def fake_python(tmp_path, version):
    recorded = os.path.join(FIXTURES, "service", "parsers", "sglang-%s.json" % version)
    script = tmp_path / ("python-%s" % version)
    script.write_text("#!/bin/sh\ncat '%s' | tr -d '\\n'; echo\n" % recorded)
    script.chmod(0o755)
    return str(script)


SM120_ARGS = ["--model-path", "/srv/models/m", "--attention-backend", "flashinfer", "--fp4-gemm-backend",
              "flashinfer_cudnn", "--moe-runner-backend", "flashinfer_cutlass", "--kv-cache-dtype", "bf16",
              "--enable-metrics", "--api-key", "${SGLANG_API_KEY}"]


def test_server_args_module_accepts_sm120_flags_on_059(tmp_path):
    result = run_module("sglang_server_args", {"python": fake_python(tmp_path, "0.5.9"), "args": SM120_ARGS,
                                               "compute_capability": "12.0"}, tmp_path)
    assert not result.get("failed"), result.get("msg")
    assert result["version"] == "0.5.9" and result["method"] == "ServerArgs.add_cli_args"
    assert result["stubbed_modules"] == ["torchvision"]
    assert result["flags"]["--kv-cache-dtype"]["choices"] == ["auto", "fp8_e5m2", "fp8_e4m3", "bf16", "bfloat16",
                                                              "fp4_e2m1"]
    assert result["backends"]["--fp4-gemm-backend"] == "flashinfer_cudnn"


def test_server_args_module_names_flag_and_revision_on_056(tmp_path):
    result = run_module("sglang_server_args", {"python": fake_python(tmp_path, "0.5.6"), "args": SM120_ARGS,
                                               "compute_capability": "12.0"}, tmp_path)
    assert result["failed"] is True
    assert result["flag"] == "--fp4-gemm-backend"
    assert "sglang 0.5.6" in result["msg"] and "--fp4-gemm-backend" in result["msg"]


def test_server_args_module_allow_list(tmp_path):
    args = SM120_ARGS[:2] + ["--attention-backend", "trtllm_mha"]
    result = run_module("sglang_server_args", {"python": fake_python(tmp_path, "0.5.9"), "args": args,
                                               "compute_capability": "12.0"}, tmp_path)
    assert result["failed"] is True and "trtllm_mha" in result["msg"]


def test_server_args_module_reports_unreadable_parser(tmp_path):
    broken = tmp_path / "python"
    broken.write_text("#!/bin/sh\necho 'ModuleNotFoundError: No module named sglang' >&2; exit 1\n")
    broken.chmod(0o755)
    result = run_module("sglang_server_args", {"python": str(broken)}, tmp_path)
    assert result["failed"] is True and "cannot read the installed SGLang" in result["msg"]
    assert any("No module named sglang" in e for e in result["errors"])


def test_checkpoint_facts_module(tmp_path):
    model = tmp_path / "m"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"model_type": "llama", "torch_dtype": "bfloat16"}))
    (model / "hf_quant_config.json").write_text(json.dumps(
        {"quantization": {"quant_algo": "NVFP4", "kv_cache_quant_algo": "FP8"}}))
    (model / "model.safetensors.index.json").write_text(json.dumps(
        {"metadata": {"total_size": 10}, "weight_map": {"a.weight": "model-00001-of-00001.safetensors"}}))
    result = run_module("sglang_checkpoint_facts", {"model_path": str(model), "compute_capability": "12.0"}, tmp_path)
    assert not result.get("failed"), result.get("msg")
    assert result["kv_cache"]["dtype"] == "bf16" and result["kv_cache_quant_algo"] == "FP8"
    assert any(w.startswith("fp8_kv_without_scales") for w in result["kv_cache"]["warnings"])
    forced = run_module("sglang_checkpoint_facts", {"model_path": str(model), "compute_capability": "12.0",
                                                    "kv_cache_dtype": "fp8_e4m3"}, tmp_path)
    assert forced["failed"] is True and "allow_fp8_kv_without_scales" in forced["msg"]


def test_checkpoint_facts_missing_ok(tmp_path):
    result = run_module("sglang_checkpoint_facts", {"model_path": str(tmp_path / "absent"),
                                                    "compute_capability": "12.0", "missing_ok": True}, tmp_path)
    assert result["checkpoint"] is None and result["kv_cache"]["dtype"] == "bf16"
    strict = run_module("sglang_checkpoint_facts", {"model_path": str(tmp_path / "absent")}, tmp_path)
    assert strict["failed"] is True and "does not exist" in strict["msg"]


def test_readiness_module_rejects_short_timeout(tmp_path):
    result = run_module("sglang_readiness", {"unit": "sglang.service", "request_timeout": 0.5}, tmp_path)
    assert result["failed"] is True and ">= 5" in result["msg"]
