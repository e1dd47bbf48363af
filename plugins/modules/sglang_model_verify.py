#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang contributors
# Apache-2.0 (see LICENSE)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: sglang_model_verify
short_description: Verify a model directory against its manifest (sizes + sha256, safetensors structure) and promote it
version_added: "0.1.0"
description:
  - Checks every file of the manifest in O(path) (present, same size, same sha256 or git blob id); every
    C(.safetensors) file also structurally (8-byte header length, JSON header, declared tensor byte ranges against
    the file size), so a truncated shard is refused even without a manifest; shards named by a
    C(*.safetensors.index.json) must exist. Errors name the file.
  - A per-host stamp in O(state_dir) records (size, mtime) of every verified file for the manifest's digest; files
    that match it are not re-hashed (a converged host reads only the safetensors headers).
  - The manifest is O(manifest), else O(manifest_file), else C(<path>/.sglang-model-manifest.json), else
    C(<state_dir>/<name>@<revision>.<path key>.manifest.json); with none of them and O(write_manifest=true) it is computed from
    the files (where the model was fetched) and written next to them (or to O(state_dir) when O(path) is not ours).
  - With O(promote_to), O(path) is a staging directory that is renamed to O(promote_to) after verification (same
    filesystem, atomic); a O(promote_to) that already exists is verified in place instead and never replaced.
  - The logic lives in C(plugins/module_utils/_model.py).
author:
  - blackwell.sglang maintainers (@blackwell-sglang)
options:
  path:
    description: The directory to verify (a staging directory when O(promote_to) is set).
    type: path
    required: true
  promote_to:
    description: Rename O(path) to this directory after it verified (C(<root>/<name>@<revision>)).
    type: path
  name:
    description: Model name (for the manifest and stamp file names).
    type: str
    required: true
  revision:
    description: Revision the files are from (a 40-hex commit; a branch or tag only with O(allow_branch)).
    type: str
    required: true
  allow_branch:
    description: Accept a revision that is not a 40-hex commit id.
    type: bool
    default: false
  allowed_roots:
    description: O(path) and O(promote_to) must lie below one of these directories.
    type: list
    elements: path
    required: true
  manifest:
    description: The manifest as a dict (C(files) -> C({size, sha256})), e.g. the fetching host's RV(manifest).
    type: dict
  manifest_file:
    description: A manifest file on the host.
    type: path
  write_manifest:
    description: When no manifest exists, compute one from the files as they are (trust on first use, where fetched).
    type: bool
    default: false
  own_dir:
    description: The directory is the collection's (write the manifest into it); false for an operator's directory.
    type: bool
    default: true
  strict:
    description: Files in the directory that the manifest does not list are errors.
    type: bool
    default: true
  state_dir:
    description: Per-host directory of stamps (and of manifests of directories that are not ours).
    type: path
    default: /var/lib/blackwell-sglang/model
  plan:
    description:
      - Validate only and change nothing. When the target (O(promote_to), else O(path)) exists it is verified
        (read-only) and RV(present) is true; otherwise the free space for O(need_bytes) plus O(disk_headroom_bytes)
        on the target's filesystem is checked and RV(present) is false. O(path) need not exist.
    type: bool
    default: false
  need_bytes:
    description: Bytes the model will take (plan mode); 0 skips the disk check.
    type: int
    default: 0
  disk_headroom_bytes:
    description: Bytes that must stay free after the copy (plan mode).
    type: int
    default: 0
  service_python:
    description: The service's Python; RV(service_env) sets C(HF_HUB_ENABLE_HF_TRANSFER) only when it imports hf_transfer.
    type: path
attributes:
  check_mode:
    support: full
    description: Verifies (reads) in check mode; writes no stamp or manifest and renames nothing.
  diff_mode:
    support: none
    description: No diff.
