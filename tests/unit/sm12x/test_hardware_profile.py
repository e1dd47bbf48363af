"""The SM12x hardware profile (module_utils/_hardware_profile.py) and its preflight checks (filter
blackwell.sglang.preflight_sm12x), on recorded and constructed GPU facts:

* RTX PRO 6000 (cc 12.0): tests/fixtures/nvidia_smi/rtx_pro_6000_x2_pcie_b28 (recorded);
* DGX Spark GB10 (cc 12.1, memory [N/A]): tests/fixtures/nvidia_smi/gb10_dgx_spark_constructed (CONSTRUCTED from the
  field reports, see its README);
* H200 (cc 9.0, outside the family): tests/fixtures/nvidia_smi/h200_sm90_driver580 (recorded).

Both fixtures go through gpu_facts' real collector (the fake nvidia-smi answers), then through the filters the roles
call. The role-level runs (preflight over a mixed inventory, the kernel plan, the probe key) are in test_roles.py."""

import copy
import os
import subprocess

import pytest

from ansible_collections.blackwell.sglang.plugins.filter.hardware_profile import hardware_profile
from ansible_collections.blackwell.sglang.plugins.filter.preflight import preflight_evaluate
from ansible_collections.blackwell.sglang.plugins.filter.preflight_sm12x import preflight_sm12x
from ansible_collections.blackwell.sglang.plugins.module_utils import _gpu
from ansible_collections.blackwell.sglang.plugins.module_utils import _hardware_profile as hp

# paths from this file (the module name conftest depends on the collection order)
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
FIXTURES = os.path.join(ROOT, "tests", "fixtures")

SMI = os.path.join(FIXTURES, "nvidia_smi")
MEMINFO = {"memory": {"mem_total_bytes": 127607296 * 1024, "mem_available_bytes": 98566144 * 1024}}


def _run(argv):
    proc = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=30)
    return proc.returncode, proc.stdout, proc.stderr


def facts(name):
    return _gpu.collect(_run, os.path.join(SMI, name, "nvidia-smi"), pcie=False)


GB10 = "gb10_dgx_spark_constructed"
RTX = "rtx_pro_6000_x2_pcie_b28"
H200 = "h200_sm90_driver580"


@pytest.mark.parametrize("values,archs,torch_list,uma", [
    (["12.0"], ["sm_120a"], "12.0a", False),
    (["12.1"], ["sm_121a"], "12.1a", True),
    (["12.1", "12.0", "12.1"], ["sm_120a", "sm_121a"], "12.0a 12.1a", True),
    (["sm_121a", "sm_120a"], ["sm_120a", "sm_121a"], "12.0a 12.1a", True),
    (["sm_120f"], ["sm_120f"], "12.0a", False),
])
def test_profile_of_capabilities_and_targets(values, archs, torch_list, uma):
    prof = hardware_profile(values)
    assert prof["target_archs"] == archs
    assert prof["torch_cuda_arch_list"] == torch_list
    assert prof["unified_memory"] is uma
    assert prof["family"] == "SM12x" and prof["outside"] == []


def test_profile_names_what_is_outside_the_family():
    prof = hardware_profile(["9.0", "12.0", "sm_120"])
    assert prof["outside"] == ["9.0"] and prof["unreadable"] == ["sm_120"] and prof["target_archs"] == ["sm_120a"]
    assert hardware_profile(["12.1"])["nvfp4_jit_arch_lists"] == {"12.1": "12.1a"}


def test_gb10_facts_parse_with_memory_na_and_give_the_unified_memory_profile():
    gb10 = facts(GB10)
    gpu = gb10["gpus"][0]
    assert gpu["compute_cap"] == "12.1" and gpu["memory_total_mib"] is None and gpu["name"] == "NVIDIA GB10"
    host = hp.host_capabilities(gb10["gpus"], "12.0")
    assert host == {"capabilities": ["12.1"], "source": "gpus", "outside": [], "unknown": [], "unified_memory": True}


