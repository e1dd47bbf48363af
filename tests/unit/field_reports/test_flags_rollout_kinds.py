"""Field reports part 2 through the service flag rendering (module_utils/_server_flags, what the
``sglang_server_args`` module renders with), the ``sglang_server_args`` module with recorded SGLang parsers
(N05, N06), the ``pip_failure_class`` filter (N14) and the torch_nightly role files (its messages and the mirror's
wheel names: tests/unit/field_reports/test_torch_mirror_playbook.py)."""

import os

import pytest
import yaml

import ansible_run
from conftest import FIXTURES, ROOT
from ansible_collections.blackwell.sglang.plugins.filter.pip_failure_class import pip_failure_class
from ansible_collections.blackwell.sglang.plugins.module_utils import _server_flags


def run_module(name, args, tmp_path):
    return ansible_run.module_file(name, args, tmp_path, timeout=60)


def recorded_parser(tmp_path, version):
    recorded = os.path.join(FIXTURES, "service", "parsers", "sglang-%s.json" % version)
    script = tmp_path / ("python-%s" % version)
    script.write_text("#!/bin/sh\ncat '%s' | tr -d '\\n'; echo\n" % recorded)
    script.chmod(0o755)
    return str(script)


BASE = {"model_path": "/m/target", "host": "127.0.0.1", "port": 30000, "attention_backend": "flashinfer",
        "fp4_gemm_backend": "flashinfer_cudnn", "moe_runner_backend": "flashinfer_cutlass", "kv_cache_dtype": "bf16",
        "quantization": "modelopt_fp4"}
EAGLE3 = {"algorithm": "eagle3", "draft_model_path": "/m/draft-eagle3", "num_steps": 3}


# --- N05 -------------------------------------------------------------------------------------------------------------

def test_n05_draft_quantization_rendered_and_valid_on_059(tmp_path):
    argv = _server_flags.render_server_args(dict(BASE, speculative=dict(EAGLE3, draft_model_quantization="unquant")))
    assert argv[argv.index("--speculative-draft-model-quantization") + 1] == "unquant"
    assert argv[argv.index("--speculative-algorithm") + 1] == "EAGLE3"
    result = run_module("sglang_server_args", {"python": recorded_parser(tmp_path, "0.5.9"), "args": argv,
                                               "compute_capability": "12.0"}, tmp_path)
    assert not result.get("failed"), result.get("msg")


def test_n05_parser_without_the_flag_fails_draft_quant_unspecified(tmp_path):
    argv = _server_flags.render_server_args(dict(BASE, speculative=dict(EAGLE3, draft_model_quantization="unquant")))
    result = run_module("sglang_server_args", {"python": recorded_parser(tmp_path, "0.5.6"), "args": argv,
                                               "compute_capability": "12.0"}, tmp_path)
    assert result.get("failed") and result["msg"].startswith("draft_quant_unspecified"), result.get("msg")


def test_n05_quantised_target_with_unknown_draft_quantization_is_refused():
    with pytest.raises(ValueError, match="draft_quant_unspecified"):
        _server_flags.render_server_args(dict(BASE, speculative=EAGLE3))
    # an unquantised target: nothing to inherit, nothing rendered
    argv = _server_flags.render_server_args(dict(BASE, quantization="", speculative=EAGLE3))
    assert "--speculative-draft-model-quantization" not in argv
    # NEXTN uses the target's own layers: no draft path needed
    argv = _server_flags.render_server_args(dict(BASE, speculative={"algorithm": "NEXTN", "num_draft_tokens": 4}))
    assert argv[argv.index("--speculative-num-draft-tokens") + 1] == "4"


# --- N06 -------------------------------------------------------------------------------------------------------------

def test_n06_known_crash_combinations_are_named():
    near_limit = dict(BASE, quantization="", context_length=262144, native_context_length=262144,
                      speculative={"algorithm": "NEXTN", "num_draft_tokens": 4})
    findings = _server_flags.spec_decode_findings(near_limit)
    assert [f["report"] for f in findings] == ["sglang#34239"]
    assert _server_flags.spec_decode_findings(dict(near_limit, context_length=262140)) == []
    ngram = dict(BASE, quantization="", cc_major=12, speculative={"algorithm": "NGRAM"})
    assert [f["report"] for f in _server_flags.spec_decode_findings(ngram)] == ["sglang#24361"]
    assert _server_flags.spec_decode_findings(dict(ngram, cc_major=10)) == []
    mtp = dict(BASE, quantization="", cuda_version="13.2", driver_version="595.71.05",
               speculative={"algorithm": "NEXTN"})
    assert [f["report"] for f in _server_flags.spec_decode_findings(mtp)] == ["vllm#40756"]
    # warn by default (argv rendered), refuse on request
    assert "--speculative-algorithm" in _server_flags.render_server_args(near_limit)
    with pytest.raises(ValueError, match="sglang#34239"):
        _server_flags.render_server_args(dict(near_limit, speculative_known_crash_action="fail"))
    assert _server_flags.spec_decode_findings(dict(BASE)) == []


