"""The stack contract (roles/sglang_stack): a role variable that aliases a contract value and is set to something else
(an inventory that still sets the role's old name) is refused by the preflight, before anything changes on the host,
with a message naming both variables and both values; a retired name (one that no role reads any more) is refused
whatever its value, with a message naming the contract variable to set instead."""

import os
import pathlib
import re

import pytest
import yaml

from harness import ROOT, run_role

from ansible_collections.blackwell.sglang.plugins.module_utils import _inputs


def _contract():
    with open(os.path.join(ROOT, "roles", "sglang_stack", "defaults", "main.yml")) as handle:
        return yaml.safe_load(handle)


CASES = [
    # (id, overrides, needles)
    ("retired-release-torch-pin", {"sglang_release_torch_version": "2.13.0+cu130"},
     ["sglang_release_torch_version is no longer read", "Set sglang_stack_torch_version"]),
    # retired: refused even with the contract's own value, since no role would read it
    ("retired-torch-pin", {"torch_nightly_version": "2.12.0.dev20260307+cu130"},
     ["torch_nightly_version is no longer read", "Set sglang_stack_torch_version"]),
    ("retired-venv", {"torch_nightly_venv": "/srv/venv"}, ["torch_nightly_venv is no longer read", "sglang_stack_venv"]),
    # retired: refused even when it equals the contract's value set beside it
    ("retired-release-flashinfer-pin-beside-the-contract",
     {"sglang_release_flashinfer_version": "0.6.17", "sglang_stack_flashinfer_version": "0.6.17"},
     ["sglang_release_flashinfer_version is no longer read", "Set sglang_stack_flashinfer_version"]),
    ("retired-flashinfer-pin", {"flashinfer_version": "0.6.5"},
     ["flashinfer_version is no longer read", "Set sglang_stack_flashinfer_version"]),
    ("retired-kernel-patches", {"sgl_kernel_sm120_patches": ["cmake_policy_guards"]},
     ["sgl_kernel_sm120_patches is no longer read", "Set sglang_stack_kernel_patches"]),
    ("retired-release-cuda-version", {"sglang_release_cuda_version": "13.1"},
     ["sglang_release_cuda_version is no longer read", "Set sglang_stack_cuda_version"]),
    ("retired-release-manifest-probe", {"sglang_release_manifest_probe": {}},
     ["sglang_release_manifest_probe is no longer read", "Set sglang_stack_probe_result"]),
    ("retired-audit-root", {"sglang_audit_root": "/srv/sglang"},
     ["sglang_audit_root is no longer read", "Set sglang_stack_root"]),
    ("retired-sglang-monitoring-release-current", {"sglang_monitoring_release_current": "/srv/sglang/current"},
     ["sglang_monitoring_release_current is no longer read", "Set sglang_stack_current"]),
    ("retired-sglang-benchmark-port", {"sglang_benchmark_port": 30001},
     ["sglang_benchmark_port is no longer read", "Set sglang_stack_service_port"]),
    ("retired-fp4-probe-has-gpu", {"fp4_probe_has_gpu": True},
     ["fp4_probe_has_gpu is no longer read", "Set sglang_stack_has_target_gpu"]),
    ("retired-cuda-toolchain-env-file", {"cuda_toolchain_env_file": "/etc/blackwell-sglang/cuda.env"},
     ["cuda_toolchain_env_file is no longer read", "Set sglang_stack_cuda_env_file"]),
    ("retired-preflight-venv", {"preflight_venv": "/srv/venv"},
     ["preflight_venv is no longer read", "Set sglang_stack_venv"]),
    ("retired-preflight-target-compute-capability", {"preflight_target_compute_capability": "12.1"},
     ["preflight_target_compute_capability is no longer read", "Set sglang_stack_compute_capability"]),
    ("retired-service-tp", {"sglang_service_tp_size": 8}, ["sglang_service_tp_size is no longer read", "Set sglang_stack_service_tp_size"]),
    ("retired-service-model-path", {"sglang_service_model_path": "/srv/models/m"},
     ["sglang_service_model_path is no longer read", "Set sglang_stack_model_path"]),
]


@pytest.mark.parametrize("case_id, overrides, needles", CASES, ids=[c[0] for c in CASES])
def test_preflight_refuses_an_alias_that_differs_from_the_contract(tmp_path, case_id, overrides, needles):
    run = run_role(tmp_path, "preflight", overrides)
    assert run.refused_before_change("stack contract:", *needles), run


