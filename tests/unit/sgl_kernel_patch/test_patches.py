"""sgl_kernel_patch logic on every tree shape of the domain facts (sglang-sm120.md sections 1-2)."""

import os
import re

import pytest

from ansible_collections.blackwell.sglang.plugins.module_utils import _sgl_kernel_cmake as cm
from ansible_collections.blackwell.sglang.plugins.module_utils import _sgl_kernel_tree as t

from conftest import snapshot

# drop_sparse_attn needs sgl-attn's sources and registrations, which these fixture trees do not have: it is tested on
# the real trees of both pins (tests/unit/kernel_sources/test_drop_sparse_attn.py)
ALL = [p for p in t.PATCHES if p != "drop_sparse_attn"]


def run(src, patches=None, **kw):
    res = t.plan(src, patches=patches or list(t.DEFAULT_PATCHES), **kw)
    t.commit(res)
    return res


def read(path):
    with open(path, "rb") as fh:
        return fh.read().decode()


# ---------------------------------------------------------------------------------------------------- layouts

@pytest.mark.parametrize("layout", ["sgl-kernel", "python/sglang/kernels/aot"])
def test_layout_detected_from_checkout_root(tree, layout):
    root, kdir = tree(layout=layout)
    res = t.plan(root)
    assert res["kernel_dir"] == kdir
    assert res["layout"] == layout


@pytest.mark.parametrize("layout", ["sgl-kernel", "python/sglang/kernels/aot"])
def test_layout_detected_from_kernel_dir(tree, layout):
    _root, kdir = tree(layout=layout)
    res = t.plan(kdir)
    assert (res["kernel_dir"], res["layout"]) == (kdir, layout)


def test_no_kernel_tree_names_both_paths(tmp_path):
    with pytest.raises(t.LayoutError) as err:
        t.plan(str(tmp_path))
    assert "sgl-kernel/CMakeLists.txt" in str(err.value)
    assert "python/sglang/kernels/aot/CMakeLists.txt" in str(err.value)


# ---------------------------------------------------------------------------------------------------- defaults

def test_default_patches_on_0307_tree(tree):
    root, kdir = tree()
    res = run(root)
    assert res["applied"] == ["cmake_policy_guards", "cccl_include", "fa3_soft_fallback"]
    assert res["changed"] is True
    cmake = read(os.path.join(kdir, "CMakeLists.txt"))
    # both policies guarded, nothing else about them changed
    assert re.search(r"if\(POLICY CMP0169\)[^\n]*\n\s+cmake_policy\(SET CMP0169 OLD\)\nendif\(\)", cmake)
    assert re.search(r"if\(POLICY CMP0177\)[^\n]*\n\s+cmake_policy\(SET CMP0177 NEW\)\nendif\(\)", cmake)
    # the CCCL block comes right after project() and before include(FetchContent)
    assert cmake.index("project(sgl-kernel") < cmake.index("cccl_include") < cmake.index("include(FetchContent)")
    cmds = cm.scan(cmake)
    unguarded = [c for c in cmds if c.name == "cmake_policy" and not any("POLICY" in x for x in c.conditions)]
    assert unguarded == []
    flash = read(os.path.join(kdir, "python/sgl_kernel/flash_attn.py"))
    assert "raise ImportError(\"Can not import FA3" not in flash
    assert "FA3_AVAILABLE = flash_ops is not None" in flash


def test_second_run_changes_nothing(tree):
    root, kdir = tree()
    run(root, ALL)
    before = snapshot(kdir)
    res = run(root, ALL)
    assert res["changed"] is False
    assert res["applied"] == []
    assert sorted(res["already_applied"]) == sorted(ALL)
    assert snapshot(kdir) == before


def test_check_mode_plan_writes_nothing(tree):
    root, kdir = tree()
    before = snapshot(kdir)
    res = t.plan(root, patches=ALL)
    assert res["changed"] is True and res["applied"] == ALL
    assert snapshot(kdir) == before
    diff = t.unified_diff(res)
    assert "+if(POLICY CMP0169)" in diff and "--- a/python/sgl_kernel/flash_attn.py" in diff


def test_diff_entries_have_before_and_after(tree):
    root, kdir = tree()
    entries = t.diffs(t.plan(root))
    assert [e["before_header"] for e in entries] == [os.path.join(kdir, "CMakeLists.txt"),
                                                     os.path.join(kdir, "python", "sgl_kernel", "flash_attn.py")]
    assert all(e["before"] != e["after"] for e in entries)


