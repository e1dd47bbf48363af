"""Field reports part 2 through the ``sglang_checkpoint_facts`` module (run as Ansible runs it): N04, N05, N07,
N09, N12, N13. Checkpoints are small directories written by the tests (config JSON from the report fixtures, one
tiny safetensors header); the venv python is a stand-in script that prints a recorded probe answer."""

import json
import os
import struct
import subprocess
import sys

import pytest

import ansible_run
from conftest import ROOT
from ansible_collections.blackwell.sglang.plugins.module_utils import _checkpoint


def run_module(name, args, tmp_path):
    return ansible_run.module_file(name, args, tmp_path)


def checkpoint(root, config, hf_quant=None, tokenizer=None, name="model"):
    d = root / name
    d.mkdir()
    (d / "config.json").write_text(json.dumps(config))
    if hf_quant is not None:
        (d / "hf_quant_config.json").write_text(json.dumps(hf_quant))
    if tokenizer is not None:
        (d / "tokenizer_config.json").write_text(json.dumps(tokenizer))
    header = json.dumps({"model.embed_tokens.weight": {"dtype": "BF16", "shape": [1], "data_offsets": [0, 2]}})
    (d / "model.safetensors").write_bytes(struct.pack("<Q", len(header)) + header.encode() + b"\0\0")
    return str(d)


def fake_python(tmp_path, probe=None, hf_transfer=True):
    """A venv python stand-in: prints ``probe`` for the model-support probe; ``import hf_transfer`` fails unless
    ``hf_transfer``."""
    script = tmp_path / "python"
    script.write_text("#!/bin/sh\ncase \"$2\" in\n  'import hf_transfer') %s ;;\n  *) echo '%s' ;;\nesac\n" % (
        "exit 0" if hf_transfer else "echo \"ModuleNotFoundError: No module named 'hf_transfer'\" >&2; exit 1",
        json.dumps(probe or {})))
    script.chmod(0o755)
    return str(script)


NVFP4_KV = {"producer": {"name": "modelopt"}, "quantization": {"quant_algo": "NVFP4", "kv_cache_quant_algo": "NVFP4"}}


# --- N04 -------------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("requested", ["fp4_e2m1", "nvfp4"])
@pytest.mark.parametrize("cc", ["12.0", "12.1"])
def test_n04_fp4_kv_refused_on_sm12x(tmp_path, requested, cc):
    model = checkpoint(tmp_path, {"model_type": "llama"})
    result = run_module("sglang_checkpoint_facts", {"model_path": model, "compute_capability": cc,
                                                    "kv_cache_dtype": requested}, tmp_path)
    assert result.get("failed") and result["cause"] == "fp4_kv_unsupported_on_sm12x", result
    forced = run_module("sglang_checkpoint_facts", {"model_path": model, "compute_capability": cc,
                                                    "kv_cache_dtype": requested, "allow_experimental_fp4_kv": True},
                        tmp_path)
    assert not forced.get("failed") and forced["kv_cache"]["dtype"] == requested
    assert any("experimental FP4 KV" in w for w in forced["kv_cache"]["warnings"])


def test_n04_checkpoint_declaring_nvfp4_kv_never_becomes_fp4_or_auto(tmp_path):
    model = checkpoint(tmp_path, {"model_type": "llama"}, hf_quant=NVFP4_KV)
    result = run_module("sglang_checkpoint_facts", {"model_path": model, "compute_capability": "12.0"}, tmp_path)
    assert result["kv_cache"]["dtype"] == "bf16" and result["recommended_kv_cache_dtype"] == "bf16"
    assert any("NVFP4" in w for w in result["kv_cache"]["warnings"])
    auto = run_module("sglang_checkpoint_facts", {"model_path": model, "compute_capability": "9.0",
                                                  "kv_cache_dtype": "auto"}, tmp_path)
    assert auto.get("failed") and "FP4 KV" in auto["msg"]


def test_n04_gate_is_a_family_allow_list():
    assert _checkpoint.is_fp4_kv_capable((12, 0)) is False
    assert _checkpoint.is_fp4_kv_capable((12, 1)) is False
    assert _checkpoint.is_fp4_kv_capable((10, 0)) is True
    assert _checkpoint.is_fp4_kv_capable((10, 3)) is True
    assert _checkpoint.is_fp4_kv_capable((11, 0)) is False
    assert _checkpoint.is_fp4_kv_capable((13, 0)) is False