def test_memory_na_alone_triggers_the_unified_memory_path():
    """A family GPU whose memory nvidia-smi cannot report ([N/A]) is unified memory whatever its name."""
    gb10 = copy.deepcopy(facts(GB10))
    gb10["gpus"][0].update(name="NVIDIA Graphics Device")
    assert hp.is_unified_memory(gb10["gpus"][0])
    gb10["gpus"][0]["compute_cap"] = "12.0"
    assert hp.is_unified_memory(gb10["gpus"][0])  # still [N/A]
    result = preflight_evaluate(gb10, {}, MEMINFO, {"target_compute_capability": "12.0", "tp_size": 1})
    check = dict((c["name"], c) for c in result["checks"])["gb10_memory_budget"]
    # (94.0 GiB available - 16 GiB headroom) / 121.7 GiB = 0.64
    assert check["status"] == "warn" and result["service_args"] == ["--mem-fraction-static", "0.64"]
    rtx = facts(RTX)
    assert not any(hp.is_unified_memory(g) for g in rtx["gpus"])


def _sm12x(gpu, tool=None, host=None, **config):
    cfg = {"fallback_capability": "12.0"}
    cfg.update(config)
    result = preflight_sm12x(gpu, tool or {}, host or {}, cfg)
    return result, dict((c["name"], c) for c in result["checks"])


@pytest.mark.parametrize("fixture,caps,archs,uma", [
    (RTX, ["12.0"], ["sm_120a"], False),
    (GB10, ["12.1"], ["sm_121a"], True),
])
def test_preflight_picks_the_archs_of_the_gpus(fixture, caps, archs, uma):
    result, checks = _sm12x(facts(fixture), fallback_capability="12.0")
    assert result["host"]["capabilities"] == caps and result["host"]["unified_memory"] is uma
    assert result["target_archs"] == archs and result["profile"]["target_archs"] == archs
    assert checks["gpu_family"]["status"] == "pass" and checks["kernel_target_archs"]["status"] == "pass"


def test_preflight_of_a_mixed_fleet_builds_for_both():
    """A GB10 host in a fleet whose other hosts recorded 12.0: the profile (and so the one wheel) holds both."""
    result, checks = _sm12x(facts(GB10), fleet_capabilities=["12.0", "12.0"])
    assert result["profile"]["capabilities"] == ["12.0", "12.1"]
    assert result["target_archs"] == ["sm_120a", "sm_121a"]
    assert result["host"]["capabilities"] == ["12.1"]
    assert checks["kernel_target_archs"]["status"] == "pass"


def test_targets_pinned_to_sm120a_for_a_fleet_with_gb10_fail_before_building():
    """F-S13: a list whose only SM12x entry is sm_120a fails for 12.1 and passes for 12.0."""
    _result, checks = _sm12x(facts(GB10), target_archs=["sm_120a"])
    check = checks["kernel_target_archs"]
    assert check["status"] == "fail" and check["message"].startswith("sgl_kernel_arch_gap")
    assert "sm_121a (compute capability 12.1)" in check["message"] and "add sm_121a" in check["remedy"]
    _result, checks = _sm12x(facts(RTX), target_archs=["sm_120a"])
    assert checks["kernel_target_archs"]["status"] == "pass"
    # the +cu130 list of the report (sm_121a among others) passes; the PyPI list does not
    _result, checks = _sm12x(facts(GB10), target_archs=["sm_100", "sm_110a", "sm_120a", "sm_121a", "sm_90"])
    assert checks["kernel_target_archs"]["status"] == "pass"
    _result, checks = _sm12x(facts(GB10), target_archs=["sm_100a", "sm_101a", "sm_120a", "sm_80", "sm_87"])
    assert checks["kernel_target_archs"]["status"] == "fail"


def test_a_gpu_outside_the_family_is_refused_naming_the_family_and_the_gpu():
    h200 = facts(H200)
    _result, checks = _sm12x(h200, require_gpu=True)
    check = checks["gpu_family"]
    assert check["status"] == "fail" and check["message"].startswith("gpu_outside_family")
    assert "NVIDIA H200" in check["message"] and "compute capability 9.0" in check["message"]
    assert "SM12x (12.0 sm_120a: RTX PRO 6000 Blackwell / RTX 5090; 12.1 sm_121a: DGX Spark GB10)" in check["message"]
    # a build-only host (require_gpu false): a warning, and the targets come from the inventory
    result, checks = _sm12x(h200, require_gpu=False, fallback_capability="12.1")
    assert checks["gpu_family"]["status"] == "warn" and result["target_archs"] == ["sm_121a"]


