#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang contributors
# Apache-2.0 (see LICENSE)
"""Module blackwell.sglang.host_facts: thin wrapper around module_utils._host."""

from __future__ import annotations

DOCUMENTATION = r"""
module: host_facts
short_description: Read /dev/shm, free disk, MemAvailable, proxies, glibc and kernel headers (read-only)
version_added: 0.1.0
description:
  - Size of C(/dev/shm) (NCCL shared memory for tensor parallelism).
  - Free disk, in bytes and GiB, at the nearest existing ancestor of each path in I(disk_paths) (the paths need not exist yet).
  - C(MemAvailable) from C(/proc/meminfo) and the usable CPU count (CPU affinity), the inputs of the build sizing rule.
  - Proxy variables from the module's environment and C(/etc/environment), and the C(no_proxy) entries already set.
  - glibc version, kernel release and whether C(/lib/modules/<release>/build) exists.
  - Existence of each path in I(stat_paths) (for example the model directory).
  - With I(nccl_conf), the NCCL config files NCCL would read for the service (C(NCCL_CONF_FILE) or the service
    user's C(~/.nccl.conf), then C(/etc/nccl.conf)) and their keys (field report S03).
author:
  - blackwell.sglang maintainers (@blackwell-sglang)
options:
  disk_paths:
    description: Label to path; free space is measured for each (for example C(venv), C(build)).
    type: dict
    default: {}
  stat_paths:
    description: Label to path; existence is reported for each (for example C(model)).
    type: dict
    default: {}
  shm_path:
    description: Shared-memory mount to measure.
    type: path
    default: /dev/shm
  build_sizing:
    description:
      - Size a CUDA kernel build for these cores and this C(MemAvailable), returned in C(build_sizing), by the rule the
        preflight's RAM check uses - C(jobs = max(1, min(cpus, floor((MemAvailable - headroom_gib) / gib_per_job))))
        (field report B05).
    type: dict
    suboptions:
      gib_per_job:
        description: Peak GiB one compiler process may take.
        type: float
        default: 8
      headroom_gib:
        description: GiB left for everything else.
        type: float
        default: 16
      gencodes:
        description: Gencode targets per translation unit (the cap of nvcc's C(--threads)).
        type: int
        default: 1
      max_jobs:
        description: The operator's cap on jobs (null or 0 for none).
        type: int
  nccl_conf:
    description:
      - Read the NCCL config files for a service run as I(nccl_conf.user) with C(NCCL_CONF_FILE) set to
        I(nccl_conf.conf_file); returned in C(nccl_conf). NCCL applies them without logging them.
    type: dict
    suboptions:
      user:
        description: The service's account (name or uid); its passwd home holds C(.nccl.conf). An account that does
          not exist yet has none.
        type: str
      conf_file:
        description: The service's C(NCCL_CONF_FILE) (empty or unset - NCCL reads C(~/.nccl.conf) instead).
        type: str
        default: ""
extends_documentation_fragment:
  - blackwell.sglang.attributes.READ_ONLY
seealso:
  - module: blackwell.sglang.gpu_facts
  - module: blackwell.sglang.toolchain_facts
"""

EXAMPLES = r"""
- name: Read host facts
  blackwell.sglang.host_facts:
    disk_paths:
      venv: /opt/sglang/venv
    stat_paths:
      model: /models/Qwen3-NVFP4
  register: host

- name: Size a kernel build (8 GiB per nvcc process, 16 GiB left for the rest)
  blackwell.sglang.host_facts:
    build_sizing:
      gencodes: 2
  register: build_host

- name: Find the NCCL config files the service would read
  blackwell.sglang.host_facts:
    nccl_conf:
      user: sglang
  register: host
"""

