"""The crashes the parser fuzz tests found (tests/unit/fuzz), each through the module as Ansible runs it: the module
returns a result or fails with a message that names what was wrong, never a traceback."""

import json
import os

import pytest

from harness import run_module

COMMIT = "0123456789abcdef0123456789abcdef01234567"


def _tool(tmp_path, name, stdout):
    """A stand-in for nvidia-smi: prints ``stdout`` for the GPU query, nothing else, and exits 0."""
    exe = tmp_path / name
    exe.write_text("#!/bin/sh\ncase \"$1\" in --query-gpu=*) printf '%%s\\n' '%s';; esac\nexit 0\n" % stdout)
    exe.chmod(0o755)
    return str(exe)


def no_traceback(result):
    return "Traceback" not in json.dumps(result) and "MODULE FAILURE" not in json.dumps(result)


def test_gpu_facts_with_a_count_of_infinity(tmp_path):
    smi = _tool(tmp_path, "nvidia-smi", "0, NVIDIA RTX PRO 6000, GPU-1, 00000000:01:00.0, 12.0, inf, 1e400, 580.95.05, "
                                        "Enabled")
    result = run_module("gpu_facts", {"nvidia_smi": smi, "topology": False, "pcie": True, "kernel_log": False},
                        tmp_path)
    assert not result.get("failed") and no_traceback(result), result
    assert result["gpu_count"] == 1 and result["gpus"][0]["memory_total_mib"] is None


def test_gpu_facts_with_a_nul_in_the_bus_id(tmp_path):
    smi = _tool(tmp_path, "nvidia-smi", "0, NVIDIA RTX PRO 6000, GPU-1, 0000\\000:01, 12.0, 1, 1, 580.95.05, Enabled")
    result = run_module("gpu_facts", {"nvidia_smi": smi, "topology": False, "pcie": True, "kernel_log": False},
                        tmp_path)
    assert not result.get("failed") and no_traceback(result), result


@pytest.mark.parametrize("since", ["-99999999999999999999d", "@99999999999999999999", "9999-12-31T23:59:59-23:59"])
def test_gpu_health_since_out_of_range_names_since(tmp_path, since):
    result = run_module("gpu_health", {"since": since, "kernel_log_source": "none",
                                       "nvidia_smi": str(tmp_path / "absent")}, tmp_path)
    assert result.get("failed") is True and no_traceback(result), result
    assert "since" in result["msg"] and since in result["msg"], result["msg"]


def test_gpu_health_kernel_log_time_past_year_9999(tmp_path):
    log = tmp_path / "kern.log"
    log.write_text("9999-12-31T23:59:59-2359 host kernel: NVRM: Xid (PCI:0000:01:00): 79, pid=1, GPU has fallen off "
                   "the bus.\n")
    result = run_module("gpu_health", {"kernel_log_source": "file", "kernel_log_path": str(log), "since": "-1d",
                                       "nvidia_smi": str(tmp_path / "absent")}, tmp_path)
    assert no_traceback(result) and result["status"] == "unhealthy", result


def _bench(tmp_path, meta, baseline=None):
    from ansible_collections.blackwell.sglang.plugins.module_utils import _bench_report  # pylint: disable=import-outside-toplevel
    run_id = "20261130T120000Z"
    run_dir = tmp_path / "results" / "host-a" / run_id
    run_dir.mkdir(parents=True)
    record = dict((key, 1.0) for key in _bench_report.REQUIRED_KEYS)
    record.update(max_concurrency=8, completed=8)
    (run_dir / "c8.jsonl").write_text(json.dumps(record) + "\n")
    (run_dir / "run.json").write_text(json.dumps(meta))
    args = {"results_dir": str(tmp_path / "results"), "run_id": run_id, "hosts": ["host-a"],
            "plot": False}
    if baseline is not None:
        (tmp_path / "baseline.json").write_text(json.dumps(baseline))
        args["baseline"] = baseline
    return run_module("sglang_bench_report", args, tmp_path)


def test_bench_report_failure_that_is_a_string(tmp_path):
    result = _bench(tmp_path, {"failures": ["level 64 timed out", None]})
    assert no_traceback(result), result
    assert "level 64 timed out" in json.dumps(result), result


def test_bench_report_level_count_in_superscript_digits(tmp_path):
    result = _bench(tmp_path, {"levels": [{"max_concurrency": "8", "num_prompts": "\u00b2"}]})
    assert result.get("failed") is True and no_traceback(result), result
    assert "levels[0].num_prompts" in result["msg"], result["msg"]


def test_bench_report_deeply_nested_result_line(tmp_path):
    run_dir = tmp_path / "results" / "host-a" / "20261130T120000Z"
    run_dir.mkdir(parents=True)
    (run_dir / "c8.jsonl").write_text("[" * 100000 + "]" * 100000 + "\n")
    result = run_module("sglang_bench_report", {"results_dir": str(tmp_path / "results"), "run_id": "20261130T120000Z",
                                                "hosts": ["host-a"], "plot": False}, tmp_path)
    assert result.get("failed") is True and no_traceback(result), result
    assert "c8.jsonl:1" in result["msg"] and "nested too deeply" in result["msg"], result["msg"]


@pytest.mark.parametrize("config, hf_quant", [
    ({"model_type": "llama", "rope_scaling": {"rope_type": "yarn", "factor": "four",
                                              "original_max_position_embeddings": 4096}}, None),
    ({"model_type": "llama", "rope_scaling": {"rope_type": "yarn", "factor": 1e308,
                                              "original_max_position_embeddings": 1e308}}, None),
    ({"model_type": "llama"}, {"quantization": None}),
    ({"model_type": "llama"}, {"quantization": {"quant_algo": "MIXED_PRECISION", "quantized_layers": ["a"]}}),
    ({"model_type": "llama", "quantization_config": {"quant_method": "compressed-tensors", "config_groups": [1]}},
     None),
], ids=["rope-factor-text", "rope-factor-huge", "quantization-null", "quantized-layers-list", "config-groups-list"])
def test_checkpoint_facts_on_hand_edited_configs(tmp_path, config, hf_quant):
    from test_checkpoints import GOOD_SHARD  # pylint: disable=import-outside-toplevel
    model = tmp_path / "m"
    model.mkdir()
    (model / "config.json").write_text(json.dumps(config))
    (model / "model.safetensors").write_bytes(GOOD_SHARD)
    (model / "tokenizer_config.json").write_text('{"model_max_length": -Infinity}')
    if hf_quant is not None:
        (model / "hf_quant_config.json").write_text(json.dumps(hf_quant))
    result = run_module("sglang_checkpoint_facts", {"model_path": str(model), "context_length": 8192}, tmp_path)
    assert no_traceback(result), result
    assert not result.get("failed") or result.get("cause") in ("quant_layout_unknown", "context_beyond_native"), result
    assert os.path.isdir(str(model))
