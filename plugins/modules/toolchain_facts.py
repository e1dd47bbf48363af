#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang contributors
# Apache-2.0 (see LICENSE)
"""Module blackwell.sglang.toolchain_facts: thin wrapper around module_utils._toolchain."""

from __future__ import annotations

DOCUMENTATION = r"""
module: toolchain_facts
short_description: Read the CUDA toolkit, CMake and torch a kernel build would use (read-only)
version_added: 0.1.0
description:
  - Calls C(<cuda_home>/bin/nvcc) by absolute path for its version (only C(release X.Y, VX.Y.Z) is trusted) and
    C(--list-gpu-arch) (does it list C(compute_120)?).
  - Lists every C(nvcc) on C(PATH) with its version, so that a shadowing toolkit is visible.
  - Reads C(CUDART_VERSION) from C(cuda_runtime_api.h) (C(include/) and C(targets/*/include/)) and where
    C(cuda/std/utility) lives (CUDA 13 moved it under C(include/cccl)).
  - Finds the first usable C(cmake) among I(cmake) then C(PATH) and reads C(cmake --version).
  - With I(python), runs that interpreter (a venv's) to read C(torch.__version__), C(torch.version.cuda) and
    C(torch.cuda.get_arch_list()); a missing interpreter or torch is reported, not a failure.
  - Nothing that is missing fails the module (the preflight runs before the toolchain is installed); the preflight
    role turns the facts into checks.
author:
  - blackwell.sglang maintainers (@blackwell-sglang)
options:
  cuda_home:
    description: CUDA toolkit root (C(CUDA_HOME)); C(<cuda_home>/bin/nvcc) is the compiler checked.
    type: path
    default: /usr/local/cuda
  python:
    description: Python interpreter of the venv whose torch is read (for example C(/opt/sglang/venv/bin/python)).
    type: path
  cmake:
    description: CMake binaries to try first, in order (for example the build venv's C(bin/cmake)); then C(PATH).
    type: list
    elements: path
    default: []
  search_path:
    description: C(PATH) to search for C(nvcc) and C(cmake); default is the module's own C(PATH).
    type: str
  probe_timeout:
    description: Seconds each probe (nvcc, cmake, the torch import) may take; a probe still running then is killed and
      reported as C(timed out after ...) in its C(error).
    type: float
    default: 120
extends_documentation_fragment:
  - blackwell.sglang.attributes.READ_ONLY
seealso:
  - module: blackwell.sglang.gpu_facts
  - module: blackwell.sglang.host_facts
"""

EXAMPLES = r"""
- name: Read the toolchain
  blackwell.sglang.toolchain_facts:
    cuda_home: /usr/local/cuda-13.0
    python: /opt/sglang/venv/bin/python
    cmake:
      - /opt/sglang/venv/bin/cmake
  register: toolchain

- name: Can nvcc build sm_120a?
  ansible.builtin.debug:
    msg: "{{ 'compute_120' in toolchain.nvcc.arch_list }}"
"""

RETURN = r"""
nvcc:
  description:
    - C(cuda_home), C(cuda_home_realpath), C(nvcc) (absolute path), C(present), C(version) (C("13.0.88")),
      C(version_error), C(arch_list) (C(compute_NN) strings), C(arch_error), C(cudart_version) (C("13.0") from
      C(CUDART_VERSION)), C(cudart_header), C(cccl) (C(cccl_dir), C(legacy_dir), C(cuda13_layout)),
      C(path_nvccs) (every nvcc on PATH with C(path), C(realpath), C(version)) and C(path_first).
  returned: always
  type: dict
cmake:
  description: C(path), C(version) (C("3.31.6")), C(source) (C(candidate) or C(path)) and C(error) (when none found).
  returned: always
  type: dict
torch:
  description:
    - C(python), C(present), C(version) (for example C(2.12.0.dev20260307+cu130)), C(cuda) (C(torch.version.cuda)),
      C(arch_list) (C(torch.cuda.get_arch_list())), C(git_version), C(python_version), C(error).
  returned: always
  type: dict
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.blackwell.sglang.plugins.module_utils import _bounded
from ansible_collections.blackwell.sglang.plugins.module_utils._toolchain import (
    collect_cmake,
    collect_nvcc,
    collect_torch,
)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            cuda_home=dict(type="path", default="/usr/local/cuda"),
            python=dict(type="path"),
            cmake=dict(type="list", elements="path", default=[]),
            search_path=dict(type="str"),
            probe_timeout=dict(type="float", default=120.0),
        ),
        supports_check_mode=True,
    )
    path_env = module.params["search_path"] or os.environ.get("PATH", "")

    if module.params["probe_timeout"] <= 0:
        module.fail_json(msg="probe_timeout must be > 0 seconds, got %s" % module.params["probe_timeout"])

    def run(argv):
        # bounded: a wedged GPU is exactly when nvidia-smi blocks
        return _bounded.run(argv, module.params["probe_timeout"], env_update={"LC_ALL": "C"})

    result = {
        "nvcc": collect_nvcc(run, module.params["cuda_home"], path_env),
        "cmake": collect_cmake(run, module.params["cmake"], path_env),
        "torch": collect_torch(run, module.params["python"]),
    }
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
