#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang contributors
# Apache-2.0 (see LICENSE)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: sglang_model_archive
short_description: Check a model archive or directory for links and special files before it is unpacked or copied
version_added: "0.1.0"
description:
  - Reads, without changing anything, a tar file (plain, gzip, bzip2, xz), a zip file or a directory that holds a
    checkpoint and refuses what could make unpacking or copying it read or write outside the model (docs/model.md,
    "Links and special files").
  - A directory is judged by the collection's link rule, the same one C(blackwell.sglang.sglang_model_verify) applies
    (a relative symbolic link is followed only when it resolves to a regular file inside the model root; for a
    Hugging Face cache snapshot that root is the cache repository, so its C(../../blobs/<sha>) links work). A link
    out of the root, an absolute, dangling, looping or directory link, a FIFO, socket or device, and a file with hard
    links outside the model are refused, naming the entry and its target. A copy that follows links can then copy
    nothing from outside.
  - An archive's members must be regular files, directories, relative symbolic links that stay inside the archive,
    or hard links to earlier regular members. Refused, naming the member, an absolute name or one with C(..), a member
    that appears twice, a member below a link member (an unpacker would write through the link), and a device, FIFO
    or other special member. Links that survive this are judged again by the link rule after unpacking, before the
    model is promoted.
  - Also reports the bytes of the regular files (what the unpacked or copied model takes on the target's disk).
  - The role C(blackwell.sglang.sglang_model) runs it on the controller for C(sglang_model_archive) before it copies
    anything to a host. The logic lives in C(plugins/module_utils/_checkpoint_tree.py).
author:
  - blackwell.sglang maintainers (@blackwell-sglang)
options:
  path:
    description: The archive file or the directory.
    type: path
    required: true
extends_documentation_fragment:
  - blackwell.sglang.attributes.READ_ONLY
"""

EXAMPLES = r"""
- name: Check the air-gapped archive on the controller before copying it
  blackwell.sglang.sglang_model_archive:
    path: /srv/offline/Qwen3.5-397B-A17B-NVFP4.tar
  delegate_to: localhost
  become: false
  register: archive_check
"""

RETURN = r"""
kind:
  description: C(directory), C(tar) or C(zip).
  returned: success
  type: str
files:
  description: Number of regular files (a directory's readable files, an archive's file and hard-link members).
  returned: success
  type: int
bytes:
  description: Bytes of the regular files (for a directory, of the files its links resolve to).
  returned: success
  type: int
errors:
  description: C([{file, reason}]), the entries or members refused.
  returned: on failure
  type: list
  elements: dict
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.blackwell.sglang.plugins.module_utils import _checkpoint_tree as _tree

SHOWN = 10


def main():
    module = AnsibleModule(argument_spec=dict(path=dict(type="path", required=True)), supports_check_mode=True)
    path = module.params["path"]
    try:
        result = _tree.check_archive(path)
    except _tree.TreeError as exc:
        module.fail_json(msg="sglang_model_archive=%s %s" % (path, exc.reason))
    problems = result.pop("problems")
    if problems:
        errors = [{"file": p.rel, "reason": p.reason} for p in problems]
        shown = "; ".join("%s: %s" % (e["file"], e["reason"]) for e in errors[:SHOWN])
        more = " (and %d more)" % (len(errors) - SHOWN) if len(errors) > SHOWN else ""
        module.fail_json(msg="sglang_model_archive=%s is refused before anything is copied or unpacked: %s%s" % (
            path, shown, more), errors=errors, **result)
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
