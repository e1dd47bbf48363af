"""The patched files do what they promise when real tools run them.

- a patched flash_attn.py imports under the CPU torch of .venv with no flash_ops (no ImportError,
  is_fa3_supported() is False, entry points raise a clear RuntimeError);
- a patched CMakeLists configures with a real CMake older than 3.31 (3.26 <= v < 3.31), while the unpatched one
  fails on the unknown policy (field report B01);
- the module runs through Ansible: check mode + diff, the real run, idempotence, the all-or-nothing failure.
"""

import glob
import importlib
import json
import os
import re
import shutil
import subprocess
import sys

import pytest

import ansible_run
from ansible_collections.blackwell.sglang.plugins.module_utils import _sgl_kernel_tree as t

from conftest import make_tree, snapshot

# the venv pytest runs in (make unit: $(VENV)/bin/pytest), wherever VENV= puts it; not <checkout>/.venv
VENV_BIN = os.path.join(sys.prefix, "bin")


def _import_flash_attn(pkg_parent):
    """Import sgl_kernel.flash_attn from ``pkg_parent`` in a fresh interpreter state; return the module."""
    for name in [m for m in sys.modules if m == "sgl_kernel" or m.startswith("sgl_kernel.")]:
        del sys.modules[name]
    sys.path.insert(0, pkg_parent)
    try:
        importlib.invalidate_caches()
        return importlib.import_module("sgl_kernel.flash_attn")
    finally:
        sys.path.remove(pkg_parent)


def _drop_sgl_kernel():
    for name in [m for m in sys.modules if m == "sgl_kernel" or m.startswith("sgl_kernel.")]:
        del sys.modules[name]


@pytest.mark.parametrize("flash", ["eager.py", "eager_debug_utils.py", "eager_edited.py"])
def test_patched_flash_attn_imports_without_flash_ops(tree, flash, caplog):
    pytest.importorskip("torch")
    _root, kdir = tree(flash=flash)
    pkg_parent = os.path.join(kdir, "python")
    assert not glob.glob(os.path.join(pkg_parent, "sgl_kernel", "flash_ops*"))
    # unpatched: the upstream hard failure
    with pytest.raises(ImportError, match="Can not import FA3"):
        _import_flash_attn(pkg_parent)
    _drop_sgl_kernel()
    t.commit(t.plan(kdir, patches=["fa3_soft_fallback"]))
    try:
        with caplog.at_level("WARNING"):
            mod = _import_flash_attn(pkg_parent)
        assert mod.FA3_AVAILABLE is False and mod.flash_ops is None
        assert mod.is_fa3_supported() is False
        assert "flash_ops" in caplog.text and "unavailable" in caplog.text   # original error is logged
        assert isinstance(mod._FA3_IMPORT_ERROR, ImportError)
        with pytest.raises(RuntimeError, match="flash_attn_with_kvcache needs the FA3 extension"):
            mod.flash_attn_with_kvcache(None, None, None)
        for name in ("flash_attn_with_kvcache", "is_fa3_supported"):
            assert callable(getattr(mod, name))
    finally:
        _drop_sgl_kernel()


def test_patched_flash_attn_uses_flash_ops_when_present(tree):
    """With a loadable flash_ops the patched module behaves as before (FA3_AVAILABLE True)."""
    pytest.importorskip("torch")
    _root, kdir = tree()
    t.commit(t.plan(kdir, patches=["fa3_soft_fallback"]))
    with open(os.path.join(kdir, "python", "sgl_kernel", "flash_ops.py"), "w") as fh:
        fh.write("# stand-in extension module for the test\n")
    try:
        mod = _import_flash_attn(os.path.join(kdir, "python"))
        assert mod.FA3_AVAILABLE is True and mod.flash_ops is not None
    finally:
        _drop_sgl_kernel()


# ------------------------------------------------------------------------------------------------ real CMake < 3.31

def _cmake_version(exe):
    try:
        out = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=30, check=False).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    m = re.search(r"cmake version (\d+)\.(\d+)", out)
    return (int(m.group(1)), int(m.group(2))) if m else None


@pytest.fixture(scope="session")
def old_cmake(tmp_path_factory):
    """A real CMake 3.26 <= v < 3.31: $BLACKWELL_OLD_CMAKE, /usr/bin/cmake, or cmake 3.28 from PyPI."""
    for cand in (os.environ.get("BLACKWELL_OLD_CMAKE"), shutil.which("cmake"), "/usr/bin/cmake"):
        if cand and (3, 26) <= (_cmake_version(cand) or (0, 0)) < (3, 31):
            return cand
    target = tmp_path_factory.mktemp("cmake328")
    proc = subprocess.run([os.path.join(VENV_BIN, "python"), "-m", "pip", "install", "-q", "--target", str(target),
                           "cmake==3.28.*"], capture_output=True, text=True, timeout=300, check=False)
    if proc.returncode != 0:
        pytest.skip("no CMake 3.26-3.30 here and pip could not fetch one: %s" % proc.stderr[-400:])
    exe = os.path.join(str(target), "cmake", "data", "bin", "cmake")
    assert (3, 26) <= _cmake_version(exe) < (3, 31)
    return exe