def test_backup_keeps_original(tree):
    root, kdir = tree()
    original = read(os.path.join(kdir, "CMakeLists.txt"))
    res = t.plan(root)
    backups = t.commit(res, backup=True)
    assert set(backups) == {f.path for f in res["files"].values()}
    assert read(backups[os.path.join(kdir, "CMakeLists.txt")]) == original


def test_file_mode_is_kept(tree):
    root, kdir = tree()
    path = os.path.join(kdir, "CMakeLists.txt")
    os.chmod(path, 0o640)
    run(root)
    assert os.stat(path).st_mode & 0o777 == 0o640


# ---------------------------------------------------------------------------------------------------- CRLF

def test_crlf_preserved_and_idempotent(tree):
    root, kdir = tree(crlf=True, flash="eager_debug_utils.py")
    res = run(root, ALL)
    assert res["applied"] == ALL
    for rel in ("CMakeLists.txt", "python/sgl_kernel/flash_attn.py"):
        raw = open(os.path.join(kdir, rel), "rb").read()
        assert b"\r\n" in raw
        assert raw.count(b"\n") == raw.count(b"\r\n"), rel   # no bare LF introduced
    again = t.plan(root, patches=ALL)
    assert again["changed"] is False


# ---------------------------------------------------------------------------------------------------- policies

def test_policy_guard_not_needed_without_policies(tree):
    root, _k = tree(cmake="no_policies.cmake.txt")
    res = t.plan(root, patches=["cmake_policy_guards"])
    assert res["not_needed"] == ["cmake_policy_guards"] and res["changed"] is False


def test_hand_edited_tree(tree):
    """Odd case/spacing, comments near anchors, one policy already guarded by hand, a gencode sharing a line."""
    root, kdir = tree(cmake="hand_edited.cmake.txt", flash="eager_edited.py")
    res = run(root, ALL)
    assert res["applied"] == ALL
    cmake = read(os.path.join(kdir, "CMakeLists.txt"))
    assert cmake.count("if(POLICY CMP0169)") == 1          # the operator's guard is left alone
    assert "if(POLICY CMP0177)" in cmake
    assert "# install() DESTINATION normalisation" in cmake  # trailing comment kept inside the guard
    # the cccl block follows the multi-line PROJECT( ... ) command, not its first line
    assert cmake.index("LANGUAGES CXX CUDA )") < cmake.index(">>> blackwell.sglang: cccl_include")
    # gencodes: only sm_120a stays active in SGL_KERNEL_CUDA_FLAGS; the commented sm_75 stays a comment
    lists = [c for c in cm.scan(cmake) if "SGL_KERNEL_CUDA_FLAGS" in c.words]
    assert cm.gencodes_in([c.raw_args for c in lists]) != []
    active = []
    for c in lists:
        active += [w for w in c.words if "gencode" in w]
    assert active == ["-gencode=arch=compute_120a,code=sm_120a"]
    assert '"-DNDEBUG" "-O3"' in cmake and '"-std=c++17"' in cmake   # neighbours on the shared line survive
    assert "# local note" in cmake                                   # forced FA3 line commented with its note
    # the sm90 target: two runs (separated by nothing but a comment -> one run) wrapped; sm100 untouched
    assert cmake.count("if(SGL_KERNEL_BUILD_SM90_COMMON_OPS)") == 1
    assert cmake.count('option(SGL_KERNEL_BUILD_SM90_COMMON_OPS') == 1
    sm100 = [c for c in cm.scan(cmake) if "common_ops_sm100_build" in c.words]
    assert sm100 and all(not c.conditions for c in sm100)
    again = t.plan(root, patches=ALL)
    assert again["changed"] is False


# ---------------------------------------------------------------------------------------------------- CCCL

def test_cccl_not_needed_when_tree_handles_it(tree):
    root, _k = tree(cmake="cccl_handled.cmake.txt")
    res = t.plan(root, patches=["cccl_include"])
    assert res["not_needed"] == ["cccl_include"]


# ---------------------------------------------------------------------------------------------------- FA3 build

def test_skip_fa3_build_forced_shape(tree):
    root, kdir = tree()
    res = run(root, ["skip_fa3_build"])
    assert res["applied"] == ["skip_fa3_build"]
    cost = res["build_cost"]
    assert "flash_ops" in cost["before"]["extensions"]
    assert "flash_ops" not in cost["after"]["extensions"]
    cmds = cm.scan(read(os.path.join(kdir, "CMakeLists.txt")))
    assert not [c for c in cmds if c.name == "set" and c.words[:2] == ["SGL_KERNEL_ENABLE_FA3", "ON"]]


