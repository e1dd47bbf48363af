# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang contributors
# Apache-2.0 (see LICENSE)
"""The sgl-kernel build plan: the build key (everything that changes the compiled wheel) and where the wheel comes
from (the host's wheel cache, a prebuilt wheel, or a build). Used by the module blackwell.sglang.sgl_kernel_build_plan.

The key is the first 16 hex digits of the SHA-256 of the JSON (sorted keys) of its inputs. Its inputs and their
spelling are a compatibility promise: a key that changes for the same tree and settings orphans every cached wheel.
"""

from __future__ import annotations

import glob
import hashlib
import json
import os

KEY_LENGTH = 16
# the files that define what is built: their digest stands for the commit of a tree that is no git checkout
TREE_FILES = ("CMakeLists.txt", "pyproject.toml", "csrc/common_extension.cc")


def _sha256(text):
    return hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()


def _stdout(out):
    # as ansible.builtin.command reports it (the key was first computed from that module's results)
    return (out or "").rstrip("\r\n")


def tree_identity(run, kernel_dir):
    """``{commit, tree_changes}`` of the (patched) kernel tree.

    A tree that is no git checkout (an unpacked release tarball) has no commit: the digest of the files that define
    what is built stands for it, so two such trees of different revisions never share a key.

    :param run: ``run(argv, cwd) -> (rc, stdout, stderr)``.
    """
    rc, out, _err = run(["git", "-c", "safe.directory=*", "rev-parse", "HEAD"], kernel_dir)
    if rc == 0:
        commit = _stdout(out)
    else:
        _rc, digest, _err = run(["sha256sum"] + list(TREE_FILES), kernel_dir)
        commit = "tree-" + _sha256(_stdout(digest))
    rc, diff, _err = run(["git", "-c", "safe.directory=*", "diff", "HEAD"], kernel_dir)
    return {"commit": commit, "tree_changes": _sha256(_stdout(diff) if rc == 0 else "")}


def key_inputs(tree, settings, cuda, torch, python_version, placeholders=(), machine=""):
    """The key's inputs: the tree's identity, the build settings as the role passes them, the toolchain.

    ``source_placeholders`` (a placeholder source gives a wheel without what that tree would have compiled) and
    ``machine`` (an aarch64 wheel is another wheel than an x86_64 one) are only there when they apply, so keys of
    complete x86_64 builds stay what they were before either was part of the key.
    """
    inputs = dict(settings)
    inputs.update(tree)
    inputs.update({"cuda": cuda, "torch": torch or "none", "python": ".".join(python_version.split(".")[:2])})
    if placeholders:
        inputs["source_placeholders"] = sorted(placeholders)
    if machine not in ("", "x86_64"):
        inputs["machine"] = machine
    return inputs


def build_key(inputs):
    return _sha256(json.dumps(inputs, sort_keys=True))[:KEY_LENGTH]


def wheels_in(directory):
    """The ``*.whl`` regular files (no links, no hidden files) of ``directory``, sorted."""
    return sorted(p for p in glob.glob(os.path.join(glob.escape(directory), "*.whl"))
                  if os.path.isfile(p) and not os.path.islink(p))


def wheel_source(cached, prebuilt_wheel, controller_wheel, force_rebuild):
    """``cache`` (the host holds a wheel of this key) > ``prebuilt`` (given, or in the controller's artifact cache) >
    ``build``; I(force_rebuild) always builds."""
    if force_rebuild:
        return "build"
    if cached:
        return "cache"
    return "prebuilt" if (prebuilt_wheel or controller_wheel) else "build"
