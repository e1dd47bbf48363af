#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang contributors
# Apache-2.0 (see LICENSE)

from __future__ import annotations

DOCUMENTATION = r"""
module: library_archs
short_description: Check that every library of a distribution holds device code for every target GPU arch
version_added: 0.1.0
description:
  - Reads the C(RECORD) of each named distribution installed in a Python environment and runs
    C(cuobjdump --list-elf) and C(cuobjdump --list-ptx) on every ELF shared library it lists.
  - Each library that holds device code must cover every target of O(target_archs) (module_utils/_cuobjdump.py), by
    the cubin of exactly that arch (C(sm_121a) for compute capability 12.1), a family cubin of the same major
    (C(sm_120f) covers 12.0 and 12.1) or, unless O(allow_ptx) is false, PTX the driver JIT-compiles. C(sm_120a) never
    counts for 12.1 (field report S13). Host-only libraries are listed and skipped.
  - This is what the wheel itself holds, so it also holds on a build host whose GPU the wheel does not target and
    catches a build whose CMake left a target out (upstream adds C(sm_121a) only on aarch64 build hosts).
  - Fails naming each library and the targets it lacks. Read-only.
author:
  - blackwell.sglang maintainers (@blackwell-sglang)
options:
  python:
    description:
      - The environment's interpreter (C(<venv>/bin/python)). Its C(sys.path) says where distributions are installed.
    type: path
    required: true
  distributions:
    description:
      - Distribution names to check (C(-), C(_) and C(.) are the same). Names not installed are skipped; the module
        fails when none is installed.
    type: list
    elements: str
    required: true
  target_archs:
    description:
      - The arch-specific targets every library with device code must cover, for example C([sm_120a, sm_121a]).
    type: list
    elements: str
    required: true
  cuobjdump:
    description:
      - Path of C(cuobjdump), normally C(<CUDA_HOME>/bin/cuobjdump). When it does not exist the module reports
        C(skipped) with the reason and checks nothing.
    type: path
    required: true
  allow_ptx:
    description:
      - Whether PTX alone covers a target (the driver compiles it on first load, without arch-specific features such
        as FP4 MMA; reported in C(ptx_only)). False requires a cubin.
    type: bool
    default: true
attributes:
  check_mode:
    support: full
    description: Read-only; runs the same in check mode.
  diff_mode:
    support: none
    description: Changes nothing, so there is no diff.
  platform:
    support: full
    platforms: posix
    description: Linux hosts (ELF libraries, the CUDA toolkit's cuobjdump).
notes:
  - The interpreter is run once to print its C(sys.path); nothing is imported.
"""

EXAMPLES = r"""
- name: Every library of the kernel wheel holds code for sm_120a and sm_121a
  blackwell.sglang.library_archs:
    python: /opt/sglang/releases/abc123/venv/bin/python
    distributions: [sgl-kernel, sglang-kernel]
    target_archs: [sm_120a, sm_121a]
    cuobjdump: /usr/local/cuda-13.0/bin/cuobjdump
  register: kernel_archs
"""

RETURN = r"""
skipped:
  description: True when O(cuobjdump) does not exist (nothing was checked); C(msg) says so.
  returned: always
  type: bool
distributions:
  description: The distributions found, name -> version.
  returned: always
  type: dict
  sample: {"sgl-kernel": "0.3.21"}
libraries:
  description:
    - One entry per library, C(path) relative to the site-packages directory, C(distribution), C(elf) (cubin archs),
      C(ptx) (virtual archs of the PTX), C(cubins) (count), C(device_code) (bool or null), C(covered)
      (target -> C({via, kind})), C(missing) (targets not covered), C(ptx_only).
  returned: always
  type: list
  elements: dict
archs:
  description: Every cubin arch over all libraries, sorted.
  returned: always
  type: list
  elements: str
  sample: ["sm_120a", "sm_121a"]
missing:
  description: Library path -> the targets it lacks (empty when every library covers every target).
  returned: always
  type: dict
"""

import json
import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.blackwell.sglang.plugins.module_utils import _cuobjdump, _elf