def test_skip_fa3_build_option_default_shape(tree):
    root, kdir = tree(cmake="v0806_option_fa3.cmake.txt", flash="eager_debug_utils.py",
                      layout="python/sglang/kernels/aot")
    res = run(root, ["skip_fa3_build"])
    assert res["applied"] == ["skip_fa3_build"]
    cmake = read(os.path.join(kdir, "CMakeLists.txt"))
    assert 'option(SGL_KERNEL_ENABLE_FA3 "Enable FA3" OFF)' in cmake
    assert "flash_ops" not in res["build_cost"]["after"]["extensions"]
    assert "flash_ops" in res["build_cost"]["before"]["extensions"]


def test_skip_fa3_not_needed_when_already_off(tree):
    root, _k = tree(cmake="v0806_option_fa3.cmake.txt")
    path = os.path.join(root, "sgl-kernel", "CMakeLists.txt")
    text = read(path).replace("${DEFAULT_SGL_KERNEL_ENABLE_FA3})", "OFF)")
    open(path, "w").write(text)
    res = t.plan(root, patches=["skip_fa3_build"])
    assert res["not_needed"] == ["skip_fa3_build"]


# ---------------------------------------------------------------------------------------------------- sm120_only

def test_sm120_only_keeps_sm120a_and_drops_sm90_target(tree):
    root, kdir = tree()
    res = run(root, ["sm120_only"])
    cmake = read(os.path.join(kdir, "CMakeLists.txt"))
    est = cm.estimate_build_cost(cmake)
    assert "common_ops_sm90_build" not in est["extensions"]
    assert est["extensions"]["common_ops_sm100_build"]["gencodes"] == ["sm_120a"]
    # FA3's own flag list (sm_90a) is not touched: that is skip_fa3_build's job
    assert est["extensions"]["flash_ops"]["gencodes"] == ["sm_90a"]
    assert res["build_cost"]["after"]["total_units_x_gencodes"] < res["build_cost"]["before"]["total_units_x_gencodes"]


def test_sm120_only_on_sm100f_tree(tree):
    root, kdir = tree(cmake="v0806_option_fa3.cmake.txt")
    run(root, ["sm120_only"])
    est = cm.estimate_build_cost(read(os.path.join(kdir, "CMakeLists.txt")))
    assert est["extensions"]["common_ops_sm100_build"]["gencodes"] == ["sm_120a"]


def test_sm120_only_rejects_plain_sm120():
    with pytest.raises(ValueError) as err:
        t.validate(["sm120_only"], ["sm_120"])
    assert "FP4" in str(err.value)


# ---------------------------------------------------------------------------------------------------- all-or-nothing

@pytest.mark.parametrize("cmake,flash,patches,patch,looked_for", [
    ("no_cuda_project.cmake.txt", "eager.py", None, "cccl_include", "project(... CUDA ...)"),
    ("no_sm120a.cmake.txt", "eager.py", ALL, "sm120_only", "compute_120a,code=sm_120a"),
    ("no_fa3_switch.cmake.txt", "eager.py", ALL, "skip_fa3_build", "SGL_KERNEL_ENABLE_FA3"),
    ("v0307_mscclpp.cmake.txt", "no_is_fa3_supported.py", None, "fa3_soft_fallback", "def is_fa3_supported"),
    ("v0307_mscclpp.cmake.txt", "no_flash_ops.py", None, "fa3_soft_fallback", "from sgl_kernel import flash_ops"),
])
def test_missing_anchor_writes_nothing(tree, cmake, flash, patches, patch, looked_for):
    root, kdir = tree(cmake=cmake, flash=flash)
    before = snapshot(kdir)
    with pytest.raises(t.PatchError) as err:
        t.plan(root, patches=patches or list(t.DEFAULT_PATCHES))
    assert err.value.patch == patch
    assert looked_for in err.value.looked_for
    assert err.value.path.endswith(("CMakeLists.txt", "flash_attn.py"))
    assert patch in str(err.value) and looked_for in str(err.value)
    assert snapshot(kdir) == before


def test_unknown_patch_name_rejected(tree):
    root, _k = tree()
    with pytest.raises(ValueError):
        t.plan(root, patches=["cmake_policy_guards", "no_such_patch"])


# ---------------------------------------------------------------------------------------------------- flash_attn

def test_lazy_fa3_not_needed(tree):
    root, _k = tree(flash="lazy.py")
    res = t.plan(root, patches=["fa3_soft_fallback"])
    assert res["not_needed"] == ["fa3_soft_fallback"] and res["changed"] is False


