"""Helpers that assemble kernel trees from the fixture variants in tests/fixtures/sgl_kernel/."""

import os
import shutil

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
VARIANTS = os.path.join(ROOT, "tests", "fixtures", "sgl_kernel")
PROJECT = os.path.join(ROOT, "tests", "fixtures", "sgl_kernel_project")

DEBUG_UTILS = (
    "# blackwell.sglang test fixture (not upstream code)\n"
    "def maybe_wrap_debug_kernel(fn):\n"
    "    return fn\n"
)


def variant(kind, name):
    with open(os.path.join(VARIANTS, kind, name), "rb") as fh:
        return fh.read()


def make_tree(base, cmake="v0307_mscclpp.cmake.txt", flash="eager.py", layout="sgl-kernel", crlf=False):
    """Write a checkout at ``base`` with a kernel tree in ``layout`` and return (checkout_root, kernel_dir)."""
    root = os.path.join(str(base), "sglang")
    kdir = os.path.join(root, *layout.split("/"))
    pkg = os.path.join(kdir, "python", "sgl_kernel")
    os.makedirs(pkg)
    files = {
        os.path.join(kdir, "CMakeLists.txt"): variant("cmake", cmake),
        os.path.join(pkg, "flash_attn.py"): variant("flash_attn", flash),
        os.path.join(pkg, "__init__.py"): b"# blackwell.sglang test fixture\n",
        os.path.join(pkg, "debug_utils.py"): DEBUG_UTILS.encode(),
    }
    for path, data in files.items():
        if crlf:
            data = data.replace(b"\r\n", b"\n").replace(b"\n", b"\r\n")
        with open(path, "wb") as fh:
            fh.write(data)
    return root, kdir


def snapshot(path):
    out = {}
    for dirpath, _dirs, names in os.walk(path):
        for name in names:
            p = os.path.join(dirpath, name)
            with open(p, "rb") as fh:
                out[os.path.relpath(p, path)] = fh.read()
    return out


@pytest.fixture
def tree(tmp_path):
    def _make(**kw):
        return make_tree(tmp_path, **kw)
    return _make


@pytest.fixture
def project_copy(tmp_path):
    """The sgl-kernel-shaped fixture project as ``<checkout>/sgl-kernel``."""
    root = tmp_path / "sglang"
    shutil.copytree(PROJECT, str(root / "sgl-kernel"))
    return str(root)
