"""Flag rendering, the SM12x allow-list and validation against two recorded SGLang parsers.

The parsers in tests/fixtures/service/parsers were recorded from the real PyPI sdists sglang 0.5.9 and 0.5.6 with
INTROSPECT_SCRIPT (see the fixture README); 0.5.6 predates ``--fp4-gemm-backend`` (added 2026-01-18, #16534).
"""

import argparse
import json
import os

import pytest

from conftest import FIXTURES
from ansible_collections.blackwell.sglang.plugins.module_utils import _server_flags as sf

PARSERS = os.path.join(FIXTURES, "service", "parsers")


def load(version):
    with open(os.path.join(PARSERS, "sglang-%s.json" % version)) as handle:
        data = json.load(handle)
    spec = sf.parser_spec_from_actions(data["actions"], allow_abbrev=data["allow_abbrev"])
    return spec, "sglang %s (commit %s)" % (data["version"], data["commit"] or "unknown")


def rebuild_argparse(version):
    """An argparse parser rebuilt from the recorded actions: the reference for argparse's own matching rules."""
    with open(os.path.join(PARSERS, "sglang-%s.json" % version)) as handle:
        data = json.load(handle)
    parser = argparse.ArgumentParser(add_help=False, exit_on_error=False)
    for action in data["actions"]:
        if not action["option_strings"] or action["dest"] == "help":
            continue
        kwargs = {"dest": action["dest"]}
        if action["nargs"] == 0:
            kwargs["action"] = "store_true"
        else:
            if action["nargs"] is not None:
                kwargs["nargs"] = action["nargs"]
            if action["choices"] is not None:
                kwargs["choices"] = action["choices"]
        parser.add_argument(*action["option_strings"], **kwargs)
    return parser


SM120 = {
    "model_path": "/srv/models/qwen",
    "served_model_name": "qwen",
    "host": "127.0.0.1",
    "port": 30000,
    "tp_size": 8,
    "mem_fraction_static": 0.85,
    "context_length": 262144,
    "enable_metrics": True,
    "attention_backend": "flashinfer",
    "fp4_gemm_backend": "flashinfer_cudnn",
    "moe_runner_backend": "flashinfer_cutlass",
    "kv_cache_dtype": "bf16",
    "extra_args": ["--disable-custom-all-reduce"],
}


def test_render_sm120_argv_is_exact():
    argv = sf.render_server_args(SM120)
    assert argv == [
        "--model-path", "/srv/models/qwen", "--served-model-name", "qwen", "--host", "127.0.0.1",
        "--port", "30000", "--tp-size", "8", "--mem-fraction-static", "0.85", "--context-length", "262144",
        "--attention-backend", "flashinfer", "--fp4-gemm-backend", "flashinfer_cudnn",
        "--moe-runner-backend", "flashinfer_cutlass", "--kv-cache-dtype", "bf16", "--enable-metrics",
        "--disable-custom-all-reduce"]


def test_sm120_argv_valid_in_real_059_parser():
    spec, revision = load("0.5.9")
    argv = sf.render_server_args(SM120)
    checked = sf.validate_args(argv, spec, revision)
    assert [c["option"] for c in checked][:3] == ["--model-path", "--served-model-name", "--host"]
    # and argparse itself (rebuilt from the same recording) accepts it
    ns = rebuild_argparse("0.5.9").parse_args(argv)
    assert ns.fp4_gemm_runner_backend == "flashinfer_cudnn"
    assert ns.tensor_parallel_size == "8" and ns.enable_metrics is True


def test_fp4_flag_unknown_in_056_names_flag_and_revision():
    spec, revision = load("0.5.6")
    argv = sf.render_server_args(SM120)
    with pytest.raises(sf.FlagError) as err:
        sf.validate_args(argv, spec, revision)
    assert err.value.flag == "--fp4-gemm-backend"
    assert "sglang 0.5.6" in str(err.value)
    assert "--fp4-gemm-backend" in str(err.value)


def test_same_argv_without_fp4_flag_valid_in_056():
    spec, revision = load("0.5.6")
    settings = dict(SM120, fp4_gemm_backend="")
    assert len(sf.validate_args(sf.render_server_args(settings), spec, revision)) == 12   # the API key is never rendered


@pytest.mark.parametrize("version", ["0.5.9", "0.5.6"])
def test_unknown_choice_lists_choices(version):
    spec, revision = load(version)
    with pytest.raises(sf.FlagError) as err:
        sf.validate_args(["--model-path", "/m", "--kv-cache-dtype", "fp8"], spec, revision)
    msg = str(err.value)
    assert "fp8_e4m3" in msg and "bf16" in msg and version in msg and err.value.value == "fp8"


def test_switch_with_value_is_rejected():
    spec, revision = load("0.5.9")
    with pytest.raises(sf.FlagError) as err:
        sf.validate_args(["--model-path", "/m", "--enable-metrics", "true"], spec, revision)
    assert "switch" in str(err.value)


@pytest.mark.parametrize("argv", [
    ["--model-path", "/m", "--tp", "2"],
    ["--model", "/m", "--port=30001"],
    ["--model-path", "/m", "--attention-backend=flashinfer"],
    ["--model-path", "/m", "--mem-frac", "0.8"],
])
def test_abbreviations_and_equals_match_argparse(argv):
    spec, revision = load("0.5.9")
    sf.validate_args(argv, spec, revision)
    rebuild_argparse("0.5.9").parse_args(argv)