def _configure(cmake, src, build, extra=()):
    return subprocess.run([cmake, "-S", src, "-B", build] + list(extra), capture_output=True, text=True, timeout=300, check=False)


@pytest.mark.slow
def test_policy_guards_let_old_cmake_configure(tmp_path, old_cmake):
    root, kdir = make_tree(tmp_path, cmake="policy_configure.cmake.txt")
    failed = _configure(old_cmake, kdir, str(tmp_path / "b0"))
    assert failed.returncode != 0
    assert 'Policy "CMP0169" is not known to this version of CMake' in failed.stderr
    res = t.plan(root, patches=["cmake_policy_guards"])
    assert res["applied"] == ["cmake_policy_guards"]
    t.commit(res)
    ok = _configure(old_cmake, kdir, str(tmp_path / "b1"))
    assert ok.returncode == 0, ok.stderr
    assert "configure got past the policy lines" in ok.stdout


@pytest.mark.slow
def test_fixture_project_configures_with_old_cmake_and_nvcc(tmp_path, project_copy, old_cmake):
    """The whole patched fixture project (CUDA language, cccl block, sm120_only) configures with CMake 3.28."""
    nvcc = os.environ.get("CUDACXX") or shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
    if not os.path.exists(nvcc):
        pytest.skip("no nvcc on this host")
    res = t.plan(project_copy, patches=list(t.PATCHES))
    t.commit(res)
    kdir = res["kernel_dir"]
    proc = _configure(old_cmake, kdir, str(tmp_path / "build"), [
        "-DCMAKE_CUDA_COMPILER=%s" % nvcc, "-DSKBUILD_SABI_COMPONENT=Development.SABIModule",
        "-DSKBUILD_SABI_VERSION=3.10", "-DSGL_KERNEL_COMPILE_THREADS=1", "-DENABLE_BELOW_SM90=OFF",
        "-DPython_EXECUTABLE=%s" % sys.executable])
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    cache = open(str(tmp_path / "build" / "CMakeCache.txt")).read()
    assert re.search(r"SGL_KERNEL_CCCL_INCLUDE_DIR:PATH=.*/cccl", cache)       # CUDA 13 layout found
    commands = json.load(open(str(tmp_path / "build" / "compile_commands.json")))
    cc_units = [c for c in commands if c["file"].endswith(".cc")]
    cu_units = [c for c in commands if c["file"].endswith(".cu")]
    assert cc_units and all("cccl" in c["command"] for c in cc_units)        # host units get include/cccl
    assert cu_units and all("sm_120a" in c["command"] and "sm_90," not in c["command"] for c in cu_units)
    assert not any("flash_fwd_fixture" in c["file"] for c in commands)      # FA3 not built
    assert not any("/sm90/" in c.get("output", "") for c in commands)


# ------------------------------------------------------------------------------------------------ through Ansible

def _ansible(args, check=False, diff=False):
    return ansible_run.module("blackwell.sglang.sgl_kernel_patch", args, check=check, diff=diff)


@pytest.mark.slow
def test_module_check_diff_run_idempotent(tree):
    root, kdir = tree()
    before = snapshot(kdir)
    chk = _ansible({"src": root}, check=True, diff=True)
    assert chk["changed"] is True and chk["applied"] == list(t.DEFAULT_PATCHES)
    assert len(chk["diff"]) == 2 and "if(POLICY CMP0169)" in chk["diff"][0]["after"]
    assert snapshot(kdir) == before
    real = _ansible({"src": root, "backup": True})
    assert real["changed"] is True and len(real["backup_files"]) == 2
    assert real["build_cost_lines"] and real["dependencies"]["dlpack_via_mscclpp"] is True
    again = _ansible({"src": root})
    assert again["changed"] is False and again["already_applied"] == list(t.DEFAULT_PATCHES)


@pytest.mark.slow
def test_module_failure_names_patch_file_anchor(tree):
    root, kdir = tree(cmake="no_sm120a.cmake.txt")
    before = snapshot(kdir)
    res = _ansible({"src": root, "patches": list(t.PATCHES)})
    assert res.get("failed") is True
    assert res["patch"] == "sm120_only" and res["file"] == "CMakeLists.txt"
    assert "compute_120a,code=sm_120a" in res["looked_for"] and res["msg"].startswith("nothing written")
    assert snapshot(kdir) == before
