"""The stack contract (roles/sglang_stack): every role reads a shared value by its contract name (sglang_stack_*). A
retired role name (one that no role reads any more, e.g. sglang_release_torch_version) set by an inventory is refused
by the preflight, before anything changes on the host, whatever its value, with a message naming the contract
variable to set instead."""

import os
import pathlib
import re

import pytest
import yaml

from harness import ROOT, run_role


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
]


# Role defaults that read a contract value under a role's own name, each for a setting of its own that merely starts
# from it, not a second name for the value.
OWN_SETTINGS = {
    # StateDirectory=/CacheDirectory= names that default to the unit name
    "sglang_service_state_dir_name", "sglang_service_cache_dir_name",
    # the model the unit serves: the rollout sets it to the manifest's model, whatever sglang_stack_model_path says
    "sglang_service_model_path",
}


BATCH = {case_id: ("preflight", None, overrides) for case_id, overrides, _needles in CASES}


@pytest.mark.parametrize("case_id, overrides, needles", CASES, ids=[c[0] for c in CASES])
def test_preflight_refuses_a_retired_name(batches, tmp_path, case_id, overrides, needles):
    run = batches.run("stack_contract", BATCH, case_id,
                      lambda got: got.refused_before_change("stack contract:", *needles), tmp_path)
    assert run.refused_before_change("stack contract:", *needles), run


def test_preflight_names_every_retired_name_set_in_one_message(tmp_path):
    run = run_role(tmp_path, "preflight", {"sglang_service_port": 30001, "sglang_release_torch_version": "2.13.0+cu130"})
    assert run.refused_before_change(
        "stack contract: sglang_release_torch_version is no longer read: the roles read the stack contract's "
        "sglang_stack_torch_version. Set sglang_stack_torch_version (inventories/<name>/group_vars/all/sglang_stack.yml) "
        "and remove sglang_release_torch_version from the inventory; sglang_service_port is no longer read",
        "Set sglang_stack_service_port"), run


def test_preflight_accepts_the_contract_names(tmp_path):
    """The values set by their contract names (also "1" for 1) get past the check."""
    run = run_role(tmp_path, "preflight", {"sglang_stack_torch_version": "2.14.0+cu130", "sglang_stack_service_tp_size": "1"})
    assert "stack contract:" not in run.out, run
    assert "Read GPUs, driver, topology and PCIe P2P state" in run.out, run


def test_no_role_default_is_a_second_name_for_a_contract_value():
    """A role default that is only "{{ sglang_stack_<name> }}" would be an alias: the roles read the contract name."""
    alias = re.compile(r"^\{\{\s*sglang_stack_\w+\s*\}\}$")
    found = []
    for path in sorted(pathlib.Path(ROOT, "roles").glob("*/defaults/*.yml")) + sorted(pathlib.Path(ROOT, "roles").glob("*/vars/*.yml")):
        if path.parts[-3] == "sglang_stack":
            continue
        for key, value in (yaml.safe_load(path.read_text()) or {}).items():
            if isinstance(value, str) and alias.match(value.strip()) and key not in OWN_SETTINGS:
                found.append("%s: %s: %s" % (path.relative_to(ROOT), key, value))
    assert not found, "role defaults that alias the stack contract:\n" + "\n".join(found)


def test_every_retired_name_points_at_a_contract_variable_and_is_read_nowhere():
    """A retired name is neither defined nor read by a role's defaults, vars, tasks or templates."""
    contract = _contract()
    retired = contract["sglang_stack_retired_names"]
    assert retired, "the contract lists the names it retired"
    assert "sglang_stack_pin_aliases" not in contract, "no role aliases a contract value any more"
    for old, name in retired.items():
        assert name in contract, "%s is retired for %s, which roles/sglang_stack does not define" % (old, name)
        assert not old.startswith("sglang_stack_"), old
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