# --- N12 -------------------------------------------------------------------------------------------------------------

CT_NVFP4 = {"quantization_config": {
    "quant_method": "compressed-tensors", "format": "nvfp4-pack-quantized",
    "config_groups": {"group_0": {"targets": ["Linear"],
                                  "weights": {"num_bits": 4, "type": "float", "group_size": 16, "strategy": "tensor_group",
                                              "dynamic": False},
                                  "input_activations": {"num_bits": 4, "type": "float", "group_size": 16,
                                                        "strategy": "tensor_group", "dynamic": "local"}}},
    "ignore": ["lm_head"]}}
MIXED = {"producer": {"name": "modelopt"}, "quantization": {"quant_algo": "MIXED_PRECISION", "quantized_layers": {
    "model.layers.0.mlp.down_proj": {"quant_algo": "NVFP4", "group_size": 16},
    "model.layers.0.self_attn.q_proj": {"quant_algo": "FP8"}}}}
with open(os.path.join(ROOT, "tests", "fixtures", "service", "parsers", "sglang-0.5.9.json")) as _handle:
    CHOICES_059 = [a for a in json.load(_handle)["actions"] if "--quantization" in a["option_strings"]][0]["choices"]


def test_n12_compressed_tensors_nvfp4(tmp_path):
    result = run_module("sglang_checkpoint_facts", {"model_path": checkpoint(tmp_path, dict(CT_NVFP4, model_type="llama")),
                                                    "compute_capability": "12.0"}, tmp_path)
    quant = result["quant"]
    assert (quant["weights"], quant["activations"], quant["layout"]) == ("NVFP4", "NVFP4", "compressed-tensors")
    assert result["quantization"] == "compressed-tensors"


def test_n12_variant_compressed_tensors_w4a16_and_fp8():
    w4a16 = json.loads(json.dumps(CT_NVFP4))
    del w4a16["quantization_config"]["config_groups"]["group_0"]["input_activations"]
    record = _checkpoint.canonical_quant(w4a16)
    assert (record["weights"], record["activations"]) == ("NVFP4", None)
    fp8 = json.loads(json.dumps(CT_NVFP4))
    fp8["quantization_config"]["config_groups"]["group_0"]["weights"].update(num_bits=8, group_size=None)
    assert _checkpoint.canonical_quant(fp8)["weights"] == "FP8"


def test_n12_mixed_precision_against_the_recorded_059_parser(tmp_path):
    model = checkpoint(tmp_path, {"model_type": "llama"}, hf_quant=MIXED)
    result = run_module("sglang_checkpoint_facts", {"model_path": model, "compute_capability": "12.0",
                                                    "quantization_choices": CHOICES_059}, tmp_path)
    assert result["quant"]["weights"] == "MIXED" and result["quant"]["weight_formats"] == ["FP8", "NVFP4"]
    # 0.5.9 has no modelopt_mixed (newer SGLang maps MIXED_PRECISION with NVFP4 layers to it): the NVFP4 loader
    assert "modelopt_mixed" not in CHOICES_059
    assert result["quantization"] == "modelopt_fp4"
    assert any("no --quantization modelopt_mixed" in w for w in result["kv_cache"]["warnings"])
    newer = run_module("sglang_checkpoint_facts", {"model_path": model, "compute_capability": "12.0",
                                                   "quantization_choices": CHOICES_059 + ["modelopt_mixed"]}, tmp_path)
    assert newer["quantization"] == "modelopt_mixed"


def test_n12_hybrid_fp8_linear_nvfp4_moe(tmp_path):
    model = checkpoint(tmp_path, {"model_type": "deepseek_v4", "quantization_config": {"quant_method": "fp8"}},
                       hf_quant={"quantization": {"quant_algo": "FP8", "moe_quant_algo": "NVFP4"}})
    result = run_module("sglang_checkpoint_facts", {"model_path": model, "compute_capability": "12.0"}, tmp_path)
    assert (result["quant"]["linear"], result["quant"]["moe"]) == ("FP8", "NVFP4")
    assert result["quantization"] == "fp8"


