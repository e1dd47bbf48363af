#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang contributors
# Apache-2.0 (see LICENSE)
"""Module blackwell.sglang.torch_verify: the torch_nightly role's check of the torch a venv holds."""

from __future__ import annotations

DOCUMENTATION = r"""
module: torch_verify
short_description: Check that a venv holds the pinned torch build and that it covers every GPU (read-only)
version_added: 0.1.0
description:
  - Runs the probe I(probe) (the torch_nightly role's C(files/torch_probe.py)) with the venv's interpreter
    I(python), or takes its earlier output from I(cached), and fails naming what is wrong, all problems at once.
  - torch must be installed, import, be the pinned I(version) and report C(torch.version.cuda) == I(cuda); every
    name of I(extras) must be installed at its pinned version; torch's CUDA major must be nvcc's (I(nvcc_version),
    field report B21); C(torch.cuda.get_arch_list()) must cover every compute capability of I(compute_caps) (field
    report B14).
  - Versions are compared in PEP 440 normal form where C(packaging) is importable, else as written (wheel metadata
    carries the normal form).
  - A missing interpreter is no failure, since the venv does not exist yet in check mode. The result says so in C(msg).
author:
  - blackwell.sglang maintainers (@blackwell-sglang)
options:
  python:
    description: The venv's interpreter (for example C(/opt/sglang/venv/bin/python)).
    type: path
    required: true
  probe:
    description: The probe's Python source; it prints one JSON object (see C(probe) in RETURN).
    type: str
    required: true
  version:
    description: The pinned torch version (for example C(2.12.0.dev20260307+cu130)).
    type: str
    required: true
  cuda:
    description: The C(torch.version.cuda) the build must report (C("13.0")); null for a CPU build.
    type: str
  extras:
    description: Distribution name -> pinned version of every package installed together with torch.
    type: dict
    default: {}
  nvcc_version:
    description: The toolkit's nvcc version (C(13.0.88)); empty skips the CUDA-major check.
    type: str
    default: ""
  compute_caps:
    description: Compute capabilities torch must have kernels for (C(["12.0"])); empty uses the GPUs the probe saw.
    type: list
    elements: str
    default: []
  cached:
    description: An earlier probe output to check instead of running the probe (the install stamp keeps one).
    type: dict
  timeout:
    description: Seconds the probe (the torch import) may take.
    type: float
    default: 300
extends_documentation_fragment:
  - blackwell.sglang.attributes.READ_ONLY
seealso:
  - module: blackwell.sglang.venv_stamp
"""

EXAMPLES = r"""
- name: Verify torch in the venv
  blackwell.sglang.torch_verify:
    python: /opt/sglang/venv/bin/python
    probe: "{{ lookup('ansible.builtin.file', 'torch_probe.py') }}"
    version: 2.12.0.dev20260307+cu130
    cuda: "13.0"
    extras:
      torchvision: 0.27.0.dev20260307+cu130
    nvcc_version: 13.0.88
  register: torch_check
"""

RETURN = r"""
probed:
  description: False when there was no interpreter to probe (nothing was checked).
  returned: always
  type: bool
from_cache:
  description: True when I(cached) was checked instead of running the probe.
  returned: always
  type: bool
probe:
  description:
    - The probe's output - C(version) (from the distribution's metadata), C(cuda), C(arch_list), C(cuda_available),
      C(device_caps), C(extras) ({name -> version or null}), C(import_error).
  returned: when probed
  type: dict
coverage:
  description: Per compute capability, how the arch list covers it (C(covered), C(via), C(kind), C(message)).
  returned: when probed
  type: list
  elements: dict
installed:
  description: C(version), C(cuda), C(arch_list), C(venv), C(python) of the verified torch.
  returned: when probed
  type: dict
"""

import json
import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.blackwell.sglang.plugins.module_utils import _bounded
from ansible_collections.blackwell.sglang.plugins.module_utils._cuda_toolchain import arch_coverage

try:
    from packaging.version import InvalidVersion, Version
