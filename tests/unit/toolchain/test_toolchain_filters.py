"""Unit tests for the toolchain filters and plugins/module_utils/_cuda_toolchain.py.

Inputs are the field-report fixtures B04, B08, B14, B20 and B21 (docs: ../shared/domain/field-reports.md).
"""

import pytest

from ansible.errors import AnsibleFilterError
from ansible_collections.blackwell.sglang.plugins.filter.cuda_arch_coverage import cuda_arch_coverage
from ansible_collections.blackwell.sglang.plugins.filter.cuda_release_mismatches import cuda_release_mismatches
from ansible_collections.blackwell.sglang.plugins.filter.nvcc_gpu_arches import nvcc_gpu_arches
from ansible_collections.blackwell.sglang.plugins.filter.nvcc_version import nvcc_version
from ansible_collections.blackwell.sglang.plugins.filter.torch_version import torch_version
from ansible_collections.blackwell.sglang.plugins.module_utils._cuda_toolchain import compute_cap_tuple

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


@pytest.mark.parametrize("text, expected", [
    (NVCC_13_0, {"version": "13.0.88", "release": "13.0", "major": 13, "minor": 0, "patch": 88}),
    (NVCC_12_6, {"version": "12.6.68", "release": "12.6", "major": 12, "minor": 6, "patch": 68}),
    ("Cuda compilation tools, release 11.0, V11.0.221\nBuild cuda_11.0_bu.TC445_37.28845127_0\n",
     {"version": "11.0.221", "release": "11.0", "major": 11, "minor": 0, "patch": 221}),
    ("Cuda compilation tools, release 11.1, V11.1.105\nBuild cuda_11.1.TC455_06.29190527_0\n",
     {"version": "11.1.105", "release": "11.1", "major": 11, "minor": 1, "patch": 105}),
])
def test_nvcc_version_b21_formats(text, expected):
    assert nvcc_version(text) == expected


@pytest.mark.parametrize("text", ["", "nvcc fatal   : Unsupported gpu architecture 'compute_120a'", None])
def test_nvcc_version_rejects_output_without_release_line(text):
    with pytest.raises(AnsibleFilterError, match="release X.Y"):
        nvcc_version(text)


def test_nvcc_gpu_arches_b04():
    arches = nvcc_gpu_arches(LIST_ARCH_13_0)
    assert arches[0] == "compute_75"
    assert "compute_120" in arches and "compute_121" in arches
    old = nvcc_gpu_arches(LIST_ARCH_12_6)
    assert "compute_120" not in old
    assert old[-1] == "compute_90"
    assert nvcc_gpu_arches("") == []


def test_nvcc_gpu_arches_keeps_suffix_and_dedups():
    assert nvcc_gpu_arches("compute_120a compute_120a\ncompute_100f") == ["compute_120a", "compute_100f"]


# B14 fixtures
OLD_TORCH = ['sm_50', 'sm_60', 'sm_70', 'sm_75', 'sm_80', 'sm_86', 'sm_90']
CU130_TORCH = ['sm_75', 'sm_80', 'sm_86', 'sm_90', 'sm_100', 'sm_120', 'compute_120']


def test_arch_coverage_b14_old_torch_fails_for_sm120():
    result = cuda_arch_coverage(OLD_TORCH, "12.0")
    assert result["covered"] is False
    assert result["via"] is None
    assert "no kernel image" in result["message"]


def test_arch_coverage_b14_cu130_torch_exact():
    result = cuda_arch_coverage(CU130_TORCH, "12.0")
    assert result == {"covered": True, "via": "sm_120", "kind": "exact", "compute_cap": "12.0", "warning": None,
                      "message": "sm_120 has SASS for compute capability 12.0"}


def test_arch_coverage_gb10_sass_same_major():
    # sm_120 SASS runs on 12.1 (same major, later minor)
    result = cuda_arch_coverage(CU130_TORCH, "12.1")
    assert result["covered"] is True
    assert (result["kind"], result["via"]) == ("sass", "sm_120")


def test_arch_coverage_ptx_only_warns():
    result = cuda_arch_coverage(['sm_80', 'sm_90', 'compute_90'], "12.0")
    assert result["covered"] is True
    assert result["kind"] == "ptx" and result["via"] == "compute_90"
    assert "JIT" in result["warning"]


def test_arch_coverage_arch_specific_only_exact():
    # sm_120a cubins do not run on 12.1 and sm_100 does not run on 12.0 (different major)
    assert cuda_arch_coverage(['sm_120a'], "12.1")["covered"] is False
    assert cuda_arch_coverage(['sm_120a'], "12.0")["kind"] == "exact"
    assert cuda_arch_coverage(['sm_100', 'sm_103'], "12.0")["covered"] is False
    # PTX newer than the GPU does not help
    assert cuda_arch_coverage(['compute_121'], "12.0")["covered"] is False


def test_arch_coverage_cpu_torch_has_empty_list():
    assert cuda_arch_coverage([], "12.0")["covered"] is False


@pytest.mark.parametrize("cap, expected", [
    ("12.0", (12, 0)), (12.0, (12, 0)), ("120", (12, 0)), ("90", (9, 0)), ("sm_120", (12, 0)),
    ("compute_120a", (12, 0)), ((8, 9), (8, 9)), ([12, 1], (12, 1)),
])
def test_compute_cap_spellings(cap, expected):
    assert compute_cap_tuple(cap) == expected


@pytest.mark.parametrize("bad", ["twelve", "", "1"])
def test_arch_coverage_rejects_bad_cap(bad):
    with pytest.raises(AnsibleFilterError):
        cuda_arch_coverage(CU130_TORCH, bad)


def test_arch_coverage_rejects_string_list():
    with pytest.raises(AnsibleFilterError, match="list"):
        cuda_arch_coverage("sm_120", "12.0")


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


# B08 fixtures
def test_cuda_release_mismatches_b08():
    dists = {"nvidia-cuda-nvcc": "13.2.78", "nvidia-cuda-runtime": "13.0.96", "nvidia-nvvm": None}
    assert cuda_release_mismatches(dists, "13.0") == [
        {"name": "nvidia-cuda-nvcc", "version": "13.2.78", "expected": "13.0.*"},
        {"name": "nvidia-nvvm", "version": None, "expected": "13.0.*"},
    ]


def test_cuda_release_mismatches_clean_set():
    dists = {"nvidia-cuda-nvcc": "13.0.88", "nvidia-cuda-runtime": "13.0.96", "nvidia-cuda-cccl": "13.0.85",
             "nvidia-cuda-crt": "13.0.88", "nvidia-nvvm": "13.0.88"}
    assert cuda_release_mismatches(dists, "13.0") == []
    # 13.0 must not be confused with 13.10 (string prefix trap)
    assert cuda_release_mismatches({"nvidia-nvvm": "13.10.1"}, "13.1")[0]["version"] == "13.10.1"


def test_cuda_release_mismatches_rejects_non_dict():
    with pytest.raises(AnsibleFilterError):
        cuda_release_mismatches(["nvidia-cuda-nvcc"], "13.0")