RETURN = r"""
shm:
  description: C(path), C(size_bytes), C(free_bytes), C(size_gib) of the shared-memory mount (nulls when missing).
  returned: always
  type: dict
disk:
  description: Per label C(path), C(checked_path) (nearest existing ancestor), C(total_bytes), C(free_bytes), C(free_gib), C(device).
  returned: always
  type: dict
memory:
  description: C(mem_total_bytes), C(mem_available_bytes), C(mem_available_mib) from C(/proc/meminfo).
  returned: always
  type: dict
cpus:
  description: Usable CPUs (scheduler affinity of the module process).
  returned: always
  type: int
proxy:
  description: C(proxies) (variable to value), C(no_proxy) (entries), C(sources) (variable to C(env) or C(/etc/environment)).
  returned: always
  type: dict
glibc:
  description: glibc version such as C("2.39"), null on non-glibc systems.
  returned: always
  type: str
kernel:
  description: C(release), C(machine), C(headers_present) (C(/lib/modules/<release>/build) exists).
  returned: always
  type: dict
paths:
  description: Per label C(path), C(exists), C(is_dir).
  returned: always
  type: dict
nccl_conf:
  description:
    - With I(nccl_conf), C(user), C(home) (null when the account does not exist), C(searched) (the paths NCCL would
      read, in its order) and C(files) (those that exist - C(path), C(found_by) of C(NCCL_CONF_FILE), C(home) or
      C(system), C(keys) as a KEY to value dict).
  returned: when I(nccl_conf) is given
  type: dict
  sample: {"user": "sglang", "home": "/var/lib/sglang", "searched": ["/var/lib/sglang/.nccl.conf", "/etc/nccl.conf"],
           "files": [{"path": "/etc/nccl.conf", "found_by": "system", "keys": {"NCCL_IB_USE_INLINE": "1"}}]}
build_sizing:
  description:
    - With I(build_sizing), C(jobs) (parallel compiler jobs), C(compile_threads) (nvcc C(--threads) per job),
      C(peak_gib) (the worst case, jobs x threads x gib_per_job) and C(budget_jobs) (the jobs memory alone allows);
      null when C(MemAvailable) cannot be read.
  returned: when I(build_sizing) is given
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.blackwell.sglang.plugins.module_utils._build_sizing import build_parallelism
from ansible_collections.blackwell.sglang.plugins.module_utils._host import collect
from ansible_collections.blackwell.sglang.plugins.module_utils import _nccl_conf


def main():
    module = AnsibleModule(
        argument_spec=dict(
            disk_paths=dict(type="dict", default={}),
            stat_paths=dict(type="dict", default={}),
            shm_path=dict(type="path", default="/dev/shm"),
            build_sizing=dict(type="dict", options=dict(
                gib_per_job=dict(type="float", default=8.0),
                headroom_gib=dict(type="float", default=16.0),
                gencodes=dict(type="int", default=1),
                max_jobs=dict(type="int"),
            )),
            nccl_conf=dict(type="dict", options=dict(
                user=dict(type="str"),
                conf_file=dict(type="str", default=""),
            )),
        ),
        supports_check_mode=True,
    )
    for param in ("disk_paths", "stat_paths"):
        for key, value in module.params[param].items():
            if not isinstance(value, str) or not value.startswith("/"):
                module.fail_json(msg="%s.%s must be an absolute path (a string), got %r" % (param, key, value))
    facts = collect(paths=module.params["disk_paths"], stat_paths=module.params["stat_paths"],
                    shm_path=module.params["shm_path"])
    sizing = module.params["build_sizing"]
    if sizing is not None:
        mem = facts["memory"]["mem_available_bytes"]
        try:
            facts["build_sizing"] = None if mem is None else build_parallelism(
                facts["cpus"] or 1, mem, gib_per_job=sizing["gib_per_job"], headroom_gib=sizing["headroom_gib"],
                gencodes=max(1, sizing["gencodes"]), max_jobs=sizing["max_jobs"] or None)
        except ValueError as exc:
            module.fail_json(msg="build_sizing: %s" % exc)
    if module.params["nccl_conf"] is not None:
        facts["nccl_conf"] = _nccl_conf.collect(module.params["nccl_conf"]["user"],
                                                module.params["nccl_conf"]["conf_file"])
    module.exit_json(changed=False, **facts)


if __name__ == "__main__":
    main()