except ImportError:  # pragma: no cover - hosts without packaging compare the versions as written
    Version = None
    InvalidVersion = ValueError


def normal(version):
    """``version`` in PEP 440 normal form (as written where packaging is missing or it is no PEP 440 version)."""
    if version is None or Version is None:
        return version
    try:
        return str(Version(str(version)))
    except InvalidVersion:
        return str(version)


def problems(probe, params, venv):
    """Every problem of ``probe`` against the pins (the role's error text), and the GPUs' coverage."""
    out = []
    version, cuda = probe.get("version"), probe.get("cuda")
    if (version is None or probe.get("import_error") is not None or normal(version) != normal(params["version"])
            or cuda != params["cuda"]):
        out.append("%s has torch %s (torch.version.cuda=%s, import error: %s); wanted %s with CUDA %s. (A newer "
                   "version that satisfies the pin's range, or a PyPI torch that replaced the nightly, is field "
                   "report B19.)" % (venv, version, json.dumps(cuda), json.dumps(probe.get("import_error")),
                                     normal(params["version"]), json.dumps(params["cuda"])))
    got = probe.get("extras") or {}
    for name, pinned in sorted(params["extras"].items()):
        if got.get(name) is None or normal(got[name]) != normal(pinned):
            out.append("%s is %s, pinned %s" % (name, json.dumps(got.get(name)), pinned))
    nvcc = params["nvcc_version"]
    if cuda is not None and nvcc and nvcc.split(".", maxsplit=1)[0] != str(cuda).split(".", maxsplit=1)[0]:
        out.append("torch was built for CUDA %s but the toolkit's nvcc is %s; JIT and extension builds need the same "
                   "CUDA major." % (cuda, nvcc))
    caps = params["compute_caps"] or probe.get("device_caps") or []
    coverage = [arch_coverage(probe.get("arch_list") or [], cap) for cap in sorted(set(caps), key=caps.index)]
    for cov in coverage:
        if not cov["covered"]:
            out.append("torch %s cannot run on GPU %s: %s. Use a cu128+ build (cu130 nightly) that lists sm_120."
                       % (version, cov["compute_cap"], cov["message"]))
    return out, coverage


def main():
    module = AnsibleModule(
        argument_spec=dict(
            python=dict(type="path", required=True),
            probe=dict(type="str", required=True),
            version=dict(type="str", required=True),
            cuda=dict(type="str"),
            extras=dict(type="dict", default={}),
            nvcc_version=dict(type="str", default=""),
            compute_caps=dict(type="list", elements="str", default=[]),
            cached=dict(type="dict"),
            timeout=dict(type="float", default=300.0),
        ),
        supports_check_mode=True,
    )
    params = module.params
    python = params["python"]
    venv = os.path.dirname(os.path.dirname(python))
    result = {"changed": False, "probed": True, "from_cache": params["cached"] is not None}
    if params["cached"] is not None:
        probe = params["cached"]
    elif not os.path.isfile(python):
        module.exit_json(changed=False, probed=False, from_cache=False,
                         msg="check mode: %s does not exist yet; torch is verified on the real converge" % venv)
    else:
        rc, out, err = _bounded.run([python, "-c", params["probe"]] + sorted(params["extras"]), params["timeout"])
        try:
            probe = json.loads(out)
        except ValueError:
            module.fail_json(msg="the torch probe with %s failed (rc=%s): %s" % (python, rc, (err or out).strip()[-1500:]))
    found, coverage = problems(probe, params, venv)
    result.update(probe=probe, coverage=coverage)
    if found:
        module.fail_json(msg="; ".join(found), **result)
    result["installed"] = {"version": probe["version"], "cuda": probe.get("cuda"), "arch_list": probe.get("arch_list"),
                           "venv": venv, "python": python}
    result["msg"] = "torch %s (CUDA %s)%s" % (probe["version"], json.dumps(probe.get("cuda")), "".join(
        "; GPU %s: %s" % (cov["compute_cap"], cov["message"]) for cov in coverage))
    module.exit_json(**result)


if __name__ == "__main__":
    main()