def test_n06_unknown_speculative_setting_is_an_error():
    with pytest.raises(ValueError, match="not known"):
        _server_flags.render_server_args(dict(BASE, quantization="", speculative={"algorithm": "EAGLE", "draft": "/m/d"}))


# --- N14 -------------------------------------------------------------------------------------------------------------

PURGED = ("ERROR: Could not find a version that satisfies the requirement torch==2.12.0.dev20260307+cu130 (from "
          "versions: 2.12.0.dev20260601+cu130, 2.12.0.dev20260602+cu130, 2.12.0.dev20260603+cu130)\n"
          "ERROR: No matching distribution found for torch==2.12.0.dev20260307+cu130\n")


def test_n14_purged_pin():
    assert pip_failure_class(PURGED) == "nightly_pin_purged"
    detail = pip_failure_class(PURGED, detail=True)
    assert detail["requirement"] == "torch==2.12.0.dev20260307+cu130" and detail["pin_date"] == "20260307"
    assert "torch_nightly_wheelhouse" in detail["remedy"] and detail["listed_dates"][0] == "20260601"


@pytest.mark.parametrize("text,expect", [
    # pytorch#143434 shape: listed versions are all older (a stale CUDA variant) -> purged as well
    ("ERROR: Could not find a version that satisfies the requirement torch==2.6.0.dev20241217 (from versions: "
     "2.6.0.dev20241019+cpu, 2.6.0.dev20241020+cpu)", "nightly_pin_purged"),
    # the pin's date falls between listed dates: the one build is missing, not pruned
    ("ERROR: Could not find a version that satisfies the requirement torchvision==0.26.0.dev20260307+cu130 (from "
     "versions: 0.26.0.dev20260301+cu130, 0.26.0.dev20260310+cu130)", "nightly_pin_missing"),
    # a release pin is not a nightly problem
    ("ERROR: Could not find a version that satisfies the requirement torch==2.11.0+cu124 (from versions: "
     "2.10.0+cu124)", "no_matching_distribution"),
    ("ERROR: Could not find a version that satisfies the requirement torch==2.12.0.dev20260307+cu130 (from "
     "versions: none)", "no_matching_distribution"),
    ("pytorch-triton==3.6.0+git5261b273 (from versions: 3.7.0+git1a2b3c4d)", "unknown"),
])
def test_n14_variants(text, expect):
    assert pip_failure_class(text) == expect


def test_n14_other_failures_keep_their_verdict():
    detail = pip_failure_class("ERROR: Could not install packages due to an OSError: [Errno 28] No space left on device",
                               detail=True)
    assert detail["verdict"] == "disk_full" and detail["remedy"] == ""


def test_n14_role_mirrors_once_and_installs_from_the_copy():
    role = os.path.join(ROOT, "roles", "torch_nightly")
    with open(os.path.join(role, "tasks", "mirror.yml")) as handle:
        tasks = yaml.safe_load(handle)
    names = [t["name"] for t in tasks]
    download = [t for t in tasks if "block" in t][0]
    assert download["run_once"] is True and "matched" in download["when"]
    steps = [list(t)[1] if list(t)[0] == "name" else list(t)[0] for t in download["block"]]
    assert "ansible.builtin.fetch" in steps and "ansible.builtin.command" in steps
    assert any("Copy the archived wheels" in n for n in names)
    with open(os.path.join(role, "defaults", "main.yml")) as handle:
        defaults = yaml.safe_load(handle)
    with open(os.path.join(role, "meta", "argument_specs.yml")) as handle:
        spec = yaml.safe_load(handle)["argument_specs"]["main"]["options"]
    for name in ("torch_nightly_wheelhouse_mirror", "torch_nightly_wheelhouse_mirror_dest"):
        assert spec[name]["default"] == defaults[name]
