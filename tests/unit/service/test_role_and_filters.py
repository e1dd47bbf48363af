"""sglang_service role defaults vs argument_specs, and the controller-side filters."""

import base64
import json
import os

import pytest
import yaml

import ansible_run
from conftest import ROOT
from ansible_collections.blackwell.sglang.plugins.filter import sglang_service as flt
from ansible_collections.blackwell.sglang.plugins.module_utils import _server_flags, fp4_numerics

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


def _device_groups(tmp_path, proc_devices):
    """The character-device groups the role derives (vars/main.yml) from /proc/devices as install.yml reads it,
    [nvidia, rdma] per case (text, multi-node)."""
    with open(os.path.join(ROOT, "roles", "sglang_service", "vars", "main.yml"), encoding="utf-8") as handle:
        derived = yaml.safe_load(handle)
    paths = {k: {"exists": False} for k in ("persistenced_lib", "persistenced_usr", "persistenced_etc",
                                            "nvidia_modprobe", "rdma_cm")}
    tasks = []
    for case, (text, multinode) in proc_devices.items():
        tasks.append({"name": "keep " + case, "ansible.builtin.set_fact": {
            "groups_" + case: "{{ [__sglang_service_nvidia_groups, __sglang_service_rdma_groups] }}"},
            "vars": dict(derived, __sglang_service_proc_devices={"content": base64.b64encode(text.encode()).decode()},
                         __sglang_service_plan={"multinode": {"enabled": multinode}},
                         __sglang_service_paths={"paths": paths})})
    tasks.append({"name": "record", "ansible.builtin.copy": {
        "dest": str(tmp_path / "groups.json"), "mode": "0644",
        "content": "{{ {%s} | to_json }}" % ", ".join("'%s': groups_%s" % (c, c) for c in proc_devices)}})
    res = ansible_run.play(tmp_path, tasks)
    assert res.ok, res
    return json.loads((tmp_path / "groups.json").read_text())


def test_nvidia_and_rdma_device_groups_from_proc_devices(tmp_path):
    got = _device_groups(tmp_path, {
        "gpus": ("Character devices:\n  1 mem\n195 nvidia\n195 nvidia-modeset\n234 nvidia-uvm\n"
                 "237 nvidia-caps\n\nBlock devices:\n  8 sd\n259 nvidia-fake-block\n", True),
        "none": ("Character devices:\n  1 mem\n", True),
        "rdma": ("Character devices:\n195 nvidia\n231 infiniband_verbs\n231 infiniband_mad\n 10 misc\n\n"
                 "Block devices:\n  8 sd\n", True),
        # a single-node server opens no RDMA device
        "one_node": ("Character devices:\n231 infiniband_verbs\n", False)})
    assert got["gpus"] == [["nvidia", "nvidia-modeset", "nvidia-uvm", "nvidia-caps"], []]
    assert got["none"] == [[], []]
    assert got["rdma"] == [["nvidia"], ["infiniband_verbs", "infiniband_mad"]]
    assert got["one_node"] == [[], []]


SETTINGS = {"model_path": "/m", "fp4_gemm_backend": "flashinfer_cutlass", "moe_runner_backend": "flashinfer_cutlass"}


def test_a_chosen_backend_the_probe_found_broken_is_refused_with_the_evidence():
    """The evidence sglang_server_args refuses a chosen FP4 backend with (module_utils/fp4_numerics)."""
    probe = {"device": {"name": "RTX PRO 6000", "compute_capability": "12.0"},
             "backends": {"gemm/flashinfer_cutlass": {"kind": "gemm", "sglang": "flashinfer_cutlass",
                                                      "verdict": "zeros", "reason": "all zero at m=128"},
                          "gemm/flashinfer_cudnn": {"kind": "gemm", "sglang": "flashinfer_cudnn", "verdict": "ok"}}}
    found = fp4_numerics.pinned_flag_verdict(probe, "fp4_gemm_backend", "flashinfer_cutlass")
    assert "--fp4-gemm-backend flashinfer_cutlass: the FP4 probe found gemm/flashinfer_cutlass zeros" in found["message"]
    assert "all zero at m=128" in json.dumps(found) and found["verdict"] == "zeros"
    assert not fp4_numerics.pinned_flag_verdict(probe, "fp4_gemm_backend", "flashinfer_cudnn")
    assert not fp4_numerics.pinned_flag_verdict({}, "fp4_gemm_backend", "flashinfer_cutlass")
    assert _server_flags.render_server_args(SETTINGS)[:2] == ["--model-path", "/m"]


def test_render_errors_name_the_flag():
    argv = _server_flags.render_server_args({"model_path": "/m", "attention_backend": "fa3"})
    with pytest.raises(_server_flags.FlagError) as err:
        _server_flags.check_backends(argv, "12.0")
    assert "--attention-backend fa3" in str(err.value)
