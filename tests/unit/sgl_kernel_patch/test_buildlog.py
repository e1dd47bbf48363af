"""Build-failure classification on the field-report fixtures (field-reports.md F-B01..F-B07)."""

import pytest

from ansible_collections.blackwell.sglang.plugins.filter.sgl_kernel_build_failure import sgl_kernel_build_failure
from ansible_collections.blackwell.sglang.plugins.module_utils._sgl_kernel_buildlog import classify

F_B01 = 'CMake Error at CMakeLists.txt:9 (cmake_policy):\n  Policy "CMP0169" is not known to this version of CMake.\n'
F_B02 = ("CMake Error at _deps/repo-dlpack-src/CMakeLists.txt:1 (cmake_minimum_required):\n"
         "  Compatibility with CMake < 3.5 has been removed from CMake.\n\n"
         "  Or, add -DCMAKE_POLICY_VERSION_MINIMUM=3.5 to try configuring anyway.\n")
F_B03 = ("In file included from <src>/csrc/pybind.cpp:11:\n"
         "<src>/csrc/cutlass/include/cutlass/fast_math.h:42:10: fatal error: cuda/std/utility: No such file or directory\n"
         "   42 | #include <cuda/std/utility>\n")
F_B04 = "nvcc fatal   : Unsupported gpu architecture 'compute_120a'\n"
F_B05 = "FAILED: [code=137] CMakeFiles/common_ops_sm100_build.dir/csrc/gemm/x.cu.o\nninja: build stopped: subcommand failed.\n"
F_B07_ABI = "ImportError: /venv/sgl_kernel/sm100/common_ops.abi3.so: undefined symbol: _ZN3c104cuda29c10_cuda_check_implementationEiPKcS2_ib\n"
F_B07_CUDA = "\tlibcudart.so.12 => not found\n\tlibnvrtc.so.12 => not found\n"


@pytest.mark.parametrize("text,cause,report", [
    (F_B01, "cmake_policy_unknown", "B01"),
    (F_B02, "cmake4_old_min_required", "B02"),
    (F_B03, "cccl_include_missing", "B03"),
    (F_B04, "nvcc_arch_unsupported", "B04"),
    (F_B05, "build_oom", "B05"),
    (F_B07_ABI, "sgl_kernel_abi_mismatch", "B07"),
    (F_B07_CUDA, "sgl_kernel_cuda_major_mismatch", "B07"),
])
def test_field_report_fixtures(text, cause, report):
    got = classify("== noise before\n" + text + "== noise after\n", rc=1)
    assert (got["cause"], got["field_report"]) == (cause, report)
    assert got["line"] and got["remedy"]


def test_sigkill_without_log_line_is_oom():
    assert classify("building...\n", rc=137)["cause"] == "build_oom"


def test_timeout_and_unknown():
    assert classify("[12/80] Building CUDA object\n", timed_out=True)["cause"] == "build_timeout"
    got = classify("some.cc:3: error: expected ';'\n", rc=1)
    assert got["cause"] == "unknown" and "expected ';'" in got["line"]


def test_filter_wrapper_casts_rc():
    assert sgl_kernel_build_failure("x\n", rc="137")["cause"] == "build_oom"


def test_configure_log_gives_cmake_first_error_with_its_cause():
    log = ("-- Found CUDAToolkit: /usr/local/cuda/include (found version \"13.0.88\")\n"
           "CMake Error at _deps/mscclpp-src/CMakeLists.txt:40 (find_package):\n"
           "  Could NOT find NUMA (missing: NUMA_INCLUDE_DIRS NUMA_LIBRARIES)\n\n\n"
           "-- Configuring incomplete, errors occurred!\n")
    got = sgl_kernel_build_failure(log, rc=1)["cmake_error"]
    assert got[:2] == ["first error: CMake Error at _deps/mscclpp-src/CMakeLists.txt:40 (find_package):",
                       "  Could NOT find NUMA (missing: NUMA_INCLUDE_DIRS NUMA_LIBRARIES)"]
    assert got[-2].startswith("cause: numa_missing: ") and "libnuma-dev" in got[-1]
    assert sgl_kernel_build_failure("-- Configuring done\n-- Generating done\n")["cmake_error"] == []
