#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang contributors
# Apache-2.0 (see LICENSE)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: sglang_model_fetch
short_description: Download a pinned Hugging Face Hub checkpoint into staging, verify it, rename it into place
version_added: "0.1.0"
description:
  - Resolves O(revision) (a 40-hex commit; a branch or tag only with O(allow_branch=true)) and reads the
    repository's file tree with C(huggingface_hub) (C(HfApi.list_repo_tree)), that is the size and LFS sha256 of every
    weight file and the git blob id of every small file. That is the manifest.
  - Checks the disk space of the filesystem of O(root) (manifest size minus what is already staged, plus
    O(disk_headroom_bytes)) before downloading anything.
  - Downloads with C(huggingface_hub.snapshot_download) (C(hf_xet) where the repository and the installed client
    support it) into C(<root>/.staging/<name>@<commit>), which resumes an interrupted download, then checks every
    file against the manifest (size, sha256 or git blob id) and every C(.safetensors) file structurally. A file that
    fails is deleted (a rerun fetches it again) and the module fails naming it. Only a verified directory is renamed
    to C(<root>/<name>@<commit>); an existing target is never replaced.
  - A target that already exists is verified in place instead (size + mtime stamp, so a converged host re-hashes
    nothing) and reported unchanged.
  - Writes progress (bytes done / total, rate) to O(progress_file) for C(blackwell.sglang.sglang_model_wait) while
    it runs as an async task.
  - The logic lives in C(plugins/module_utils/_model.py).
author:
  - blackwell.sglang maintainers (@blackwell-sglang)
