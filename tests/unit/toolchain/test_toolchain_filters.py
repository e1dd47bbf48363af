"""Unit tests for the toolchain filters, plugins/module_utils/_cuda_toolchain.py and the nvcc facts of
toolchain_facts (module_utils/_toolchain.collect_nvcc, what the module runs).

Inputs are the field-report fixtures B04, B08, B14, B20 and B21 (docs: ../shared/domain/field-reports.md). B08 (every
CUDA wheel at one major.minor) is checked by cuda_toolchain's install task: tests/unit/toolchain/test_cuda_wheel_minor.py.
"""

import pytest

from ansible.errors import AnsibleFilterError
from ansible_collections.blackwell.sglang.plugins.filter.torch_version import torch_version
from ansible_collections.blackwell.sglang.plugins.module_utils._cuda_toolchain import arch_coverage, compute_cap_tuple
from ansible_collections.blackwell.sglang.plugins.module_utils._toolchain import collect_nvcc

NVCC_12_6 = """nvcc: NVIDIA (R) Cuda compiler driver
Copyright (c) 2005-2024 NVIDIA Corporation
Built on Wed_Aug_14_10:10:22_PDT_2024
Cuda compilation tools, release 12.6, V12.6.68
Build cuda_12.6.r12.6/compiler.34714021_0
"""

NVCC_13_0 = """nvcc: NVIDIA (R) Cuda compiler driver
Copyright (c) 2005-2025 NVIDIA Corporation
Built on Wed_Aug_20_01:58:59_PM_PDT_2025
Cuda compilation tools, release 13.0, V13.0.88
Build cuda_13.0.r13.0/compiler.36424714_0
"""

# recorded from the nvidia-cuda-nvcc 13.0.88 wheel on this project's sandbox host
LIST_ARCH_13_0 = "\n".join("compute_%s" % a for a in
                           ("75", "80", "86", "87", "88", "89", "90", "100", "110", "103", "120", "121")) + "\n"
# CUDA 12.6 predates SM120 (B04)
LIST_ARCH_12_6 = "compute_50\ncompute_52\ncompute_60\ncompute_70\ncompute_75\ncompute_80\ncompute_86\ncompute_89\ncompute_90\n"


def nvcc_facts(tmp_path, version_out, arch_out=""):
    """toolchain_facts' nvcc facts for a toolkit whose nvcc prints ``version_out`` / ``arch_out``."""
    nvcc = tmp_path / "cuda" / "bin" / "nvcc"
    nvcc.parent.mkdir(parents=True)
    nvcc.write_text("#!/bin/sh\nexit 0\n")
    nvcc.chmod(0o755)

    def run(argv):
        return 0, version_out if argv[1] == "--version" else arch_out, ""
    return collect_nvcc(run, str(tmp_path / "cuda"), "")


@pytest.mark.parametrize("text, expected", [
    (NVCC_13_0, "13.0.88"),
    (NVCC_12_6, "12.6.68"),
    ("Cuda compilation tools, release 11.0, V11.0.221\nBuild cuda_11.0_bu.TC445_37.28845127_0\n", "11.0.221"),
    ("Cuda compilation tools, release 11.1, V11.1.105\nBuild cuda_11.1.TC455_06.29190527_0\n", "11.1.105"),
])
def test_nvcc_version_b21_formats(tmp_path, text, expected):
    facts = nvcc_facts(tmp_path, text)
    assert (facts["version"], facts["version_error"]) == (expected, None)


@pytest.mark.parametrize("text", ["", "nvcc fatal   : Unsupported gpu architecture 'compute_120a'"])
def test_nvcc_version_rejects_output_without_release_line(tmp_path, text):
    facts = nvcc_facts(tmp_path, text)
    assert facts["version"] is None and "release X.Y" in facts["version_error"]


def test_nvcc_gpu_arches_b04(tmp_path):
    arches = nvcc_facts(tmp_path / "13.0", NVCC_13_0, LIST_ARCH_13_0)["arch_list"]
    assert arches[0] == "compute_75"
    assert "compute_120" in arches and "compute_121" in arches
    old = nvcc_facts(tmp_path / "12.6", NVCC_12_6, LIST_ARCH_12_6)["arch_list"]
    assert "compute_120" not in old
    assert old[-1] == "compute_90"
    assert nvcc_facts(tmp_path / "none", NVCC_13_0, "")["arch_list"] == []


