#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang contributors
# Apache-2.0 (see LICENSE)
"""Module blackwell.sglang.venv_stamp: thin wrapper around module_utils._venv_state."""

from __future__ import annotations

DOCUMENTATION = r"""
module: venv_stamp
short_description: Decide whether an expensive no-op step can be skipped, from a stamp checked against the live host
version_added: 0.1.0
description:
  - A stamp is a small JSON file written (I(state=record)) after a step succeeded (a pip install, an import check,
    SGLang's parser validation, the nvcc compile proof). I(state=check) reports C(matched=true) only when the stamp
    still stands for everything the step depends on, read live from the host in one call.
  - The I(inputs) (pins, index URLs, argv, arch, source hash ...) and the interpreter's real path are hashed; a
    different hash is a miss.
  - With I(python), the venv's distributions are read with that interpreter by the collection's one venv metadata reader
    (importlib.metadata, nothing imported; see M(blackwell.sglang.venv_facts));
    every entry of I(requirements) must be installed at a version that satisfies it, the dependency closure of
    I(requirements) must be complete, and the digest of the closure of I(requirements) and I(names) (name, version and the sha256
    of each distribution's C(RECORD)) must equal the stamp's. A removed, changed or reinstalled package is a miss.
  - Each of I(files) must exist and have the sha256 the stamp recorded.
  - A stamp is a cache of a check's success, not configuration; writing it reports C(changed=false) so that a
    re-check forced by an unrelated change never reads as a change to the host; C(written) says whether the file
    was rewritten. I(state=check) never writes and runs in check mode too.
author:
  - blackwell.sglang maintainers (@blackwell-sglang)
options:
  path:
    description: The stamp file (for example C(<venv>/.blackwell-sglang-stamps/torch_nightly-install.json)).
    type: path
    required: true
  state:
    description: C(check) compares, C(record) writes the stamp for the live state (call it after the step succeeded).
    type: str
    choices: [check, record]
    default: check
  inputs:
    description: Everything else the step depends on, any JSON value; hashed canonically (key order is irrelevant).
    type: raw
    default: {}
  python:
    description: The venv's interpreter whose distributions are part of the stamp; omitted, no venv is read.
    type: path
  requirements:
    description: PEP 508 requirements that must be satisfied (for example C(torch==2.10.0.dev20251201+cu130)).
    type: list
    elements: str
    default: []
  names:
    description:
      - Further distribution names whose dependency closure is part of the stamp, with no version check.
      - A name or dependency that is not installed is digested as absent; installing it later is a miss.
    type: list
    elements: str
    default: []
  digest:
    description:
      - What of the dependency closure is digested. C(closure) (every distribution in it) or C(named) (only the
        distributions named in I(requirements) and I(names); the whole closure is still checked for presence and
        versions, so a missing or unsatisfied dependency is a miss either way).
      - C(named) suits a step whose dependencies later roles move within their specifiers (FlashInfer's, after
        sglang_source installs SGLang's dependencies), which would otherwise miss once on every first re-run.
    type: str
    choices: [closure, named]
    default: closure
  files:
    description: Host files whose sha256 is part of the stamp (for example the C(nvcc) and C(ptxas) binaries).
    type: list
    elements: path
    default: []
  result:
    description: With I(state=record), a JSON value stored in the stamp and returned by a later matching check (for
      example a probe's output, so that facts derived from it need no re-run).
    type: raw
extends_documentation_fragment:
  - blackwell.sglang.attributes.READ_ONLY
notes:
  - I(state=record) writes the stamp file; the READ_ONLY fragment describes I(state=check).
seealso:
  - module: ansible.builtin.pip
"""

EXAMPLES = r"""
- name: Check whether the pinned torch is already installed exactly
  blackwell.sglang.venv_stamp:
    path: /opt/sglang/venv/.blackwell-sglang-stamps/torch_nightly-install.json
    python: /opt/sglang/venv/bin/python
    requirements: [torch==2.10.0.dev20251201+cu130]
    inputs: {index: https://download.pytorch.org/whl/nightly/cu130}
  register: torch_stamp

- name: Install torch
  ansible.builtin.pip:
    name: torch==2.10.0.dev20251201+cu130
    virtualenv: /opt/sglang/venv
  when: not torch_stamp.matched

- name: Record the stamp
  blackwell.sglang.venv_stamp:
    path: /opt/sglang/venv/.blackwell-sglang-stamps/torch_nightly-install.json
    state: record
    python: /opt/sglang/venv/bin/python
    requirements: [torch==2.10.0.dev20251201+cu130]
    inputs: {index: https://download.pytorch.org/whl/nightly/cu130}
  when: not torch_stamp.matched
"""