def test_preflight_accepts_an_alias_equal_to_the_contract(tmp_path):
    """The same value under both names (also "8" against 8) is no divergence: the run gets past the check."""
    run = run_role(tmp_path, "preflight", {"sglang_release_torch_version": "2.14.0+cu130", "sglang_stack_torch_version": "2.14.0+cu130"})
    assert "stack contract:" not in run.out, run
    assert "Read GPUs, driver, topology and PCIe P2P state" in run.out, run


def test_every_alias_names_a_contract_variable():
    contract = _contract()
    aliases = contract["sglang_stack_pin_aliases"]
    assert aliases, "the contract lists its aliases"
    for alias, name in aliases.items():
        assert name in contract, "%s aliases %s, which roles/sglang_stack does not define" % (alias, name)
        assert not alias.startswith("sglang_stack_"), alias


def test_every_alias_defaults_to_its_contract_variable():
    """Each alias is its role's default "{{ <contract variable> }}": equal unless something overrides it."""
    for alias, name in _contract()["sglang_stack_pin_aliases"].items():
        role = next(r for r in sorted(os.listdir(os.path.join(ROOT, "roles"))) if alias.startswith(r + "_"))
        with open(os.path.join(ROOT, "roles", role, "defaults", "main.yml")) as handle:
            defaults = yaml.safe_load(handle)
        assert defaults.get(alias) == "{{ %s }}" % name, (role, alias, defaults.get(alias))


def test_every_retired_name_points_at_a_contract_variable_and_is_read_nowhere():
    """A retired name is neither an alias any more nor defined or read by a role's defaults, vars, tasks or templates."""
    contract = _contract()
    retired = contract["sglang_stack_retired_names"]
    assert retired, "the contract lists the names it retired"
    assert not set(retired) & set(contract["sglang_stack_pin_aliases"])
    for old, name in retired.items():
        assert name in contract, "%s is retired for %s, which roles/sglang_stack does not define" % (old, name)
    # a dict key of the same spelling (the release key's flashinfer_version field) is no variable
    pattern = re.compile(r"\b(%s)\b(?!\s*:)" % "|".join(map(re.escape, retired)))
    found = []
    for path in sorted(pathlib.Path(ROOT, "roles").glob("*/*/**/*")):
        part = path.relative_to(ROOT).parts
        if path.is_file() and part[1] != "sglang_stack" and part[2] in ("defaults", "vars"):
            found += ["%s: %s" % (path.relative_to(ROOT), key) for key in (yaml.safe_load(path.read_text()) or {}) if key in retired]
        if path.is_file() and part[1] != "sglang_stack" and part[2] in ("defaults", "vars", "tasks", "templates", "handlers"):
            found += ["%s:%d" % (path.relative_to(ROOT), n) for n, line in enumerate(path.read_text().splitlines(), 1)
                      if pattern.search(line.split("#", 1)[0])]
    assert not found, "retired names still read by a role:\n" + "\n".join(found)


def test_alias_problems_refuse_a_retired_name_whatever_its_value():
    out = _inputs.alias_problems({"old_venv": "/opt/sglang/venv"}, {}, {}, {"old_venv": "sglang_stack_venv"})
    assert out == ["old_venv is no longer read: the roles read the stack contract's sglang_stack_venv. Set "
                   "sglang_stack_venv (inventories/<name>/group_vars/all/sglang_stack.yml) and remove old_venv from "
                   "the inventory"]
    assert _inputs.alias_problems({}, {}, {}, {"old_venv": "sglang_stack_venv"}) == []


def test_alias_problems_compare_text_of_scalars_and_whole_lists():
    aliases = {"a_port": "sglang_stack_port", "a_list": "sglang_stack_list"}
    contract = {"sglang_stack_port": 30000, "sglang_stack_list": ["x", "y"]}
    assert _inputs.alias_problems({"a_port": "30000", "a_list": ["x", "y"]}, aliases, contract) == []
    out = _inputs.alias_problems({"a_port": 30001, "a_list": ["y", "x"]}, aliases, contract)
    assert len(out) == 2
    assert out[0].startswith("a_list is ['y', 'x'] but the stack contract's sglang_stack_list is ['x', 'y']")
    assert out[1].startswith("a_port is 30001 but the stack contract's sglang_stack_port is 30000")
    with pytest.raises(ValueError, match="sglang_stack_missing"):
        _inputs.alias_problems({"b": 1}, {"b": "sglang_stack_missing"}, {})
