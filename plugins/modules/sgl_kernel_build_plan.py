#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang contributors
# Apache-2.0 (see LICENSE)
"""Module blackwell.sglang.sgl_kernel_build_plan: thin wrapper around module_utils._sgl_kernel_plan."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: sgl_kernel_build_plan
short_description: Compute the sgl-kernel build key and decide where the wheel comes from (read-only)
version_added: "0.1.0"
description:
  - The build key stands for everything that changes the compiled wheel; the same key reuses the cached wheel. Its
    inputs are the (patched) kernel tree's commit and local changes (C(git rev-parse HEAD), C(git diff HEAD); a tree
    that is no git checkout is named by the digest of C(CMakeLists.txt), C(pyproject.toml) and
    C(csrc/common_extension.cc)), the venv's torch and Python major.minor, O(cuda), every entry of O(settings), the
    O(placeholders) (only when there are any) and the machine (only when it is not C(x86_64)).
  - Then decides where the wheel comes from, in this order, O(force_rebuild) aside (it always builds) -
    C(cache) (a C(*.whl) in C(<wheel_cache_dir>/<key>/)), C(prebuilt) (O(prebuilt_wheel), or a wheel of this key
    among O(controller_wheels)) or C(build).
  - Fails, naming C(sgl_kernel_sm120_prebuilt_wheel), when a prebuilt wheel was built for another key than this
    host needs.
  - The logic lives in C(plugins/module_utils/_sgl_kernel_plan.py).
author:
  - blackwell.sglang maintainers (@blackwell-sglang)
options:
  kernel_dir:
    description: The kernel tree (C(kernel_dir) of M(blackwell.sglang.sgl_kernel_patch)).
    type: path
    required: true
  python:
    description: The venv's interpreter; the wheel is built against its torch.
    type: path
    required: true
  cuda:
    description: The full nvcc release the wheel is compiled with (C(13.0.88)).
    type: str
    required: true
  settings:
    description: The build settings that are part of the key, by name, as they are (sort lists where their order does
      not matter).
    type: dict
    default: {}
  placeholders:
    description: Placeholder sources the build uses (C(placeholders) of M(blackwell.sglang.sgl_kernel_sources)).
    type: list
    elements: str
    default: []
  wheel_cache_dir:
    description: The host's wheel cache; the wheels of a key are in C(<wheel_cache_dir>/<key>/).
    type: path
    required: true
  prebuilt_wheel:
    description: A wheel on the controller built elsewhere, with O(prebuilt_wheel_key) the key it was built for.
    type: str
    default: ""
  prebuilt_wheel_key:
    description: The key O(prebuilt_wheel) was built for.
    type: str
    default: ""
  controller_wheels:
    description: Wheels of the controller's artifact cache, C(<dir>/<key>/<wheel>); the last one of this key is the
      prebuilt wheel when O(prebuilt_wheel) is empty.
    type: list
    elements: str
    default: []
  force_rebuild:
    description: Build even when a wheel of this key is at hand.
    type: bool
    default: false
extends_documentation_fragment:
  - blackwell.sglang.attributes.READ_ONLY
seealso:
  - module: blackwell.sglang.sgl_kernel_patch
  - module: blackwell.sglang.sgl_kernel_sources
"""

EXAMPLES = r"""
- name: Compute the build key and where the wheel comes from
  blackwell.sglang.sgl_kernel_build_plan:
    kernel_dir: /opt/sglang/src/sgl-kernel
    python: /opt/sglang/venv/bin/python
    cuda: "13.0.88"
    settings:
      target_archs: [sm_120a]
      patches: [cmake_policy_guards, sm120_only]
    wheel_cache_dir: /var/cache/blackwell-sglang/wheels/sgl-kernel
  register: plan
"""

RETURN = r"""
key:
  description: The build key.
  returned: always
  type: str
  sample: 3f1c0a9e5b7d2c41
key_inputs:
  description: What the key stands for.
  returned: always
  type: dict
wheel_dir:
  description: C(<wheel_cache_dir>/<key>).
  returned: always
  type: str
cached_wheels:
  description: The wheels already in RV(wheel_dir), sorted.
  returned: always
  type: list
  elements: str
source:
  description: C(cache), C(prebuilt) or C(build).
  returned: always
  type: str
prebuilt:
  description: The controller path of the prebuilt wheel, or empty.
  returned: always
  type: str
"""

import json
import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.blackwell.sglang.plugins.module_utils import _sgl_kernel_plan as plan
from ansible_collections.blackwell.sglang.plugins.module_utils import _venv_metadata as vm


def main():
    module = AnsibleModule(
        argument_spec=dict(
            kernel_dir=dict(type="path", required=True),
            python=dict(type="path", required=True),
            cuda=dict(type="str", required=True),
            settings=dict(type="dict", default={}),
            placeholders=dict(type="list", elements="str", default=[]),
            wheel_cache_dir=dict(type="path", required=True),
            prebuilt_wheel=dict(type="str", default=""),
            prebuilt_wheel_key=dict(type="str", default="", no_log=False),
            controller_wheels=dict(type="list", elements="str", default=[]),
            force_rebuild=dict(type="bool", default=False),
        ),
        supports_check_mode=True,
    )
    p = module.params
    try:
        venv = vm.read_venv(lambda argv: module.run_command(argv, errors="replace"), p["python"], {"versions": ["torch"]})
    except RuntimeError as exc:
        module.fail_json(msg=str(exc))
    tree = plan.tree_identity(lambda argv, cwd: module.run_command(argv, cwd=cwd, errors="replace"), p["kernel_dir"])
    inputs = plan.key_inputs(tree, p["settings"], p["cuda"], venv["versions"].get("torch"), venv["python"],
                             p["placeholders"], os.uname().machine)
    key = plan.build_key(inputs)
    wheel_dir = os.path.join(p["wheel_cache_dir"], key)
    cached = plan.wheels_in(wheel_dir)
    controller = sorted(w for w in p["controller_wheels"] if os.path.basename(os.path.dirname(w)) == key)
    controller = controller[-1] if controller else ""
    source = plan.wheel_source(cached, p["prebuilt_wheel"], controller, p["force_rebuild"])
    prebuilt = p["prebuilt_wheel"] or controller
    prebuilt_key = p["prebuilt_wheel_key"] if p["prebuilt_wheel"] else key
    result = dict(changed=False, key=key, key_inputs=inputs, wheel_dir=wheel_dir, cached_wheels=cached, source=source,
                  prebuilt=prebuilt)
    if source == "prebuilt" and prebuilt_key != key:
        module.fail_json(msg="the prebuilt wheel %s was built for key %s, this host needs %s (inputs: %s). Build on a "
                         "host with the same inputs or unset sgl_kernel_sm120_prebuilt_wheel to build here."
                         % (prebuilt, prebuilt_key, key, json.dumps(inputs, sort_keys=True)), **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
