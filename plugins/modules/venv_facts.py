#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang contributors
# Apache-2.0 (see LICENSE)
"""Module blackwell.sglang.venv_facts: thin wrapper around module_utils._venv_metadata."""

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
  requirements:
    description:
      - PEP 508 requirements checked against the venv (for example the pins an install just asked pip for), returned
        in C(requirements_check) - each must be installed at a version that satisfies it, and so must its dependency
        closure (the check M(blackwell.sglang.venv_stamp) makes before it records a stamp).
    type: list
    elements: str
  stamp:
    description: A JSON file (for example a role's install stamp) returned parsed in C(stamp); null when missing or not JSON.
    type: path
  protected:
    description:
      - Names or shell patterns of the distributions other roles own (torch, flashinfer-*, ...), for
        O(select_requirements), O(compare_to) and O(pip_dry_run). Default C(torch), C(torchaudio), C(torchvision),
        C(pytorch-triton), C(sgl-kernel), C(sglang-kernel), C(flashinfer-*), C(sglang).
    type: list
    elements: str
  select_requirements:
    description:
      - Which of a distribution's declared dependencies to install without replacing a protected one (field report
        B19), returned in C(requirements_plan). Extras and protected distributions are left out; every installed
        protected distribution is pinned to its exact version in the constraints.
    type: dict
    suboptions:
      of:
        description: The distribution whose C(Requires-Dist) is read (for example C(sglang)).
        type: str
        required: true
      mode:
        description: C(all), C(none), or a list of declared dependency names to install (their pins are kept).
        type: raw
        default: all
      excludes:
        description: More names or shell patterns to leave out.
        type: list
        elements: str
        default: []
      extra:
        description: Requirement strings appended verbatim.
        type: list
        elements: str
        default: []
  compare_to:
    description:
      - Distributions read earlier (name to version, for example the C(distributions) of a read before an install).
        C(protected_drift) then lists each protected distribution that changed, appeared or disappeared since.
    type: dict
  pip_dry_run:
    description:
      - Arguments of a C(pip install --dry-run --quiet --report -) run with the venv's pip (for example
        C([-r, requirements.txt, -c, constraints.txt])). Nothing is installed; C(pip_dry_run) says whether pip
        resolved them and which protected distributions the resolution would install or replace.
    type: list
    elements: str
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

- name: Plan SGLang's dependencies without torch, and what pip would do with them
  blackwell.sglang.venv_facts:
    python: /opt/sglang/venv/bin/python
    select_requirements:
      of: sglang
      excludes: [timm]
    pip_dry_run: [-r, /var/lib/sglang/requirements.txt, -c, /var/lib/sglang/constraints.txt]
  register: plan

- name: Refuse a resolution that replaces torch
  ansible.builtin.assert:
    that: plan.pip_dry_run.rc == 0 and plan.pip_dry_run.check.ok

- name: Torch and the other protected distributions are what they were before the install
  blackwell.sglang.venv_facts:
    python: /opt/sglang/venv/bin/python
    compare_to: "{{ before.distributions }}"
  register: after
  failed_when: not after.protected_drift.ok
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
requirements_check:
  description:
    - With I(requirements), C(ok), C(missing) (requirements and dependencies that are not installed) and C(unsatisfied)
      (installed at a version the requirement excludes, C(<requirement> (installed <version>))).
  returned: when I(requirements) is given
  type: dict
stamp:
  description: The parsed I(stamp) file, or null.
  returned: always
  type: raw
requirements_plan:
  description:
    - With I(select_requirements), C(requirements) (requirement strings to install, in metadata order, then
      C(extra)), C(constraints) (C(name==version) of every installed protected distribution but the planned one),
      C(excluded) (C({requirement, name, reason}) with reason C(protected), C(excluded) or C(not_selected)) and
      C(extras_skipped) (count).
  returned: when I(select_requirements) is given
  type: dict