def test_guards_after_docstrings_and_multiline_signatures(tree):
    root, kdir = tree(flash="eager_edited.py")
    run(root, ["fa3_soft_fallback"])
    src = read(os.path.join(kdir, "python/sgl_kernel/flash_attn.py"))
    compile(src, "flash_attn.py", "exec")
    # the docstrings stay docstrings: the guard comes after them
    assert src.index('(docstring with a colon: and parentheses)') < src.index("if not FA3_AVAILABLE:  # blackwell")
    assert src.index("'''Single-quoted docstring.'''") < src.index("_require_fa3('flash_attn_with_kvcache')")
    assert "# a comment right after the block" in src


def test_debug_utils_variant_guards_scheduler_metadata(tree):
    root, kdir = tree(flash="eager_debug_utils.py")
    res = run(root, ["fa3_soft_fallback"])
    assert "get_scheduler_metadata" in res["details"]["fa3_soft_fallback"]
    src = read(os.path.join(kdir, "python/sgl_kernel/flash_attn.py"))
    assert "from sgl_kernel.debug_utils import maybe_wrap_debug_kernel" in src


# ---------------------------------------------------------------------------------------------------- reports

def test_dependency_report_mscclpp_dlpack(tree):
    root, _k = tree()
    dep = t.plan(root)["dependencies"]
    assert dep["fetched"] == ["repo-cutlass", "repo-flash-attention", "repo-mscclpp"]
    assert dep["mscclpp_subproject"] and dep["dlpack_via_mscclpp"] and dep["needs_policy_version_minimum"]
    assert "CMAKE_POLICY_VERSION_MINIMUM=3.5" in dep["remedy"]


def test_dependency_report_bindings_off_and_no_mscclpp(tree, tmp_path):
    root, _k = tree(cmake="v0608_bindings_off.cmake.txt")
    dep = t.plan(root)["dependencies"]
    assert dep["mscclpp_subproject"] is True and dep["dlpack_via_mscclpp"] is False
    root2, _k2 = t.find_kernel_dir(root)[0], None
    other = tmp_path / "head"
    other.mkdir()
    from conftest import make_tree
    root3, _k3 = make_tree(other, cmake="v0806_option_fa3.cmake.txt", layout="python/sglang/kernels/aot")
    dep3 = t.plan(root3)["dependencies"]
    assert dep3["mscclpp_subproject"] is False and dep3["remedy"] is None


def test_build_cost_counts_units_and_gencodes(tree):
    root, _k = tree()
    cost = t.plan(root, patches=ALL)["build_cost"]
    before = cost["before"]["extensions"]
    # 0307 shape, CUDA 13, x86_64, ENABLE_BELOW_SM90=OFF: sm_90, sm_100a, sm_120a, sm_103a, sm_90a
    assert before["common_ops_sm100_build"]["gencodes"] == ["sm_90", "sm_100a", "sm_120a", "sm_103a", "sm_90a"]
    assert before["common_ops_sm100_build"]["cuda_units"] == 7
    assert before["common_ops_sm100_build"]["host_units"] == 1
    assert before["common_ops_sm100_build"]["units_x_gencodes"] == 7 * 5 + 1
    # the FA3 instantiations are globbed from a fetched source dir: not countable before configure
    assert before["flash_ops"]["unresolved_globs"] == ["/hopper/instantiations/flash_fwd_hdim*_sm90.cu"]
    assert before["flash_ops"]["cuda_units"] == 2 and before["flash_ops"]["host_units"] == 2
    after = cost["after"]["extensions"]
    assert set(after) == {"common_ops_sm100_build"}
    assert after["common_ops_sm100_build"]["units_x_gencodes"] == 7 * 1 + 1
    assert cost["saved_percent"] > 80
    lines = t.format_build_cost(cost)
    assert lines[-2].startswith("total: %d -> 8 " % cost["before"]["total_units_x_gencodes"])


def test_build_cost_below_sm90_and_cuda12():
    text = open(os.path.join(os.path.dirname(__file__), "..", "..", "fixtures", "sgl_kernel", "cmake",
                             "v0307_mscclpp.cmake.txt")).read()
    on = cm.estimate_build_cost(text, defines={"ENABLE_BELOW_SM90": "ON"})
    assert on["extensions"]["common_ops_sm100_build"]["gencodes"][:3] == ["sm_90", "sm_80", "sm_89"]
    old = cm.estimate_build_cost(text, cuda_version="12.6")
    assert "sm_120a" not in old["extensions"]["common_ops_sm100_build"]["gencodes"]
    assert "sm_90a" in old["extensions"]["common_ops_sm100_build"]["gencodes"]
