"""The drop_sparse_attn patch on the REAL kernel trees of both stack pins (the upstream bundle).

sgl-attn (FetchContent ``repo-flash-attention``) is not in the bundle, so the build uses a placeholder tree. Its
sparse FlashAttention sources are listed in ``common_ops``' sources and ``csrc/common_extension.cc`` registers
``fwd_sparse`` / ``varlen_fwd_sparse`` with ``flash::mha_fwd_sparse`` / ``flash::mha_varlen_fwd_sparse``, which only
those sources define: without the patch the library is left with two undefined symbols. The patch must take both
halves out, and nothing else, on both trees, be idempotent, and keep every other registration.
"""

import os
import re
import tarfile

import pytest

from ansible_collections.blackwell.sglang.plugins.module_utils import _sgl_kernel_tree as t
from upstream import CURRENT, ORIGINAL, SKIP_REASON, UPSTREAM, have_bundle

pytestmark = pytest.mark.skipif(not have_bundle(), reason=SKIP_REASON)

KERNEL_DIRS = {ORIGINAL: "sgl-kernel", CURRENT: "python/sglang/kernels/aot"}


def _tree(tmp_path, tarball):
    kdir = KERNEL_DIRS[tarball]
    with tarfile.open(os.path.join(UPSTREAM, tarball)) as tf:
        members = [m for m in tf.getmembers()
                   if m.name.startswith("sglang/%s/CMakeLists.txt" % kdir)
                   or m.name.startswith("sglang/%s/csrc/common_extension.cc" % kdir)
                   or m.name.startswith("sglang/%s/python/sgl_kernel/" % kdir)]
        tf.extractall(str(tmp_path), members=members)
    return str(tmp_path / "sglang"), str(tmp_path / "sglang" / kdir)


def _live(text, comment="//"):
    """The text without comment lines and without the patch's ``#if 0`` blocks."""
    text = re.sub(r"#if 0[^\n]*drop_sparse_attn.*?#endif[^\n]*\n", "", text, flags=re.S)
    return "\n".join(line for line in text.splitlines() if not line.lstrip().startswith(comment))


@pytest.mark.parametrize("tarball", [ORIGINAL, CURRENT])
def test_sources_and_registrations_go_together(tmp_path, tarball):
    root, kdir = _tree(tmp_path, tarball)
    cmake_path = os.path.join(kdir, "CMakeLists.txt")
    ext_path = os.path.join(kdir, "csrc", "common_extension.cc")
    with open(ext_path) as fh:
        ext_before = fh.read()
    assert "&flash::mha_fwd_sparse" in ext_before and "&flash::mha_varlen_fwd_sparse" in ext_before
    res = t.plan(root, patches=["drop_sparse_attn"])
    assert res["applied"] == ["drop_sparse_attn"], res["details"]
    assert "5 sparse FlashAttention source(s)" in res["details"]["drop_sparse_attn"]
    t.commit(res)
    with open(cmake_path) as fh:
        cmake = fh.read()
    with open(ext_path) as fh:
        ext = fh.read()
    live_cmake = _live(cmake, "#")
    assert "flash_sparse_api.cpp" not in live_cmake and "flash_fwd_sparse" not in live_cmake
    live_ext = _live(ext)
    assert "mha_fwd_sparse" not in live_ext and "mha_varlen_fwd_sparse" not in live_ext
    assert '"fwd_sparse(' not in live_ext and '"varlen_fwd_sparse(' not in live_ext
    # every other registration is kept, the sparse *utils* (SGLang's own convert_vertical_slash_indexes) included
    before_impls = set(re.findall(r'm\.impl\("([a-z0-9_]+)"', ext_before)) - {"fwd_sparse", "varlen_fwd_sparse"}
    assert set(re.findall(r'm\.impl\("([a-z0-9_]+)"', live_ext)) == before_impls
    assert "convert_vertical_slash_indexes" in live_ext
    # the includes (a directory of the placeholder) stay: a missing include directory is harmless
    assert ext.count("#if 0") == ext_before.count("#if 0") + 1
    again = t.plan(root, patches=["drop_sparse_attn"])
    assert again["already_applied"] == ["drop_sparse_attn"] and not again["changed"]


def test_not_needed_on_a_tree_without_sparse_attention(tmp_path):
    root, kdir = _tree(tmp_path, ORIGINAL)
    for rel in ("CMakeLists.txt", os.path.join("csrc", "common_extension.cc")):
        path = os.path.join(kdir, rel)
        with open(path) as fh:
            text = fh.read()
        text = re.sub(r'[^\n]*(flash_fwd_sparse_[a-z0-9_]+\.cu|flash_sparse_api\.cpp)[^\n]*\n', "", text)
        text = re.sub(r'\s*m\.(def|impl)\(\s*"(varlen_)?fwd_sparse.*?\);', "", text, flags=re.S)
        with open(path, "w") as fh:
            fh.write(text)
    res = t.plan(root, patches=["drop_sparse_attn"])
    assert res["not_needed"] == ["drop_sparse_attn"] and not res["changed"]


def test_registrations_are_found_in_whichever_extension_source_holds_them(tmp_path):
    root, kdir = _tree(tmp_path, CURRENT)
    moved = os.path.join(kdir, "csrc", "attention", "sparse_extension.cc")
    os.makedirs(os.path.dirname(moved))
    os.rename(os.path.join(kdir, "csrc", "common_extension.cc"), moved)
    res = t.plan(root, patches=["drop_sparse_attn"])
    assert res["applied"] == ["drop_sparse_attn"] and "unregistered fwd_sparse, varlen_fwd_sparse" in \
        res["details"]["drop_sparse_attn"]
    t.commit(res)
    with open(moved) as fh:
        assert "mha_fwd_sparse" not in _live(fh.read())