protected_drift:
  description:
    - With I(compare_to), C(ok), C(verdict) (C(ok), C(torch_replaced), C(protected_package_changed)), C(changes)
      (C({name, from, to, text}); C(from) null when new, C(to) null when removed) and C(torch) (its version before).
      C(sglang) itself is not compared.
  returned: when I(compare_to) is given
  type: dict
pip_dry_run:
  description:
    - With I(pip_dry_run), pip's C(rc), C(stdout) and C(stderr), and C(check) (null when pip failed) - C(ok),
      C(verdict) (C(ok), C(torch_replaced), C(protected_package_changed)), C(changes) (C({name, from, to,
      required_by, text}) against the distributions installed now) and C(install_count).
  returned: when I(pip_dry_run) is given
  type: dict
"""

import json
import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.blackwell.sglang.plugins.module_utils import _sglang_deps as deps
from ansible_collections.blackwell.sglang.plugins.module_utils import _venv_metadata as vm


def main():
    module = AnsibleModule(
        argument_spec=dict(
            python=dict(type="path", required=True),
            versions=dict(type="list", elements="str", default=[]),
            requires=dict(type="list", elements="str", default=[]),
            torch_build=dict(type="bool", default=False),
            requirements=dict(type="list", elements="str"),
            stamp=dict(type="path"),
            protected=dict(type="list", elements="str"),
            select_requirements=dict(type="dict", options=dict(
                of=dict(type="str", required=True),
                mode=dict(type="raw", default="all"),
                excludes=dict(type="list", elements="str", default=[]),
                extra=dict(type="list", elements="str", default=[]),
            )),
            compare_to=dict(type="dict"),
            pip_dry_run=dict(type="list", elements="str"),
        ),
        supports_check_mode=True,
    )
    params = module.params
    if not os.path.exists(params["python"]):
        module.fail_json(msg="python: %s does not exist (no venv there)" % params["python"])
    select = params["select_requirements"]
    protected = deps.DEFAULT_PROTECTED if params["protected"] is None else tuple(params["protected"])
    requires = list(params["requires"]) + ([select["of"]] if select else [])
    args = {"versions": params["versions"], "requires": requires, "closure": params["requirements"] is not None,
            "requirements": params["requirements"] or [], "torch_build": params["torch_build"]}
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
    if params["requirements"] is not None:
        # without packaging nothing could be compared: that is no proof the requirements hold
        result["requirements_check"] = {"ok": bool(state.get("packaging")) and not (state.get("missing") or state.get("unsatisfied")),
                                        "missing": state.get("missing") or [],
                                        "unsatisfied": state.get("unsatisfied") or []}
    if select:
        try:
            plan = deps.select_requirements(state["requires"].get(vm.canonicalize_name(select["of"])),
                                            mode=select["mode"], excludes=select["excludes"], extra=select["extra"],
                                            protected=protected)
        except ValueError as exc:
            module.fail_json(msg="select_requirements: %s" % exc)
        plan["constraints"] = deps.constraint_lines(state["distributions"], protected=protected)
        result["requirements_plan"] = plan
    if params["compare_to"] is not None:
        result["protected_drift"] = deps.protected_drift(params["compare_to"], state["distributions"],
                                                         protected=protected)
    if params["pip_dry_run"] is not None:
        result["pip_dry_run"] = dry_run(module, params["python"], params["pip_dry_run"], state["distributions"],
                                        protected)
    module.exit_json(**result)


def dry_run(module, python, pip_args, installed, protected):
    """``pip install --dry-run --report -``: pip's output and, when it resolved, the protected changes it plans."""
    rc, out, err = module.run_command([python, "-m", "pip", "install", "--dry-run", "--quiet", "--report", "-"]
                                      + list(pip_args))
    check = None
    if rc == 0:
        try:
            check = deps.report_changes(json.loads(out), installed=installed, protected=protected)
        except ValueError as exc:
            module.fail_json(msg="pip_dry_run: pip printed no JSON report (%s): %s" % (exc, out[-1000:]))
    return {"rc": rc, "stdout": out, "stderr": err, "check": check}


if __name__ == "__main__":
    main()
