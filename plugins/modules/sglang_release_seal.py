#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang contributors
# Apache-2.0 (see LICENSE)
"""Module blackwell.sglang.sglang_release_seal: thin wrapper around module_utils._release_seal."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: sglang_release_seal
short_description: Check or record the seal of a staged release (one check standing for every build stage)
version_added: "0.1.0"
description:
  - A release directory is immutable once its manifest is written. Its seal (C(<release_dir>/seal.json)) records
    every distribution of the release venv (version and the sha256 of its C(RECORD)), the release's own files and
    the host files the build stages depend on (sha256 each, with the stage that writes it), the inventory's build
    settings (sha256 of each value, computed on the controller) and the facts the build stages publish.
  - O(state=check) reads all of that again in one call. When the seal holds, RV(holds) is true and RV(facts) hands
    back the recorded facts named in O(restore); the converge then skips the build stages (toolchain, torch,
    flashinfer, sglang, kernel, probe). Otherwise RV(changes) names every difference and the stage it belongs to, and
    a warning says so when there was a seal (a broken seal is never passed over silently).
  - O(state=record) writes the seal for the live state (call it after every build stage ran and the probe gate
    passed). Like an install stamp it is a cache of checks that passed, so it reports no change; a release without
    its venv is left unsealed, with a warning.
  - C(RECORD) digests see installs, removals, up- and downgrades and reinstalls, not a hand edit inside an installed
    file; C(sglang_converge_verify=deep) and C(playbooks/audit.yml) are the full checks.
author:
  - blackwell.sglang maintainers (@blackwell-sglang)
options:
  release_dir:
    description:
      - The release (C(sglang_release_dir)), or a link to one (C(<root>/current), as C(playbooks/audit.yml) reads it).
        The release id is the name of the directory it resolves to.
    type: path
    required: true
  state:
    description: C(check) compares the seal with the host, C(record) writes it.
    type: str
    choices: [check, record]
    default: check
  python:
    description: The release venv's interpreter; default C(<release_dir>/venv/bin/python).
    type: path
  inputs:
    description:
      - The inventory's build settings as C(name -> sha256 hex of the value); a setting added, removed or changed
        since the seal was recorded breaks it. Hash on the controller so that no value (a token) reaches the host.
      - Omitted, the settings are not compared (the audit reads what the host holds, not what the inventory asks).
    type: dict
  files:
    description:
      - With O(state=record), host files whose sha256 the seal keeps, as C(path -> stage) (the stage that writes the
        file). The venv's install stamps are added by the module. O(state=check) hashes the files the seal recorded.
    type: dict
    default: {}
  facts:
    description: With O(state=record), the facts the build stages published (any JSON values), kept in the seal.
    type: dict
    default: {}
  restore:
    description: With O(state=check), the fact names RV(facts) may return from a holding seal (others are dropped).
    type: list
    elements: str
    default: []
extends_documentation_fragment:
  - blackwell.sglang.attributes.READ_ONLY
notes:
  - O(state=record) writes C(<release_dir>/seal.json) (0644, no secrets in it); the READ_ONLY fragment describes
    O(state=check). In check mode O(state=record) writes nothing.
seealso:
  - module: blackwell.sglang.venv_stamp
"""

EXAMPLES = r"""
- name: Check the staged release's seal
  blackwell.sglang.sglang_release_seal:
    release_dir: /opt/sglang/releases/3f9c0a1b2d4e
    inputs: {sglang_source_extra_requirements: "9f2c...e1"}
    restore: [sglang_stack_sglang_commit, sglang_stack_probe_result]
  register: seal

- name: Record it after the build stages ran and the probe gate passed
  blackwell.sglang.sglang_release_seal:
    release_dir: /opt/sglang/releases/3f9c0a1b2d4e
    state: record
    inputs: {sglang_source_extra_requirements: "9f2c...e1"}
    files:
      /opt/sglang/releases/3f9c0a1b2d4e/probe.json: probe
      /usr/local/cuda-13.0/bin/nvcc: toolchain
    facts: {sglang_stack_sglang_commit: d28f35240a28de1e09967975e258b3dd7e74924f}
  when: not seal.holds
"""