def test_nvcc_gpu_arches_keeps_suffix_and_dedups(tmp_path):
    assert nvcc_facts(tmp_path, NVCC_13_0, "compute_120a compute_120a\ncompute_100f")["arch_list"] == [
        "compute_120a", "compute_100f"]


# B14 fixtures
OLD_TORCH = ['sm_50', 'sm_60', 'sm_70', 'sm_75', 'sm_80', 'sm_86', 'sm_90']
CU130_TORCH = ['sm_75', 'sm_80', 'sm_86', 'sm_90', 'sm_100', 'sm_120', 'compute_120']


def test_arch_coverage_b14_old_torch_fails_for_sm120():
    result = arch_coverage(OLD_TORCH, "12.0")
    assert result["covered"] is False
    assert result["via"] is None
    assert "no kernel image" in result["message"]


def test_arch_coverage_b14_cu130_torch_exact():
    result = arch_coverage(CU130_TORCH, "12.0")
    assert result == {"covered": True, "via": "sm_120", "kind": "exact", "compute_cap": "12.0", "warning": None,
                      "message": "sm_120 has SASS for compute capability 12.0"}


def test_arch_coverage_gb10_sass_same_major():
    # sm_120 SASS runs on 12.1 (same major, later minor)
    result = arch_coverage(CU130_TORCH, "12.1")
    assert result["covered"] is True
    assert (result["kind"], result["via"]) == ("sass", "sm_120")


def test_arch_coverage_ptx_only_warns():
    result = arch_coverage(['sm_80', 'sm_90', 'compute_90'], "12.0")
    assert result["covered"] is True
    assert result["kind"] == "ptx" and result["via"] == "compute_90"
    assert "JIT" in result["warning"]


def test_arch_coverage_arch_specific_only_exact():
    # sm_120a cubins do not run on 12.1 and sm_100 does not run on 12.0 (different major)
    assert arch_coverage(['sm_120a'], "12.1")["covered"] is False
    assert arch_coverage(['sm_120a'], "12.0")["kind"] == "exact"
    assert arch_coverage(['sm_100', 'sm_103'], "12.0")["covered"] is False
    # PTX newer than the GPU does not help
    assert arch_coverage(['compute_121'], "12.0")["covered"] is False


def test_arch_coverage_cpu_torch_has_empty_list():
    assert arch_coverage([], "12.0")["covered"] is False


@pytest.mark.parametrize("cap, expected", [
    ("12.0", (12, 0)), (12.0, (12, 0)), ("120", (12, 0)), ("90", (9, 0)), ("sm_120", (12, 0)),
    ("compute_120a", (12, 0)), ((8, 9), (8, 9)), ([12, 1], (12, 1)),
])
def test_compute_cap_spellings(cap, expected):
    assert compute_cap_tuple(cap) == expected


@pytest.mark.parametrize("bad", ["twelve", "", "1"])
def test_arch_coverage_rejects_bad_cap(bad):
    with pytest.raises(ValueError):
        arch_coverage(CU130_TORCH, bad)


# B20 fixtures
def test_torch_version_nightly():
    info = torch_version("2.12.0.dev20260307+cu130")
    assert info["release"] == [2, 12, 0]
    assert info["dev"] == 20260307
    assert info["local"] == "cu130"
    assert info["cuda"] == "13.0"
    assert info["is_nightly"] is True
    assert info["public"] == "2.12.0.dev20260307"
    assert info["major_minor"] == "2.12"


def test_torch_version_cpu_and_stable_and_source():
    cpu = torch_version("2.13.0+cpu")
    assert (cpu["cuda"], cpu["local"], cpu["is_nightly"], cpu["public"]) == (None, "cpu", False, "2.13.0")
    stable = torch_version("2.11.0+cu130")
    assert (stable["cuda"], stable["is_nightly"]) == ("13.0", False)
    src = torch_version("2.10.0a0+git1a2b3c4")
    assert src["source_build"] is True and src["cuda"] is None


def test_torch_version_normalises_for_pin_comparison():
    # a pin written with different spelling is the same PEP 440 version
    assert torch_version("2.12.0.dev20260307+CU130")["version"] == torch_version("2.12.0dev20260307+cu130")["version"]
    assert torch_version("0.6.5+cu130")["public"] == torch_version("0.6.5")["version"]


@pytest.mark.parametrize("bad", ["2.0.0.nv23.05", None, "dev20221107"])
def test_torch_version_rejects_non_pep440(bad):
    with pytest.raises(AnsibleFilterError):
        torch_version(bad)
