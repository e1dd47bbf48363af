"""sglang_service role defaults vs argument_specs, and the controller-side filters."""

import os

import pytest
import yaml

from conftest import ROOT
from ansible_collections.blackwell.sglang.plugins.filter import sglang_service as flt

ROLE = os.path.join(ROOT, "roles", "sglang_service")


def _load(path):
    with open(os.path.join(ROLE, path)) as handle:
        return yaml.safe_load(handle)


def test_every_default_is_specified_with_the_same_default():
    defaults = _load("defaults/main.yml")
    options = _load("meta/argument_specs.yml")["argument_specs"]["main"]["options"]
    assert set(defaults) == set(options)
    for name, value in defaults.items():
        spec = options[name]
        if isinstance(value, str) and "{{" in value:
            assert "default" not in spec, name      # templated defaults are documented in the description
            continue
        assert spec.get("default") == value, name
        if "choices" in spec:
            assert value in spec["choices"], name


def test_api_key_is_no_log():
    options = _load("meta/argument_specs.yml")["argument_specs"]["main"]["options"]
    assert options["sglang_service_api_key"].get("no_log") is True


@pytest.mark.parametrize("argv,expected", [
    (["--model-path", "/srv/models/a b"], '--model-path "/srv/models/a b"'),
    (["--api-key", "${SGLANG_API_KEY}"], "--api-key ${SGLANG_API_KEY}"),
    (["--chat-template", "100%$HOME"], "--chat-template \"100%%$$HOME\""),
    (["--json-model-override-args", '{"a": 1}'], '--json-model-override-args "{\\"a\\": 1}"'),
])
def test_systemd_exec_quoting(argv, expected):
    assert flt.systemd_exec_args(argv) == expected


def test_systemd_exec_lines_per_flag():
    assert flt.systemd_exec_args(["--model-path", "/m", "--enable-metrics", "--tp-size", "8"], per_flag=True) == [
        "--model-path /m", "--enable-metrics", "--tp-size 8"]


def test_nvidia_device_groups_from_proc_devices():
    text = ("Character devices:\n  1 mem\n195 nvidia\n195 nvidia-modeset\n234 nvidia-uvm\n"
            "237 nvidia-caps\n\nBlock devices:\n  8 sd\n259 nvidia-fake-block\n")
    assert flt.nvidia_device_groups(text) == ["nvidia", "nvidia-modeset", "nvidia-uvm", "nvidia-caps"]
    assert flt.nvidia_device_groups("Character devices:\n  1 mem\n") == []


def test_rdma_device_groups_from_proc_devices():
    text = ("Character devices:\n195 nvidia\n231 infiniband_verbs\n231 infiniband_mad\n 10 misc\n\n"
            "Block devices:\n  8 sd\n")
    assert flt.nvidia_device_groups(text, prefix="infiniband") == ["infiniband_verbs", "infiniband_mad"]
    assert flt.nvidia_device_groups(text) == ["nvidia"]


def test_pinned_backend_evidence_uses_probe_result_shape():
    probe = {"device": {"name": "RTX PRO 6000", "compute_capability": "12.0"},
             "backends": {"gemm/flashinfer_cutlass": {"kind": "gemm", "sglang": "flashinfer_cutlass",
                                                      "verdict": "zeros", "reason": "all zero at m=128"},
                          "gemm/flashinfer_cudnn": {"kind": "gemm", "sglang": "flashinfer_cudnn", "verdict": "ok"}}}
    evidence = flt.sglang_pinned_backend_evidence(probe, "--fp4-gemm-backend", "flashinfer_cutlass")
    assert evidence["verdict"] == "zeros" and "all zero at m=128" in evidence["message"]
    assert flt.sglang_pinned_backend_evidence(probe, "--fp4-gemm-backend", "flashinfer_cudnn") is None
    assert flt.sglang_pinned_backend_evidence({}, "--fp4-gemm-backend", "flashinfer_cutlass") is None


def test_render_filter_errors_name_the_flag():
    from ansible.errors import AnsibleFilterError
    with pytest.raises(AnsibleFilterError) as err:
        flt.sglang_service_check_backends(["--model-path", "/m", "--attention-backend", "fa3"], "12.0")
    assert "--attention-backend fa3" in str(err.value)