RETURN = r"""
holds:
  description: Whether the seal stands for the live state (O(state=check)); after O(state=record), whether it was sealed.
  returned: always
  type: bool
found:
  description: Whether a seal of this format was there to compare (false on a release that was never sealed).
  returned: always
  type: bool
changes:
  description:
    - What differs, one entry each - C(what) (seal, release, distribution, file, setting), C(name), C(was), C(now)
      (versions, sha256 digests, or whether a setting was present) and C(stage) (toolchain, torch, flashinfer,
      sglang, kernel, probe, release, or all).
  returned: always
  type: list
  elements: dict
  sample: [{"what": "distribution", "name": "torch", "was": "2.13.0", "now": "2.12.0", "stage": "torch"}]
reasons:
  description: RV(changes) as lines naming the stage that repairs each.
  returned: always
  type: list
  elements: str
  sample: ["torch 2.13.0 -> 2.12.0 (stage torch)"]
stages:
  description: The build stages the changes name, in converge order (all six for a setting or a missing seal).
  returned: always
  type: list
  elements: str
facts:
  description: The recorded facts named in O(restore) when the seal holds, else empty.
  returned: always
  type: dict
written:
  description: Whether O(state=record) rewrote the seal file.
  returned: always
  type: bool
distributions:
  description: Every distribution of the release venv, name -> version (empty when it has no interpreter).
  returned: always
  type: dict
inputs:
  description:
    - The settings' digests compared (O(inputs)), for the O(state=record) call at the end of the same run - taken at
      the check, before later stages add facts of their own. Null when O(inputs) was omitted.
  returned: always
  type: dict
"""

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.blackwell.sglang.plugins.module_utils import _release_seal as seal_lib
from ansible_collections.blackwell.sglang.plugins.module_utils._venv_metadata import read_venv


def main():
    module = AnsibleModule(
        argument_spec=dict(
            release_dir=dict(type="path", required=True),
            state=dict(type="str", choices=["check", "record"], default="check"),
            python=dict(type="path"),
            inputs=dict(type="dict"),
            files=dict(type="dict", default={}),
            facts=dict(type="dict", default={}),
            restore=dict(type="list", elements="str", default=[]),
        ),
        supports_check_mode=True,
    )
    params = module.params
    release_dir = os.path.realpath(params["release_dir"])
    release = os.path.basename(release_dir)
    path = os.path.join(release_dir, seal_lib.SEAL_FILE)
    python = params["python"] or os.path.join(release_dir, "venv", "bin", "python")
    inputs = None if params["inputs"] is None else dict((str(k), str(v)) for k, v in params["inputs"].items())
    result = dict(changed=False, holds=False, found=False, changes=[], reasons=[], stages=[], facts={}, written=False,
                  distributions={}, inputs=inputs)

    records = None
    if os.path.exists(python):
        try:
            read = read_venv(lambda argv: module.run_command(argv, errors="replace"), python,
                             {"records": True, "closure": False})
            records = read.get("records") or {}
            result["distributions"] = read.get("distributions") or {}
        except RuntimeError as exc:
            if params["state"] == "record":
                module.fail_json(msg="cannot record the seal of %s: %s" % (release_dir, exc), **result)
            records = None
            result["reasons"] = ["the release venv cannot be read: %s" % exc]
    elif params["state"] == "record":
        # a seal only saves work: a release without its venv (a play whose stages were stood in) stays unsealed
        module.warn("release %s is not sealed: %s does not exist" % (release, python))
        result["reasons"] = ["no release venv: %s does not exist" % python]
        module.exit_json(**result)

    if params["state"] == "record":
        files = dict(params["files"])
        files.update(seal_lib.stamp_files(os.path.join(release_dir, "venv")))
        fresh = seal_lib.build(release, records, files, inputs or {}, params["facts"])
        if not module.check_mode:
            try:
                result["written"] = seal_lib.write(path, fresh)
            except (IOError, OSError) as exc:
                module.fail_json(msg="cannot write the seal %s: %s" % (path, exc), **result)
        result["holds"] = True
        module.exit_json(**result)

    seal = seal_lib.load(path)
    result["found"] = seal is not None
    if records is None:
        changes = [{"what": "seal", "name": python, "was": None, "now": "no readable release venv", "stage": "all"}]
        holds = False
    else:
        holds, changes = seal_lib.evaluate(seal, release, records, inputs)
    result.update(holds=holds, changes=changes, reasons=[seal_lib.describe(c) for c in changes],
                  stages=seal_lib.stages(changes))
    if holds:
        recorded = seal.get("facts") or {}
        result["facts"] = dict((name, recorded[name]) for name in params["restore"] if name in recorded)
    elif seal is not None:
        module.warn("the seal of release %s is broken: %s. Every build stage runs its checks again; %s repairs it."
                    % (release, "; ".join(result["reasons"][:20]), ", ".join(result["stages"]) or "release"))
    module.exit_json(**result)


if __name__ == "__main__":
    main()
