"""sm120_only for the whole SM12x family: every target gencode is kept, and a target the tree compiles only on some
build hosts (upstream: sm_121a only when CMAKE_SYSTEM_PROCESSOR is aarch64) or not at all is added, once.

The real trees of both pins go through the same patch in tests/unit/kernel_sources/test_real_configure.py, whose
build.ninja must then list sm_120a and sm_121a on this x86_64 machine."""

import os

import pytest

from ansible_collections.blackwell.sglang.plugins.module_utils import _sgl_kernel_cmake as cm
from ansible_collections.blackwell.sglang.plugins.module_utils import _sgl_kernel_tree as t

# the shape of upstream's gate (sglang-sm120.md 1.6, field report S13), appended to the fixture's flag lists
AARCH64_ONLY = '''
if ("${CUDA_VERSION}" VERSION_GREATER_EQUAL "13.0")
    if (CMAKE_SYSTEM_PROCESSOR STREQUAL "aarch64")
        list(APPEND SGL_KERNEL_CUDA_FLAGS
            "-gencode=arch=compute_110a,code=sm_110a"
            "-gencode=arch=compute_121a,code=sm_121a"
        )
    endif()
endif()
'''


def _read(path):
    with open(path) as fh:
        return fh.read()


def _with_aarch64_gate(kdir):
    path = os.path.join(kdir, "CMakeLists.txt")
    text = _read(path)
    anchor = "# All source files" if "# All source files" in text else "set(SOURCES"
    assert anchor in text
    with open(path, "w") as fh:
        fh.write(text.replace(anchor, AARCH64_ONLY + "\n" + anchor, 1))
    return path


def _codes(text, processor):
    est = cm.estimate_build_cost(text, processor=processor)
    return est["extensions"]["common_ops_sm100_build"]["gencodes"]


@pytest.mark.parametrize("targets", [["sm_120a", "sm_121a"], ["sm_121a"]])
def test_a_target_upstream_gates_on_aarch64_is_added_for_every_build_host(tree, targets):
    root, kdir = tree()
    path = _with_aarch64_gate(kdir)
    # before: an x86_64 build host never compiles sm_121a
    assert "sm_121a" not in _codes(_read(path), "x86_64")
    res = t.plan(root, patches=["sm120_only"], target_archs=targets)
    t.commit(res)
    assert "added gencodes sm_121a" in res["details"]["sm120_only"]
    text = _read(path)
    for processor in ("x86_64", "aarch64"):
        # the IN_LIST guard: an aarch64 host, where upstream adds it itself, does not get it twice
        assert _codes(text, processor) == targets, processor
    # idempotent
    again = t.plan(root, patches=["sm120_only"], target_archs=targets)
    assert again["already_applied"] == ["sm120_only"] and not again["changed"]


def test_a_target_absent_from_the_tree_is_added(tree):
    root, kdir = tree()  # the 0.3.21 shape has sm_120a and no sm_121a at all
    res = t.plan(root, patches=["sm120_only"], target_archs=["sm_120a", "sm_121a"])
    t.commit(res)
    assert _codes(_read(os.path.join(kdir, "CMakeLists.txt")), "x86_64") == ["sm_120a", "sm_121a"]
    assert res["build_cost"]["after"]["extensions"]["common_ops_sm100_build"]["gencodes"] == ["sm_120a", "sm_121a"]


def test_sm120a_only_targets_leave_the_tree_as_before(tree):
    root, kdir = tree()
    _with_aarch64_gate(kdir)
    res = t.plan(root, patches=["sm120_only"], target_archs=["sm_120a"])
    t.commit(res)
    assert "added gencodes" not in res["details"]["sm120_only"]
    text = _read(os.path.join(kdir, "CMakeLists.txt"))
    assert _codes(text, "x86_64") == ["sm_120a"] and _codes(text, "aarch64") == ["sm_120a"]


def test_a_tree_without_any_sm12x_gencode_is_refused(tree):
    root, kdir = tree(cmake="no_sm120a.cmake.txt")
    before = _read(os.path.join(kdir, "CMakeLists.txt"))
    with pytest.raises(t.PatchError) as err:
        t.plan(root, patches=["sm120_only"], target_archs=["sm_120a", "sm_121a"])
    assert "compiles for no SM12x arch" in str(err.value)
    assert _read(os.path.join(kdir, "CMakeLists.txt")) == before