@pytest.mark.parametrize("nccl,expect_nvls", [("2.30.4", True), ("2.30.7", True), ("2.30.3", False), (None, False)])
def test_service_env_on_the_gb10_deepgemm_off_and_nvls_from_2_30_4(nccl, expect_nvls):
    tool = {"torch": {"present": True, "nccl": nccl}} if nccl else {}
    result, checks = _sm12x(facts(GB10), tool)
    assert result["service_env"].get("SGLANG_ENABLE_JIT_DEEPGEMM") == "0"  # S16
    assert ("NCCL_NVLS_ENABLE" in result["service_env"]) is expect_nvls  # S21
    assert "SGLANG_ENABLE_JIT_DEEPGEMM=0 (S16" in checks["sm12x_service_env"]["message"]


def test_nvls_is_left_alone_with_nvlink_and_deepgemm_outside_the_family():
    topology = {"links": {"GPU0": {"GPU1": "NV18"}, "GPU1": {"GPU0": "NV18"}}}
    assert hp.service_env({"capabilities": ["12.0"]}, "2.30.4", topology)["env"] == {"SGLANG_ENABLE_JIT_DEEPGEMM": "0"}
    assert hp.service_env({"capabilities": []}, "2.30.4", None)["env"] == {}  # not SM12x: no rule applies
    assert hp.service_env({"capabilities": ["12.1"]}, "2.30.4", None, deepgemm_off=False)["env"] == {
        "NCCL_NVLS_ENABLE": "0"}


def test_nccl_smoke_is_capped_on_unified_memory_only():
    """F-S04: the 16 GiB plan on cc 12.1 is capped (1 GiB, and at most 1/8 of MemAvailable for both copies);
    the same plan on cc 12.0 is unchanged."""
    result, checks = _sm12x(facts(GB10), host=MEMINFO, smoke_size_mb=16384)
    assert result["smoke"]["size_mb"] == 1024 and result["smoke"]["capped"] is True
    assert checks["nccl_smoke_size"]["status"] == "warn"
    assert checks["nccl_smoke_size"]["message"].startswith("nccl_smoke_too_large_uma")
    small = {"memory": {"mem_total_bytes": 127607296 * 1024, "mem_available_bytes": 8 * 1024 ** 3}}
    assert _sm12x(facts(GB10), host=small, smoke_size_mb=16384)[0]["smoke"]["size_mb"] == 512
    result, checks = _sm12x(facts(RTX), host=MEMINFO, smoke_size_mb=16384)
    assert result["smoke"] == {"size_mb": 16384, "capped": False, "message": ""} and "nccl_smoke_size" not in checks


def test_nvcc_and_torch_cover_every_capability_of_the_fleet():
    tool = {"nvcc": {"present": True, "nvcc": "/usr/local/cuda/bin/nvcc", "version": "12.8.93",
                     "arch_list": ["compute_90", "compute_100", "compute_120"]},
            "torch": {"present": True, "version": "2.12.0.dev20260307+cu130", "arch_list": ["sm_90", "sm_120"]}}
    _result, checks = _sm12x(facts(GB10), tool, fleet_capabilities=["12.0"])
    assert checks["nvcc_target_archs"]["status"] == "fail" and "compute_121" in checks["nvcc_target_archs"]["message"]
    # plain sm_120 SASS runs on 12.1 too
    assert checks["torch_arch_profile"]["status"] == "pass"
    tool["nvcc"]["arch_list"].append("compute_121")
    tool["torch"]["arch_list"] = ["sm_90", "sm_100"]
    _result, checks = _sm12x(facts(GB10), tool, fleet_capabilities=["12.0"])
    assert checks["nvcc_target_archs"]["status"] == "pass"
    assert checks["torch_arch_profile"]["status"] == "fail" and "12.0, 12.1" in checks["torch_arch_profile"]["message"]