"""

EXAMPLES = r"""
- name: Verify an NFS checkpoint in place (not copied)
  blackwell.sglang.sglang_model_verify:
    path: /mnt/nfs/models/Qwen3.5-397B-A17B-NVFP4
    name: Qwen3.5-397B-A17B-NVFP4
    revision: 0123456789abcdef0123456789abcdef01234567
    allowed_roots: [/mnt/nfs/models]
    own_dir: false
    write_manifest: true

- name: Verify a copied staging directory against the fetching host's manifest and rename it into place
  blackwell.sglang.sglang_model_verify:
    path: /srv/models/.staging/m@0123456789abcdef0123456789abcdef01234567
    promote_to: /srv/models/m@0123456789abcdef0123456789abcdef01234567
    name: m
    revision: 0123456789abcdef0123456789abcdef01234567
    allowed_roots: [/srv/models]
    manifest: "{{ hostvars[source].sglang_model_manifest }}"
"""

RETURN = r"""
path:
  description: The verified directory (O(promote_to) when given).
  returned: always
  type: str
revision:
  description: The revision.
  returned: always
  type: str
manifest_digest:
  description: sha256 of the manifest's files (sizes + sha256).
  returned: success
  type: str
manifest:
  description: The manifest the files were checked against.
  returned: success
  type: dict
manifest_source:
  description: C(argument), C(manifest_file), C(in_dir), C(state_dir) or C(written) (computed now).
  returned: success
  type: str
present:
  description: Plan mode, the target exists and verified.
  returned: plan mode
  type: bool
disk:
  description: Plan mode without a target, C(free_bytes), C(need_bytes), C(filesystem_path) of the disk check.
  returned: plan mode, when the target is absent and O(need_bytes) > 0
  type: dict
promoted:
  description: O(path) was renamed to O(promote_to) in this run (or would be, in check mode).
  returned: always
  type: bool
hashed:
  description: Files hashed in this run (changed or never stamped).
  returned: success
  type: list
  elements: str
trusted:
  description: Files not re-hashed because the stamp matches their size and mtime.
  returned: success
  type: list
  elements: str
bytes_hashed:
  description: Bytes read to hash in this run.
  returned: success
  type: int
total_bytes:
  description: Size of the model in bytes.
  returned: success
  type: int
service_env:
  description: Environment for the service (C(HF_HUB_OFFLINE=1), C(HF_HUB_ENABLE_HF_TRANSFER=1) when importable).
  returned: success
  type: dict
errors:
  description: C([{file, reason}]) of the files that failed.
  returned: on failure
  type: list