def test_ambiguous_prefix_rejected_like_argparse():
    spec, revision = load("0.5.9")
    with pytest.raises(sf.FlagError) as err:
        sf.validate_args(["--model-path", "/m", "--enable"], spec, revision)
    assert "ambiguous" in str(err.value)
    with pytest.raises((argparse.ArgumentError, SystemExit)):
        rebuild_argparse("0.5.9").parse_args(["--model-path", "/m", "--enable"])


def test_environment_reference_accepted_for_api_key():
    spec, revision = load("0.5.9")
    sf.validate_args(["--model-path", "/m", "--api-key", "${SGLANG_API_KEY}"], spec, revision)


# Field report F-B12 validator cases plus the rest of the SM12x list.
@pytest.mark.parametrize("cc,flag,value,ok", [
    ("12.0", "--fp4-gemm-backend", "trtllm", False),
    ("12.0", "--attention-backend", "trtllm_mha", False),
    ("12.1", "--attention-backend", "fa3", False),
    ("12.0", "--moe-runner-backend", "auto", False),
    ("10.0", "--fp4-gemm-backend", "trtllm", True),
    ("12.0", "--attention-backend", "trtllm_mla", False),
    ("12.0", "--fp4-gemm-backend", "flashinfer_trtllm", False),
    ("12.0", "--fp4-gemm-backend", "flashinfer_cutedsl", False),
    ("12.0", "--moe-runner-backend", "flashinfer_trtllm", False),
    ("12.0", "--moe-runner-backend", "flashinfer_cutedsl", False),
    ("12.0", "--attention-backend", "auto", False),
    ("12.0", "--fp4-gemm-backend", "flashinfer_cudnn", True),
    ("12.0", "--fp4-gemm-backend", "flashinfer_cutlass", True),
    ("12.0", "--moe-runner-backend", "flashinfer_cutlass", True),
    ("12.0", "--attention-backend", "flashinfer", True),
    ("sm_120a", "--decode-attention-backend", "fa3", False),
    ("9.0", "--attention-backend", "fa3", True),
    (None, "--attention-backend", "fa3", True),
])
def test_sm12x_allow_list(cc, flag, value, ok):
    argv = ["--model-path", "/m", flag, value]
    if ok:
        assert sf.check_backends(argv, cc)[flag] == value
    else:
        with pytest.raises(sf.FlagError) as err:
            sf.check_backends(argv, cc)
        assert flag in str(err.value) and value in str(err.value)
        assert "compute capability 12." in str(err.value)


def test_unlisted_value_rejected_on_sm12x():
    with pytest.raises(sf.FlagError) as err:
        sf.check_backends(["--attention-backend", "wave"], "12.0")
    assert "allow-list" in str(err.value)


@pytest.mark.parametrize("bad,match", [
    ({"port": 70000}, "65535"),
    ({"tp_size": 0}, ">= 1"),
    ({"mem_fraction_static": 1.2}, "(0, 1)"),
    ({"extra_args": ["--api-key", "hunter2"]}, "world-readable"),
    ({"extra_args": ["--tp-size", "4"]}, "twice"),
    ({"model_path": ""}, "model_path"),
    ({"api_key_env": "SGLANG_API_KEY"}, "systemd credential"),
    ({"extra_args": ["--api-k", "hunter2"]}, "world-readable"),
])
def test_render_rejects_bad_settings(bad, match):
    with pytest.raises(sf.FlagError) as err:
        sf.render_server_args(dict(SM120, **bad))
    assert match in str(err.value)


def test_secret_never_rendered():
    """The key reaches SGLang as a systemd credential through the launcher: no --api-key token at all."""
    argv = sf.render_server_args(SM120)
    assert not any(t.startswith("--api") or t.startswith("--admin") for t in argv)


@pytest.mark.parametrize("version", ["0.5.9", "0.5.6"])
def test_help_text_fallback_agrees_with_recorded_actions(version):
    spec_actions, _rev = load(version)
    with open(os.path.join(PARSERS, "help-sglang-%s.txt" % version)) as handle:
        spec_help = sf.parse_help_text(handle.read())
    assert set(spec_help["options"]) == set(spec_actions["options"])
    for opt, entry in spec_actions["options"].items():
        assert spec_help["options"][opt]["takes_value"] == entry["takes_value"], opt
        if entry["choices"] is not None and all("," not in c and c for c in entry["choices"]):
            assert sorted(spec_help["options"][opt]["choices"]) == sorted(entry["choices"]), opt


def test_help_text_spec_validates_like_actions_spec():
    with open(os.path.join(PARSERS, "help-sglang-0.5.6.txt")) as handle:
        spec = sf.parse_help_text(handle.read())
    with pytest.raises(sf.FlagError) as err:
        sf.validate_args(sf.render_server_args(SM120), spec, "sglang 0.5.6 (--help)")
    assert err.value.flag == "--fp4-gemm-backend"


@pytest.mark.parametrize("text,expected", [
    ("12.0", (12, 0)), ("sm_120a", (12, 0)), ("120", (12, 0)), ("12.1", (12, 1)), ((10, 0), (10, 0)), ("", None)])
def test_parse_cc(text, expected):
    assert sf.parse_cc(text) == expected


def test_parse_cc_rejects_garbage():
    with pytest.raises(ValueError):
        sf.parse_cc("blackwell")