RETURN = r"""
matched:
  description: Whether the stamp stands for the live state (I(state=check); with I(state=record) whether it does now).
  returned: always
  type: bool
reasons:
  description: "Why it did not match (empty when it did), for example C(not installed: torch==2.10.0) or C(the inputs changed)."
  returned: always
  type: list
  elements: str
  sample: ["the installed distributions changed"]
written:
  description: Whether I(state=record) rewrote the stamp file (false when its content was already the same).
  returned: always
  type: bool
distributions:
  description: Every installed distribution of the venv, normalised name -> version (empty without I(python)).
  returned: always
  type: dict
  sample: {"torch": "2.10.0.dev20251201+cu130", "filelock": "3.20.0"}
python_version:
  description: The venv interpreter's version (empty without I(python)).
  returned: always
  type: str
result:
  description: The I(result) stored with the stamp when it matched, else null.
  returned: always
  type: raw
"""

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.blackwell.sglang.plugins.module_utils import _venv_state as vs


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type="path", required=True),
            state=dict(type="str", choices=["check", "record"], default="check"),
            inputs=dict(type="raw", default={}),
            python=dict(type="path"),
            requirements=dict(type="list", elements="str", default=[]),
            names=dict(type="list", elements="str", default=[]),
            digest=dict(type="str", choices=list(vs.DIGESTS), default="closure"),
            files=dict(type="list", elements="path", default=[]),
            result=dict(type="raw"),
        ),
        supports_check_mode=True,
    )
    params = module.params
    state = None
    if params["python"] and not os.path.exists(params["python"]):
        if params["state"] == "record":
            module.fail_json(msg="%s does not exist: nothing to record" % params["python"])
        module.exit_json(changed=False, matched=False, reasons=["no interpreter %s" % params["python"]], written=False,
                         distributions={}, python_version="", result=None)
    if params["python"]:
        try:
            state = vs.read_state(lambda argv: module.run_command(argv, errors="replace"), params["python"],
                                  params["requirements"], params["names"])
        except RuntimeError as exc:
            if params["state"] == "record":
                module.fail_json(msg=str(exc))
            module.exit_json(changed=False, matched=False, reasons=[str(exc)], written=False, distributions={},
                             python_version="", result=None)
    files = dict((path, vs.file_digest(path)) for path in params["files"])
    inputs_hex = vs.inputs_digest(params["inputs"], params["python"])
    stamp = vs.load_stamp(params["path"])
    written = False
    if params["state"] == "record":
        fresh = vs.build_stamp(inputs_hex, state, files, params["result"], params["digest"])
        matched, reasons = vs.evaluate(fresh, inputs_hex, state, files, params["digest"])
        venv_reasons = [r for r in reasons if not r.startswith("missing file: ")]
        if venv_reasons:
            module.fail_json(msg="refusing to record a stamp for a venv that does not satisfy it: %s" % "; ".join(venv_reasons),
                             reasons=reasons)
        # a missing file is recorded as such: that stamp never matches, so the step keeps running every time
        if not module.check_mode:
            try:
                written = vs.write_stamp(params["path"], fresh)
            except (IOError, OSError) as exc:
                module.fail_json(msg="cannot write the stamp %s: %s" % (params["path"], exc))
        stamp = fresh
    else:
        matched, reasons = vs.evaluate(stamp, inputs_hex, state, files, params["digest"])
    module.exit_json(
        changed=False, matched=matched, reasons=reasons, written=written,
        distributions=(state or {}).get("distributions", {}), python_version=(state or {}).get("python", ""),
        result=stamp.get("result") if (matched and stamp) else None,
    )


if __name__ == "__main__":
    main()