def test_n12_plain_modelopt_nvfp4_is_explicit(tmp_path):
    model = checkpoint(tmp_path, {"model_type": "llama"}, hf_quant={"quantization": {"quant_algo": "NVFP4"}})
    result = run_module("sglang_checkpoint_facts", {"model_path": model, "compute_capability": "12.0"}, tmp_path)
    # SGLang's auto-detection picked ModelOptFp8Config for such checkpoints (aiconfigurator#572): render it
    assert result["quantization"] == "modelopt_fp4"


@pytest.mark.parametrize("config,hf_quant", [
    ({"model_type": "llama"}, {"quantization": {"quant_algo": "INT3_FANCY"}}),
    ({"model_type": "llama", "quantization_config": {"quant_method": "brand-new-format"}}, None),
    ({"model_type": "llama", "quantization_config": {"quant_method": "compressed-tensors", "config_groups": {}}}, None),
])
def test_n12_unknown_layout_fails_clearly(tmp_path, config, hf_quant):
    result = run_module("sglang_checkpoint_facts", {"model_path": checkpoint(tmp_path, config, hf_quant=hf_quant),
                                                    "compute_capability": "12.0"}, tmp_path)
    assert result.get("failed") and result["cause"] == "quant_layout_unknown", result
    explicit = run_module("sglang_checkpoint_facts", {"model_path": str(tmp_path / "model"), "compute_capability":
                                                      "12.0", "quantization": "modelopt_fp4"}, tmp_path)
    assert not explicit.get("failed") and explicit["quantization"] == "modelopt_fp4"


# --- N09 -------------------------------------------------------------------------------------------------------------