_PATH_PROBE = "import json, sys; print(json.dumps({'path': sys.path}))"


def main():
    module = AnsibleModule(
        argument_spec=dict(
            python=dict(type="path", required=True),
            distributions=dict(type="list", elements="str", required=True),
            target_archs=dict(type="list", elements="str", required=True),
            cuobjdump=dict(type="path", required=True),
            allow_ptx=dict(type="bool", default=True),
        ),
        supports_check_mode=True,
    )
    p = module.params
    if not p["target_archs"]:
        module.fail_json(msg="target_archs: name at least one target (sm_120a, sm_121a)")
    result = dict(changed=False, skipped=False, distributions={}, libraries=[], archs=[], missing={})
    if not os.access(p["cuobjdump"], os.X_OK):
        result.update(skipped=True, msg="%s does not exist: the built archs are not checked from the libraries"
                      % p["cuobjdump"])
        module.exit_json(**result)
    if not os.access(p["python"], os.X_OK):
        module.fail_json(msg="python: %s is not an executable interpreter" % p["python"])
    rc, out, err = module.run_command([p["python"], "-I", "-c", _PATH_PROBE])
    if rc != 0:
        module.fail_json(msg="%s could not print its sys.path (exit %d): %s" % (p["python"], rc, err.strip()[-500:]))
    try:
        site_dirs = [d for d in json.loads(out)["path"] if d and os.path.isdir(d)]
    except (ValueError, KeyError):
        module.fail_json(msg="%s printed no JSON for its sys.path: %r" % (p["python"], out[-300:]))
    dists = _elf.find_distributions(site_dirs, p["distributions"])
    if not dists:
        module.fail_json(msg="none of the distributions %s is installed for %s (searched %s)"
                         % (", ".join(p["distributions"]), p["python"], ", ".join(site_dirs)))
    listings, owner = {}, {}
    for name in sorted(dists):
        site, dist_info, _version = dists[name]
        for path in _elf.record_libraries(site, dist_info):
            rel = os.path.relpath(path, site)
            texts = []
            for flag in ("--list-elf", "--list-ptx"):
                rc, out, err = module.run_command([p["cuobjdump"], flag, path])
                # a host-only library: cuobjdump says so (exit status differs between releases)
                if rc != 0 and "does not contain device code" not in out + err:
                    module.fail_json(msg="%s %s %s failed (exit %d): %s" % (
                        p["cuobjdump"], flag, rel, rc, (err or out).strip()[-500:]), **result)
                texts.append(out + "\n" + err)
            listing = _cuobjdump.parse_listing("\n".join(texts))
            if not p["allow_ptx"]:
                listing["ptx_seen"] = listing["ptx"]
                listing["ptx"] = []
            listings[rel] = listing
            owner[rel] = name
    checked = _cuobjdump.check_libraries(listings, p["target_archs"])
    for entry in checked["libraries"]:
        entry["distribution"] = owner[entry["path"]]
    result.update(distributions=dict((n, v[2]) for n, v in dists.items()), libraries=checked["libraries"],
                  archs=sorted(set(a for e in checked["libraries"] for a in e["elf"])),
                  missing=dict((e["path"], e["missing"]) for e in checked["failed"]))
    if checked["failed"]:
        result["msg"] = ("%s lack device code for their targets %s: %s. sm_120a code does not run on compute "
                         "capability 12.1 (and the reverse); build with every target in "
                         "sglang_stack_target_archs (the sm120_only patch adds the gencodes the tree lacks on "
                         "this build host)" % (", ".join(sorted(dists)), ", ".join(p["target_archs"]),
                                               checked["message"]))
        module.fail_json(**result)
    ptx_only = ["%s (%s)" % (e["path"], ", ".join(e["ptx_only"])) for e in checked["libraries"] if e["ptx_only"]]
    if ptx_only:
        module.warn("covered by PTX only, JIT-compiled on first load without arch-specific features: %s"
                    % "; ".join(ptx_only))
    result["msg"] = "%s: %s" % (", ".join(sorted(dists)), checked["message"])
    module.exit_json(**result)


if __name__ == "__main__":
    main()