options:
  repo_id:
    description: Hub repository id, e.g. C(nvidia/Qwen3.5-397B-A17B-NVFP4).
    type: str
    required: true
  revision:
    description: 40-hex commit id of the repository (a branch or tag only with O(allow_branch)).
    type: str
    required: true
  allow_branch:
    description: Accept a branch or tag name and resolve it to its commit (not for production).
    type: bool
    default: false
  name:
    description: Directory name of the model below O(root) (the target is C(<root>/<name>@<commit>)).
    type: str
    required: true
  root:
    description: Directory that holds the models. Must lie below one of O(allowed_roots).
    type: path
    required: true
  allowed_roots:
    description: Directories a model may be written below.
    type: list
    elements: path
    required: true
  token:
    description: Hub access token (from ansible-vault). Never logged; passed to the client in memory only.
    type: str
    default: ""
  endpoint:
    description: Hub endpoint; empty means C(huggingface_hub)'s default (C(HF_ENDPOINT) or huggingface.co).
    type: str
    default: ""
  allow_patterns:
    description: Only files matching one of these fnmatch patterns are fetched (a trailing C(/) means a folder).
    type: list
    elements: str
    default: []
  ignore_patterns:
    description: Files matching one of these patterns are not fetched.
    type: list
    elements: str
    default: []
  max_workers:
    description: Parallel file downloads.
    type: int
    default: 8
  disk_headroom_bytes:
    description: Free bytes that must remain on the filesystem after the download.
    type: int
    default: 1073741824
  state_dir:
    description: Per-host directory of the verification stamps (never inside the model directory).
    type: path
    default: /var/lib/blackwell-sglang/model
  progress_file:
    description: JSON progress record written every 2 s while downloading or hashing; empty disables it.
    type: path
    default: ""
  plan_only:
    description: Validate, read the metadata and check the disk only; report RV(action) without downloading.
    type: bool
    default: false
  request_timeout:
    description:
      - Seconds each Hub request may wait to connect, and then for the next bytes of its answer (it replaces
        C(huggingface_hub)'s own limits, which are none for the file listing). Downloads through C(hf_xet) keep
        that library's own limits.
      - A request that fails (refused, DNS, timeout, TLS, an HTTP error) fails the module with a message naming
        the request's URL (credentials and query masked), what failed and the variable to check. A failure while
        reading the metadata writes nothing; one while downloading leaves the partial files in the staging
        directory, from which a rerun resumes, and promotes nothing.
    type: float
    default: 60
attributes:
  check_mode:
    support: full
    description: In check mode the module plans (as with O(plan_only)) and reports whether it would download.
  diff_mode:
    support: none
    description: No diff.
requirements:
  - huggingface_hub (the role installs 1.33.0 with hf_xet 1.6.0 into C(sglang_model_venv))
notes:
  - Run it with the interpreter of the venv that has C(huggingface_hub) (C(ansible_python_interpreter)).
"""

EXAMPLES = r"""
- name: Fetch the checkpoint (async, see the role for the progress loop)
  blackwell.sglang.sglang_model_fetch:
    repo_id: nvidia/Qwen3.5-397B-A17B-NVFP4
    revision: 0123456789abcdef0123456789abcdef01234567
    name: Qwen3.5-397B-A17B-NVFP4
    root: /srv/models
    allowed_roots: [/srv/models]
    token: "{{ vault_hf_token }}"
    allow_patterns: ["*.safetensors", "*.json", "tokenizer*"]
    progress_file: /var/lib/blackwell-sglang/model/progress.json
  no_log: true
  async: 86400
  poll: 0
  register: fetch_job
"""

RETURN = r"""
action:
  description: C(present) (already verified), C(download) (fetched now, or would be in plan/check mode).
  returned: always
  type: str
path:
  description: The verified model directory C(<root>/<name>@<commit>).
  returned: always
  type: str
revision:
  description: The 40-hex commit the revision resolved to.
  returned: always
  type: str
manifest_digest:
  description: sha256 of the manifest's files (sizes + sha256); empty in plan/check mode before a download.
  returned: always
  type: str
manifest:
  description: The manifest written to C(<path>/.sglang-model-manifest.json) (files, sizes, sha256, git blob ids).
  returned: always
  type: dict
total_bytes:
  description: Size of the selected files in bytes.
  returned: always
  type: int
staged_bytes:
  description: Bytes already in the staging directory before this run (resumed, not downloaded again).
  returned: always
  type: int
bytes_hashed:
  description: Bytes read to verify in this run (0 on a converged host).
  returned: always
  type: int
disk:
  description: C(free_bytes), C(need_bytes), C(filesystem_path) of the disk check (absent when nothing to fetch).
  returned: when a download is needed
  type: dict
errors:
  description: Files that failed verification, C([{file, reason}]).
  returned: on failure
  type: list
"""

import os
import time

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.blackwell.sglang.plugins.module_utils import _model


def run(module, params):
    name = _model.check_name(params["name"])
    revision = _model.check_revision(params["revision"], params["allow_branch"])
    root = _model.check_under_roots(params["root"], params["allowed_roots"], "sglang_model_root")
    allow, ignore = params["allow_patterns"], params["ignore_patterns"]
    if not params["request_timeout"] > 0:
        raise _model.ModelError("sglang_model_hf_request_timeout (request_timeout) must be a number of seconds > 0; "
                                "got %r" % params["request_timeout"])
    commit, manifest = _model.hub_manifest(params["repo_id"], revision, name, token=params["token"],
                                           endpoint=params["endpoint"], allow=allow, ignore=ignore,
                                           request_timeout=params["request_timeout"])
    target = _model.model_dir(root, name, commit)
    staging = _model.staging_dir(target)
    stamp_path = _model.state_file(params["state_dir"], name, commit, target, "stamp")
    out = dict(changed=False, path=target, revision=commit, manifest=manifest, manifest_digest="",
               total_bytes=sum(f["size"] for f in manifest["files"].values()), staged_bytes=0, bytes_hashed=0)

    if os.path.isdir(target):
        stored = _model.load_manifest_in(target)
        if stored is None:
            raise _model.ModelError("%s exists but holds no %s; it was not put there by this module: move it away "
                                    "or verify it with sglang_model_verify" % (target, _model.MANIFEST_NAME))
        disagree = _model.manifest_disagreements(stored, manifest)
        if disagree:
            module.fail_json(msg="%s exists but its manifest does not match the Hub's metadata of %s@%s: %s" % (
                target, params["repo_id"], commit, _model.format_errors(target, disagree)), errors=disagree, **out)
        result = _model.verify_dir(target, stored, _model.load_stamp(stamp_path))
        out.update(action="present", manifest=stored, manifest_digest=result["digest"],
                   bytes_hashed=result["bytes_hashed"])
        if not result["ok"]:
            module.fail_json(msg="%s does not match its manifest: %s" % (target, _model.format_errors(
                target, result["errors"])), errors=result["errors"], **out)
        if result["hashed"] and not module.check_mode:
            save_stamp(params["state_dir"], stamp_path, result["stamp"])
        module.exit_json(**out)

    staged = _model.staged_bytes(staging, manifest)
    out.update(action="download", staged_bytes=staged)
    out["disk"] = _model.check_disk(target, out["total_bytes"], staged, params["disk_headroom_bytes"])
    if params["plan_only"] or module.check_mode:
        out["changed"] = True
        module.exit_json(**out)

    os.makedirs(staging, mode=0o755, exist_ok=True)
    counters = {"hashed": 0}
    progress = _model.ProgressWriter(params["progress_file"], out["total_bytes"],
                                     lambda: _model.staged_bytes(staging, manifest)
                                     if progress.phase == "download" else counters["hashed"])
    progress.start()
    try:
        _model.hub_download(params["repo_id"], commit, staging, token=params["token"], endpoint=params["endpoint"],
                            allow=allow, ignore=ignore, max_workers=params["max_workers"],
                            request_timeout=params["request_timeout"], target=target)
        progress.phase = "verify"

        def advance(n):
            counters["hashed"] += n
        result = _model.verify_dir(staging, manifest, None, progress=advance)
        if not result["ok"]:
            removed = _model.remove_bad(staging, result["errors"])
            raise VerifyFailed("the download of %s@%s does not match the repository's metadata: %s. Removed %d bad "
                               "file(s) from %s; a rerun fetches them again" % (
                                   params["repo_id"], commit, _model.format_errors(staging, result["errors"]),
                                   len(removed), staging), result["errors"])
        manifest = _model.fill_sha256(manifest, result["computed"])
        _model.write_json_atomic(os.path.join(staging, _model.MANIFEST_NAME), manifest)
        _model.promote(staging, target)
        stamp = dict(result["stamp"], path=target, manifest_digest=_model.manifest_digest(manifest))
        save_stamp(params["state_dir"], stamp_path, stamp)
    except VerifyFailed as exc:
        progress.finish("failed", {"msg": str(exc)})
        module.fail_json(msg=str(exc), errors=exc.errors, **out)
    except _model.ModelError as exc:
        progress.finish("failed", {"msg": str(exc)})
        module.fail_json(msg=str(exc), **out)
    out.update(changed=True, manifest=manifest, manifest_digest=_model.manifest_digest(manifest),
               bytes_hashed=result["bytes_hashed"])
    progress.finish("done", {"path": target, "revision": commit, "manifest_digest": out["manifest_digest"]})
    module.exit_json(**out)


class VerifyFailed(_model.ModelError):
    def __init__(self, msg, errors):
        super(VerifyFailed, self).__init__(msg)
        self.errors = errors


def save_stamp(state_dir, path, stamp):
    os.makedirs(state_dir, mode=0o700, exist_ok=True)
    stamp = dict(stamp, written=time.time())
    _model.write_json_atomic(path, stamp, mode=0o600)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            repo_id=dict(type="str", required=True),
            revision=dict(type="str", required=True),
            allow_branch=dict(type="bool", default=False),
            name=dict(type="str", required=True),
            root=dict(type="path", required=True),
            allowed_roots=dict(type="list", elements="path", required=True),
            token=dict(type="str", default="", no_log=True),
            endpoint=dict(type="str", default=""),
            allow_patterns=dict(type="list", elements="str", default=[]),
            ignore_patterns=dict(type="list", elements="str", default=[]),
            max_workers=dict(type="int", default=8),
            disk_headroom_bytes=dict(type="int", default=1073741824),
            state_dir=dict(type="path", default="/var/lib/blackwell-sglang/model"),
            progress_file=dict(type="path", default=""),
            plan_only=dict(type="bool", default=False),
            request_timeout=dict(type="float", default=60.0),
        ),
        supports_check_mode=True,
    )
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
    try:
        run(module, module.params)
    except _model.ModelError as exc:
        module.fail_json(msg=str(exc))


if __name__ == "__main__":
    main()