NATIVE = {"model_type": "qwen3_5_moe", "text_config": {"max_position_embeddings": 262144}}
YARN = {"model_type": "qwen3_5_moe", "text_config": {"max_position_embeddings": 262144, "rope_parameters": {
    "rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 262144}}}


def test_n09_beyond_native_fails_and_yarn_passes(tmp_path):
    native = run_module("sglang_checkpoint_facts", {"model_path": checkpoint(tmp_path, NATIVE, name="a"),
                                                    "compute_capability": "12.0", "context_length": 1048576}, tmp_path)
    assert native.get("failed") and native["cause"] == "context_beyond_native" and "262144" in native["msg"]
    yarn = run_module("sglang_checkpoint_facts", {"model_path": checkpoint(tmp_path, YARN, name="b"),
                                                  "compute_capability": "12.0", "context_length": 1048576}, tmp_path)
    assert not yarn.get("failed") and yarn["context"]["limits"]["limit"] == 1048576


def test_n09_override_env_without_yarn_fails(tmp_path):
    result = run_module("sglang_checkpoint_facts", {
        "model_path": checkpoint(tmp_path, NATIVE), "compute_capability": "12.0", "context_length": 131072,
        "env": {"SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN": "1"}}, tmp_path)
    assert result.get("failed") and result["cause"] == "context_override_without_yarn"


def test_n09_tokenizer_cap_warns(tmp_path):
    result = run_module("sglang_checkpoint_facts", {
        "model_path": checkpoint(tmp_path, NATIVE, tokenizer={"model_max_length": 131072}),
        "compute_capability": "12.0", "context_length": 262144}, tmp_path)
    assert not result.get("failed")
    assert result["context"]["status"] == "warn"
    assert any(w.startswith("tokenizer_caps_context") for w in result["context"]["warnings"])


@pytest.mark.parametrize("config,expect", [
    ({"max_position_embeddings": 32768}, 32768),                                               # top level (sglang#2943)
    ({"max_position_embeddings": 32768, "rope_scaling": {"type": "yarn", "factor": 4.0,
                                                         "original_max_position_embeddings": 32768}}, 131072),
    ({"max_position_embeddings": 163840, "rope_scaling": {"type": "yarn", "factor": 40,
                                                          "original_max_position_embeddings": 4096}}, 163840),
    ({"max_position_embeddings": 8192, "rope_scaling": {"rope_type": "dynamic", "factor": 2.0}}, 8192),
    ({"n_positions": 2048}, 2048),
])
def test_n09_variant_limits(config, expect):
    assert _checkpoint.context_limits(config)["limit"] == expect


def test_n09_spec_decode_headroom_warns(tmp_path):
    result = run_module("sglang_checkpoint_facts", {
        "model_path": checkpoint(tmp_path, NATIVE), "compute_capability": "12.0", "context_length": 262144,
        "speculative": {"algorithm": "NEXTN", "num_draft_tokens": 4}}, tmp_path)
    assert any(w.startswith("spec_context_headroom") for w in result["context"]["warnings"])


# --- N07 -------------------------------------------------------------------------------------------------------------

QWEN35 = {"model_type": "qwen3_5_moe", "architectures": ["Qwen3_5MoeForConditionalGeneration"]}


def test_n07_transformers_too_old(tmp_path):
    probe = {"transformers_version": "4.57.6", "config_mapping": ["llama", "qwen3", "qwen3_moe"], "errors": []}
    result = run_module("sglang_checkpoint_facts", {"model_path": checkpoint(tmp_path, QWEN35),
                                                    "compute_capability": "12.0",
                                                    "python": fake_python(tmp_path, probe)}, tmp_path)
    assert result.get("failed") and result["cause"] == "model_type_unsupported"
    assert "qwen3_5_moe not in transformers 4.57.6" in result["msg"] and ">= 5.2.0" in result["msg"]


def test_n07_sglang_registry_lacks_the_architecture(tmp_path):
    probe = {"transformers_version": "5.2.0", "config_mapping": ["qwen3_5_moe"], "sglang_version": "0.5.9",
             "sglang_archs": ["LlamaForCausalLM", "Qwen3MoeForCausalLM"], "errors": []}
    result = run_module("sglang_checkpoint_facts", {"model_path": checkpoint(tmp_path, QWEN35),
                                                    "compute_capability": "12.0",
                                                    "python": fake_python(tmp_path, probe)}, tmp_path)
    # SGLang's registry leaves out every model whose module fails to import (the sandbox's real 0307 tree on CPU
    # torch lost Qwen3MoeForCausalLM that way): a warning naming the registry, not a failure
    assert not result.get("failed"), result.get("msg")
    assert result["model_support"]["status"] == "warn"
    assert "SGLang 0.5.9's model registry" in json.dumps(result.get("warnings", [])), result.get("warnings")


def test_n07_known_model_type_passes(tmp_path):
    probe = {"transformers_version": "5.2.0", "config_mapping": ["qwen3_5_moe"], "sglang_version": "0.5.9",
             "sglang_archs": ["Qwen3_5MoeForConditionalGeneration"], "errors": []}
    result = run_module("sglang_checkpoint_facts", {"model_path": checkpoint(tmp_path, QWEN35),
                                                    "compute_capability": "12.0",
                                                    "python": fake_python(tmp_path, probe)}, tmp_path)
    assert not result.get("failed") and result["model_support"]["status"] == "pass"


def _venv_with_transformers(tmp_path, model_types):
    """A real venv (this interpreter, no pip) holding a stand-in ``transformers`` distribution: its registry lists
    ``model_types``, each import appends a line to ``imports.log``; packaging is copied in for the stamp's reader."""
    import packaging
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    site = subprocess.run([str(venv / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True, timeout=60).stdout.strip()
    pkg = os.path.join(site, "transformers")
    os.makedirs(os.path.join(pkg, "models", "auto"))
    with open(os.path.join(pkg, "__init__.py"), "w") as handle:
        handle.write("__version__ = '5.2.0'\nopen(%r, 'a').write('import\\n')\n" % str(tmp_path / "imports.log"))
    for sub in ("models", os.path.join("models", "auto")):
        open(os.path.join(pkg, sub, "__init__.py"), "w").close()
    with open(os.path.join(pkg, "models", "auto", "configuration_auto.py"), "w") as handle:
        handle.write("CONFIG_MAPPING_NAMES = %r\n" % {t: t for t in model_types})
    info = os.path.join(site, "transformers-5.2.0.dist-info")
    os.makedirs(info)
    with open(os.path.join(info, "METADATA"), "w") as handle:
        handle.write("Metadata-Version: 2.1\nName: transformers\nVersion: 5.2.0\n")
    with open(os.path.join(info, "RECORD"), "w") as handle:
        handle.write("transformers/__init__.py,,\n")
    subprocess.run(["cp", "-r", os.path.dirname(packaging.__file__), site], check=True, timeout=60)
    return str(venv / "bin" / "python"), os.path.join(info, "RECORD")


def test_n07_a_converged_venv_reads_the_registry_from_its_stamp(tmp_path):
    """With stamp_dir the probe runs once; the next run takes its reading from the stamp (nothing imported) while
    transformers' installed files are the same, and a reinstall (another RECORD) probes again."""
    python, record = _venv_with_transformers(tmp_path, ["llama", "qwen3_5_moe"])
    args = {"model_path": checkpoint(tmp_path, QWEN35), "compute_capability": "12.0", "python": python,
            "probe_sglang_registry": False, "stamp_dir": str(tmp_path / "stamps")}
    imports = tmp_path / "imports.log"
    sources = []
    for step in ("first", "converged", "reinstalled"):
        if step == "reinstalled":
            with open(record, "a") as handle:
                handle.write("transformers/models/__init__.py,,\n")
        result = run_module("sglang_checkpoint_facts", args, tmp_path)
        assert not result.get("failed") and result["model_support"]["status"] == "pass", result
        assert result["model_support"]["probe"]["transformers_version"] == "5.2.0"
        sources.append(result["model_support"]["probe"]["source"])
    assert sources == ["probe", "stamp", "probe"]
    assert imports.read_text().count("import") == 2
    assert len(os.listdir(tmp_path / "stamps")) == 1


def test_n07_a_stamped_reading_still_refuses_an_unknown_model_type(tmp_path):
    """The stamp keeps the registry, not the verdict: another checkpoint is judged against it."""
    python = _venv_with_transformers(tmp_path, ["llama"])[0]
    args = {"compute_capability": "12.0", "python": python, "probe_sglang_registry": False,
            "stamp_dir": str(tmp_path / "stamps")}
    first = run_module("sglang_checkpoint_facts", dict(args, model_path=checkpoint(tmp_path, {
        "model_type": "llama", "architectures": ["LlamaForCausalLM"]}, name="llama")), tmp_path)
    assert first["model_support"]["status"] == "pass", first
    second = run_module("sglang_checkpoint_facts", dict(args, model_path=checkpoint(tmp_path, QWEN35)), tmp_path)
    assert second.get("failed") and "qwen3_5_moe not in transformers 5.2.0" in second["msg"], second
    assert second["model_support"]["probe"]["source"] == "stamp"


def test_n07_no_stamp_from_check_mode_or_from_a_reading_with_errors(tmp_path):
    """Check mode reads a stamp but writes none; a probe that could not read the registry is never kept."""
    python, _record = _venv_with_transformers(tmp_path, ["qwen3_5_moe"])
    args = {"model_path": checkpoint(tmp_path, QWEN35), "compute_capability": "12.0", "python": python,
            "probe_sglang_registry": False, "stamp_dir": str(tmp_path / "stamps")}
    checked = run_module("sglang_checkpoint_facts", dict(args, _ansible_check_mode=True), tmp_path)
    assert checked["model_support"]["status"] == "pass" and checked["model_support"]["probe"]["source"] == "probe"
    assert not (tmp_path / "stamps").exists()
    registry = os.path.join(os.path.dirname(_record), "..", "transformers", "models", "auto", "configuration_auto.py")
    with open(registry, "w") as handle:
        handle.write("raise ImportError('broken registry')\n")
    broken = run_module("sglang_checkpoint_facts", args, tmp_path)
    assert broken["model_support"]["status"] == "skip" and "broken registry" in json.dumps(broken["model_support"])
    assert not (tmp_path / "stamps").exists() or os.listdir(tmp_path / "stamps") == []


def test_n07_probe_runs_in_a_real_interpreter():
    """The probe script itself, in this test's python (transformers may be absent: then a clean skip)."""
    proc = subprocess.run([sys.executable, "-c", _checkpoint.MODEL_SUPPORT_PROBE, "0"], capture_output=True,
                          text=True, timeout=120, check=False)
    probe = json.loads(proc.stdout.strip().splitlines()[-1])
    verdict = _checkpoint.check_model_support("surely_not_a_model_type", [], probe)
    assert verdict["status"] == ("fail" if probe["config_mapping"] is not None else "skip")


# --- N13 -------------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("value", ["1", "true", "YES"])
def test_n13_hf_transfer_missing_for_a_hub_id(tmp_path, value):
    result = run_module("sglang_checkpoint_facts", {
        "model_path": "Qwen/Qwen3.5-397B-A17B-FP8", "compute_capability": "12.0",
        "env": {"HF_HUB_ENABLE_HF_TRANSFER": value}, "python": fake_python(tmp_path, hf_transfer=False)}, tmp_path)
    assert result.get("failed") and result["cause"] == "hf_transfer_missing"
    assert "No module named 'hf_transfer'" in result["msg"]


def test_n13_installed_or_local_or_unset_passes(tmp_path):
    hub = {"model_path": "Qwen/Qwen3.5-397B-A17B-FP8", "compute_capability": "12.0"}
    ok = run_module("sglang_checkpoint_facts", dict(hub, env={"HF_HUB_ENABLE_HF_TRANSFER": "1"},
                                                    python=fake_python(tmp_path, hf_transfer=True)), tmp_path)
    assert not ok.get("failed") and ok["checkpoint"] is None
    unset = run_module("sglang_checkpoint_facts", dict(hub, env={"HF_HUB_ENABLE_HF_TRANSFER": "0"},
                                                       python=fake_python(tmp_path, hf_transfer=False)), tmp_path)
    assert not unset.get("failed")
    local = run_module("sglang_checkpoint_facts", {
        "model_path": checkpoint(tmp_path, {"model_type": "llama"}), "compute_capability": "12.0",
        "env": {"HF_HUB_ENABLE_HF_TRANSFER": "1"}, "python": fake_python(tmp_path, {
            "transformers_version": "5.2.0", "config_mapping": ["llama"]}, hf_transfer=False)}, tmp_path)
    assert not local.get("failed")


# --- N05 -------------------------------------------------------------------------------------------------------------

def test_n05_bf16_draft_gets_unquant(tmp_path):
    target = checkpoint(tmp_path, {"model_type": "llama"}, hf_quant={"quantization": {"quant_algo": "NVFP4"}},
                        name="target")
    draft = checkpoint(tmp_path, {"architectures": ["LlamaForCausalLMEagle3"], "torch_dtype": "bfloat16"},
                       name="draft-eagle3")
    result = run_module("sglang_checkpoint_facts", {
        "model_path": target, "compute_capability": "12.0",
        "speculative": {"algorithm": "EAGLE3", "draft_model_path": draft, "num_steps": 3}}, tmp_path)
    assert result["speculative_draft_model_quantization"] == "unquant"
    assert result["quantization"] == "modelopt_fp4"


def test_n05_quantised_draft_gets_its_own_method_and_a_mismatch_is_refused(tmp_path):
    target = checkpoint(tmp_path, {"model_type": "llama"}, hf_quant={"quantization": {"quant_algo": "NVFP4"}},
                        name="target")
    same = checkpoint(tmp_path, {"model_type": "llama"}, hf_quant={"quantization": {"quant_algo": "NVFP4"}},
                      name="draft-nvfp4")
    other = checkpoint(tmp_path, {"model_type": "llama", "quantization_config": {"quant_method": "awq", "bits": 4}},
                       name="draft-awq")
    ok = run_module("sglang_checkpoint_facts", {"model_path": target, "compute_capability": "12.0",
                                                "speculative": {"algorithm": "EAGLE3", "draft_model_path": same}},
                    tmp_path)
    assert ok["speculative_draft_model_quantization"] == "modelopt_fp4"
    bad = run_module("sglang_checkpoint_facts", {"model_path": target, "compute_capability": "12.0",
                                                 "speculative": {"algorithm": "EAGLE3", "draft_model_path": other}},
                     tmp_path)
    assert bad.get("failed") and bad["cause"] == "draft_quant_mismatch"
    explicit = run_module("sglang_checkpoint_facts", {
        "model_path": target, "compute_capability": "12.0",
        "speculative": {"algorithm": "EAGLE3", "draft_model_path": other, "draft_model_quantization": "awq"}},
        tmp_path)
    assert explicit["speculative_draft_model_quantization"] == "awq"