"""

import os
import time

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.blackwell.sglang.plugins.module_utils import _model


def find_manifest(params, where, name, revision, final):
    if params["manifest"]:
        return _model.check_manifest(params["manifest"], "the manifest argument"), "argument"
    if params["manifest_file"]:
        return _model.load_manifest(params["manifest_file"]), "manifest_file"
    if os.path.lexists(os.path.join(where, _model.MANIFEST_NAME)):
        in_dir = _model.load_manifest_in(where)
        if in_dir is not None:
            return in_dir, "in_dir"
    kept = _model.state_file(params["state_dir"], name, revision, final, "manifest")
    if os.path.isfile(kept):
        return _model.load_manifest(kept), "state_dir"
    return None, None


def run(module, params):
    name = _model.check_name(params["name"])
    revision = _model.check_revision(params["revision"], params["allow_branch"])
    path = _model.check_under_roots(params["path"], params["allowed_roots"], "path")
    target = None
    if params["promote_to"]:
        target = _model.check_under_roots(params["promote_to"], params["allowed_roots"], "promote_to")
    if params["manifest"] and params["manifest_file"]:
        raise _model.ModelError("give manifest or manifest_file, not both")
    where = target if target and os.path.isdir(target) else path
    out = dict(changed=False, path=target or path, revision=revision, promoted=False)
    if params["plan"] and not os.path.isdir(target or path):
        out["present"] = False
        if params["need_bytes"] > 0:
            staged = sum(size for size, _mtime in _model.list_files(path).values()) if target and os.path.isdir(path) else 0
            out["disk"] = _model.check_disk(target or path, params["need_bytes"], staged, params["disk_headroom_bytes"])
        module.exit_json(**out)
    if not os.path.isdir(where):
        if module.check_mode:       # not fetched/copied yet: that would happen first
            out.update(changed=True, promoted=target is not None, manifest_digest="", manifest={}, service_env={})
            module.exit_json(**out)
        raise _model.ModelError("%s is not a directory" % where)
    final = target or path
    stamp_path = _model.state_file(params["state_dir"], name, revision, final, "stamp")

    manifest, source = find_manifest(params, where, name, revision, final)
    writes = []
    if manifest is None:
        if not params["write_manifest"]:
            raise _model.ModelError("no manifest for %s (none given, no %s in it, none in %s); pass one or set "
                                    "write_manifest" % (where, _model.MANIFEST_NAME, params["state_dir"]))
        manifest = _model.manifest_from_dir(where, name, revision, "directory")
        source = "written"
        keep = os.path.join(where, _model.MANIFEST_NAME) if params["own_dir"] else \
            _model.state_file(params["state_dir"], name, revision, final, "manifest")
        writes.append(keep)
        result = _model.verify_dir(where, manifest, None, strict=params["strict"])
    else:
        result = _model.verify_dir(where, manifest, _model.load_stamp(stamp_path), strict=params["strict"])
        if params["own_dir"] and source == "argument" and not os.path.isfile(os.path.join(where, _model.MANIFEST_NAME)):
            writes.append(os.path.join(where, _model.MANIFEST_NAME))
    out.update(manifest_source=source, hashed=result["hashed"], trusted=result["trusted"],
               bytes_hashed=result["bytes_hashed"], total_bytes=result["total_bytes"])
    if not result["ok"]:
        out["present"] = False
        module.fail_json(msg="%s does not match its manifest (%s): %s" % (where, source, _model.format_errors(
            where, result["errors"])), errors=result["errors"], **out)
    promote = target is not None and where == path
    out.update(manifest=manifest, manifest_digest=result["digest"], promoted=promote,
               service_env=_model.service_env(params["service_python"]))
    if params["plan"]:
        out.update(present=True, promoted=False)
        module.exit_json(**out)
    if module.check_mode:
        out["changed"] = promote or bool(writes)
        module.exit_json(**out)
    for dest in writes:
        if dest.startswith(params["state_dir"]):
            os.makedirs(params["state_dir"], mode=0o700, exist_ok=True)
        _model.write_json_atomic(dest, manifest)
        out["changed"] = True
    if promote:
        _model.promote(path, target)
        out["changed"] = True
    if result["hashed"] or promote:
        os.makedirs(params["state_dir"], mode=0o700, exist_ok=True)
        stamp = dict(result["stamp"], path=target or path, written=time.time())
        if promote or writes:
            stamp["files"] = {rel: list(v) for rel, v in _model.list_files(target or path).items() if rel in manifest["files"]}
        _model.write_json_atomic(stamp_path, stamp, mode=0o600)
    module.exit_json(**out)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type="path", required=True),
            promote_to=dict(type="path"),
            name=dict(type="str", required=True),
            revision=dict(type="str", required=True),
            allow_branch=dict(type="bool", default=False),
            allowed_roots=dict(type="list", elements="path", required=True),
            manifest=dict(type="dict"),
            manifest_file=dict(type="path"),
            write_manifest=dict(type="bool", default=False),
            own_dir=dict(type="bool", default=True),
            strict=dict(type="bool", default=True),
            state_dir=dict(type="path", default="/var/lib/blackwell-sglang/model"),
            service_python=dict(type="path"),
            plan=dict(type="bool", default=False),
            need_bytes=dict(type="int", default=0),
            disk_headroom_bytes=dict(type="int", default=0),
        ),
        supports_check_mode=True,
    )
    try:
        run(module, module.params)
    except _model.ModelError as exc:
        module.fail_json(msg=str(exc))


if __name__ == "__main__":
    main()
