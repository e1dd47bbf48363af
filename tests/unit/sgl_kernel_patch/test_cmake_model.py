"""The CMake reader behind the patches and the build-cost estimate (plugins/module_utils/_sgl_kernel_cmake.py)."""

import pytest

from ansible_collections.blackwell.sglang.plugins.module_utils import _sgl_kernel_cmake as cm

TEXT = r'''
#[[ a bracket comment with set(SGL_KERNEL_CUDA_FLAGS "-gencode=arch=compute_75,code=sm_75") inside ]]
set(FLAGS "-O3" # comment with (parens
    "-gencode=arch=compute_90,code=sm_90")
if(CUDA_VERSION VERSION_LESS 12.8)
  list(APPEND FLAGS "-gencode=arch=compute_89,code=sm_89")
elseif(CUDA_VERSION VERSION_GREATER_EQUAL 13.0 AND NOT CMAKE_SYSTEM_PROCESSOR MATCHES "aarch64")
  list(APPEND FLAGS "-gencode=arch=compute_120a,code=sm_120a")
else()
  list(APPEND FLAGS "-gencode=arch=compute_100a,code=sm_100a")
endif()
set(SRCS a.cu b.cu c.cc)
add_library(ext MODULE ${SRCS})
target_compile_options(ext PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:${FLAGS}>)
'''


def test_scan_skips_comments_and_tracks_conditions():
    cmds = cm.scan(TEXT)
    names = [c.name for c in cmds]
    assert names[:2] == ["set", "if"]                       # the bracket comment is not a command
    assert cmds[0].words == ["FLAGS", "-O3", "-gencode=arch=compute_90,code=sm_90"]
    appends = [c for c in cmds if c.name == "list"]
    assert appends[0].conditions == ("CUDA_VERSION VERSION_LESS 12.8",)
    assert appends[2].conditions[0].startswith("NOT (")      # the else() branch


@pytest.mark.parametrize("cuda,proc,expected", [
    ("13.0", "x86_64", ["sm_90", "sm_120a"]),
    ("12.6", "x86_64", ["sm_90", "sm_89"]),
    ("13.0", "aarch64", ["sm_90", "sm_100a"]),
])
def test_if_elseif_else_evaluation(cuda, proc, expected):
    est = cm.estimate_build_cost(TEXT, cuda_version=cuda, processor=proc)
    ext = est["extensions"]["ext"]
    assert ext["gencodes"] == expected
    assert (ext["cuda_units"], ext["host_units"]) == (2, 1)
    assert ext["units_x_gencodes"] == 2 * 2 + 1


def test_unbalanced_file_is_an_error():
    with pytest.raises(ValueError):
        cm.scan("if(FOO)\nset(A 1)\n")
    with pytest.raises(ValueError):
        cm.scan("set(A 1\n")
