"""Fuzz the CMake readers: ``_sgl_kernel_cmake.scan`` / ``estimate_build_cost`` (ValueError with a message),
``_sgl_kernel_sources.kernel_sources`` on a kernel tree whose CMake files are fuzzed (SourcesError / LayoutError) and
the patch planner ``_sgl_kernel_tree.plan`` (PatchError / LayoutError / ValueError). Any other exception is a crash.

The text is built from CMake's own pieces (commands the readers interpret, quotes, bracket arguments and comments,
``${}`` references, parentheses) mixed with arbitrary characters, so the interesting paths are reached."""

import os
import shutil
import tempfile

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given, settings, strategies as st  # noqa: E402  pylint: disable=wrong-import-position

from ansible_collections.blackwell.sglang.plugins.module_utils import _sgl_kernel_cmake as cmake  # noqa: E402
from ansible_collections.blackwell.sglang.plugins.module_utils import _sgl_kernel_sources as sources  # noqa: E402
from ansible_collections.blackwell.sglang.plugins.module_utils import _sgl_kernel_tree as tree  # noqa: E402

EXAMPLES = settings().max_examples

PIECES = [
    "if(", "elseif(", "else(", "endif(", ")", "(", "\n", " ", "\t", '"', "\\", "#", "#[[", "]]", "#[=[", "]=]", "[[",
    "[=[", "]=]", "${", "}", "$ENV{", ";", "set(", "list(APPEND ", "option(", "file(GLOB ", "include(",
    "FetchContent_Declare(", "FetchContent_Populate(", "FetchContent_MakeAvailable(", "GIT_REPOSITORY ", "GIT_TAG ",
    "URL ", "URL_HASH ", "SOURCE_DIR ", "Python_add_library(", "add_library(", "target_sources(",
    "target_compile_options(", "string(", "CACHE ", "PARENT_SCOPE", "NOT ", " AND ", " OR ", "VERSION_GREATER_EQUAL ",
    "STREQUAL ", "CUDA_VERSION", "ENABLE_BELOW_SM90", "SGL_KERNEL_ENABLE_FA3", "-gencode=arch=compute_120a,code=sm_120a",
    "-gencode=arch=compute_90a,code=[sm_90a,compute_90a]", "csrc/x.cu", "csrc/*.cu", "${CMAKE_CURRENT_SOURCE_DIR}",
    "repo-flash-attention", "https://github.com/x/y", "a" * 40, "13.0", "ON", "OFF", "ö", "\x00", "\r\n",
    "cmake/x.cmake", "${repo-a_SOURCE_DIR}/sub", "file(WRITE ", "include(cmake/x.cmake)",
]
cmake_text = st.lists(st.sampled_from(PIECES) | st.text(max_size=4), max_size=60).map("".join)


def _checked(call, errors):
    try:
        return call()
    except errors as exc:
        assert str(exc)
        return None


@given(cmake_text)
def test_scan(text):
    commands = _checked(lambda: cmake.scan(text), ValueError)
    if commands is not None:
        assert all(0 <= c.start < c.end <= len(text) and c.line >= 1 for c in commands)


@given(cmake_text, st.sampled_from(["12.8", "13.0", "x", ""]),
       st.dictionaries(st.sampled_from(["ENABLE_BELOW_SM90", "SGL_KERNEL_ENABLE_FA3", "X"]),
                       st.sampled_from(["ON", "OFF", "", "1"]), max_size=2))
def test_estimate_build_cost(text, cuda, defines):
    cost = _checked(lambda: cmake.estimate_build_cost(text, cuda_version=cuda, defines=defines), ValueError)
    if cost is not None:
        assert isinstance(cost["total"], int) and cost["total"] >= 0


def _tree(cmake_lists, included):
    root = tempfile.mkdtemp(prefix="fuzz-kernel-")
    kernel = os.path.join(root, "sgl-kernel")
    os.makedirs(os.path.join(kernel, "python", "sgl_kernel"))
    os.makedirs(os.path.join(kernel, "cmake"))
    with open(os.path.join(kernel, "CMakeLists.txt"), "w", encoding="utf-8", errors="surrogateescape") as handle:
        handle.write(cmake_lists)
    with open(os.path.join(kernel, "cmake", "x.cmake"), "w", encoding="utf-8", errors="surrogateescape") as handle:
        handle.write(included)
    with open(os.path.join(kernel, "python", "sgl_kernel", "flash_attn.py"), "w") as handle:
        handle.write("def flash_attn_varlen_func():\n    pass\n")
    return root


@settings(max_examples=max(30, EXAMPLES // 2))
@given(cmake_text, cmake_text)
def test_kernel_sources_on_a_fuzzed_tree(cmake_lists, included):
    root = _tree(cmake_lists, included)
    try:
        result = _checked(lambda: sources.kernel_sources(root), (sources.SourcesError, sources.LayoutError))
        if result is not None:
            assert isinstance(result["dependencies"], list) and isinstance(result["complete"], bool)
            assert all(isinstance(line, str) for line in sources.describe_missing(result))
    finally:
        shutil.rmtree(root)


@settings(max_examples=max(30, EXAMPLES // 2))
@given(cmake_text)
def test_patch_plan_on_a_fuzzed_tree(cmake_lists):
    root = _tree(cmake_lists, "")
    try:
        _checked(lambda: tree.plan(root), (tree.PatchError, tree.LayoutError, ValueError))
    finally:
        shutil.rmtree(root)
