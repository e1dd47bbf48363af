#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang contributors
# Apache-2.0 (see LICENSE)
"""Module blackwell.sglang.venv_facts: thin wrapper around module_utils._venv_metadata (issue 18)."""

from __future__ import annotations

DOCUMENTATION = r"""
module: venv_facts
short_description: Read a venv's installed distributions with its own interpreter (read-only)
version_added: 0.1.0
description:
  - Runs the collection's one venv metadata reader with the venv's interpreter I(python). It reads
    C(importlib.metadata) only and imports nothing of the venv, so it is fast, needs no GPU and works before
    dependencies are installed.
  - Names are normalised by PEP 503 (C(packaging.utils.canonicalize_name), or the identical rule where packaging is
    not importable), so C(Flashinfer_Python) and C(flashinfer-python) are one name.
  - This is how tasks read what a venv holds; docs/architecture.md ("Running code in the target venv") says how
    other code runs there.
author:
  - blackwell.sglang maintainers (@blackwell-sglang)
options:
  python:
    description: The venv's interpreter (for example C(/opt/sglang/venv/bin/python)); it must exist.
    type: path
    required: true
  versions:
    description: Distribution names whose installed version is returned in C(versions) (null when not installed).
    type: list
    elements: str
    default: []
  requires:
    description: Distribution names whose C(Requires-Dist) list is returned in C(requires) (null when not installed).
    type: list
    elements: str
    default: []
  torch_build:
    description:
      - Also read the installed torch's C(torch/version.py) (parsed, not imported) for its C(version) and C(cuda)
        build, the values of C(torch.__version__) and C(torch.version.cuda), returned in C(torch).
    type: bool
    default: false
  stamp:
    description: A JSON file (for example a role's install stamp) returned parsed in C(stamp); null when missing or not JSON.
    type: path
extends_documentation_fragment:
  - blackwell.sglang.attributes.READ_ONLY
seealso:
  - module: blackwell.sglang.venv_stamp
"""

EXAMPLES = r"""
- name: Read the FlashInfer and torch versions of the venv
  blackwell.sglang.venv_facts:
    python: /opt/sglang/venv/bin/python
    versions: [flashinfer-python, torch]
  register: venv

- name: Show them
  ansible.builtin.debug:
    msg: "flashinfer {{ venv.versions['flashinfer-python'] }}, torch {{ venv.versions.torch }}"
"""

RETURN = r"""
python_version:
  description: The venv interpreter's version.
  returned: always
  type: str
  sample: "3.12.3"
executable:
  description: The venv interpreter's C(sys.executable).
  returned: always
  type: str
distributions:
  description: Every installed distribution, PEP 503 name -> version.
  returned: always
  type: dict
  sample: {"torch": "2.10.0.dev20251201+cu130", "filelock": "3.20.0"}
versions:
  description: I(versions), PEP 503 name -> version or null.
  returned: always
  type: dict
  sample: {"flashinfer-python": "0.6.3", "flashinfer-cubin": null}
requires:
  description: I(requires), PEP 503 name -> list of C(Requires-Dist) strings or null.
  returned: always
  type: dict
torch:
  description: >-
    With I(torch_build), C({version, cuda}) of the installed torch (C(cuda) null for a CPU build), C({error}) when its
    C(torch/version.py) is missing or unreadable, C({}) when torch is not installed.
  returned: when I(torch_build)
  type: dict
stamp:
  description: The parsed I(stamp) file, or null.
  returned: always
  type: raw
"""

import json
import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.blackwell.sglang.plugins.module_utils import _venv_metadata as vm


def main():
    module = AnsibleModule(
        argument_spec=dict(
            python=dict(type="path", required=True),
            versions=dict(type="list", elements="str", default=[]),
            requires=dict(type="list", elements="str", default=[]),
            torch_build=dict(type="bool", default=False),
            stamp=dict(type="path"),
        ),
        supports_check_mode=True,
    )
    params = module.params
    if not os.path.exists(params["python"]):
        module.fail_json(msg="python: %s does not exist (no venv there)" % params["python"])
    args = {"versions": params["versions"], "requires": params["requires"], "closure": False,
            "torch_build": params["torch_build"]}
    try:
        # the probe's output (JSON, or a traceback): bytes that are not UTF-8 are replaced, never fatal
        state = vm.read_venv(lambda argv: module.run_command(argv, errors="replace"), params["python"], args)
    except RuntimeError as exc:
        module.fail_json(msg=str(exc))
    stamp = None
    if params["stamp"]:
        try:
            with open(params["stamp"], encoding="utf-8") as handle:     # a cache: unreadable means none
                stamp = json.load(handle)
        except (IOError, OSError, ValueError):
            stamp = None
    result = dict(changed=False, python_version=state["python"], executable=state["executable"],
                  distributions=state["distributions"], versions=state["versions"], requires=state["requires"],
                  stamp=stamp)
    if params["torch_build"]:
        result["torch"] = state.get("torch", {})
    module.exit_json(**result)


if __name__ == "__main__":
    main()
