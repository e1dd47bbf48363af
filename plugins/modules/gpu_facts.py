#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang contributors
# Apache-2.0 (see LICENSE)
"""Module blackwell.sglang.gpu_facts: thin wrapper around module_utils._gpu."""

from __future__ import annotations

DOCUMENTATION = r"""
module: gpu_facts
short_description: Read NVIDIA GPUs, driver, topology and PCIe P2P state (read-only)
version_added: 0.1.0
description:
  - Runs C(nvidia-smi --query-gpu=...) and returns the driver version, the highest CUDA version the driver supports,
    and per GPU the index, name, UUID, PCI bus id, compute capability (C("12.0")) and memory in MiB.
  - With more than one GPU also parses C(nvidia-smi topo -m) (NVLink or PCIe path per pair) and
    C(nvidia-smi topo -p2p r) (peer read status), reads PCIe ACS control bits of the bridges above each GPU from
    C(lspci -D -vvv), the IOMMU group type of each GPU from sysfs and IOMMU parameters from C(/proc/cmdline).
  - No nvidia-smi is not a failure; C(gpu_count) is then 0 and C(reason) says why. An nvidia-smi that fails for
    another reason (NVML driver/library mismatch, driver not loaded) is also reported in C(reason) and C(error), and
    C(reboot_required) is true for the NVML mismatch.
  - An nvidia-smi too old to know the C(compute_cap) query field (driver 470 and older) is a failure naming the
    driver requirement (580 or newer for CUDA 13), never "no GPU".
  - Changes nothing on the host; runs the same in check mode.
author:
  - blackwell.sglang maintainers (@blackwell-sglang)
options:
  nvidia_smi:
    description:
      - Path of C(nvidia-smi). Default is the one found on C(PATH) (and the usual sbin directories).
    type: path
  lspci:
    description:
      - Path of C(lspci) (package pciutils). Default is the one found on C(PATH). ACS bits are only visible to root.
    type: path
  topology:
    description:
      - Parse C(nvidia-smi topo -m) and C(topo -p2p r) when there is more than one GPU.
    type: bool
    default: true
  pcie:
    description:
      - Read ACS control bits (lspci) and IOMMU group types (sysfs) for each GPU.
    type: bool
    default: true
  kernel_log:
    description:
      - When nvidia-smi fails, read this boot's kernel log (C(journalctl -k -b)) to name the cause, a wedged GPU
        (Xid 119/154/8/79, GSP timeout; C(gpu_wedged_xid_<n>), reboot required), C(bios_bar_disabled)
        (C(RmInitAdapter failed! [0x22:0x56:884])) or another adapter-init failure, instead of "driver not loaded"
        (field reports N03, N20 in docs/field-reports.md).
    type: bool
    default: true
  probe_timeout:
    description:
      - Seconds each C(nvidia-smi)/C(lspci) call may take. A call still running then (a wedged GPU is exactly when
        nvidia-smi blocks) is killed; the module fails with C(error=timeout), which preflight reports as a finding.
    type: float
    default: 60
extends_documentation_fragment:
  - blackwell.sglang.attributes.READ_ONLY
notes:
  - Sources of the formats and error texts are listed in C(plugins/module_utils/_gpu.py) and in C(docs/preflight.md).
seealso:
  - module: blackwell.sglang.toolchain_facts
  - module: blackwell.sglang.host_facts
"""

EXAMPLES = r"""
- name: Read GPU facts
  blackwell.sglang.gpu_facts:
  register: gpu

- name: Use a specific nvidia-smi (for example a test double)
  blackwell.sglang.gpu_facts:
    nvidia_smi: /opt/fake/bin/nvidia-smi
    pcie: false
  register: gpu

- name: Show compute capabilities
  ansible.builtin.debug:
    msg: "{{ gpu.gpus | map(attribute='compute_cap') | list }}"
"""

RETURN = r"""
nvidia_smi:
  description: Path of the nvidia-smi used, or null when none was found.
  returned: always
  type: str
driver_version:
  description: NVIDIA driver version, for example C(580.95.05); null when unknown.
  returned: always
  type: str
cuda_driver_version:
  description: Highest CUDA version the driver supports (C(CUDA Version) in C(nvidia-smi -q)), for example C("13.0").
  returned: always
  type: str
gpu_count:
  description: Number of GPUs listed; 0 when nvidia-smi is missing or failed.
  returned: always
  type: int
gpus:
  description:
    - One entry per GPU with C(index), C(name), C(uuid), C(pci_bus_id) (C(0000:19:00.0)), C(compute_cap) (C("12.0")),
      C(memory_total_mib), C(memory_used_mib), C(driver_version), C(persistence_mode), and from C(nvidia-smi -q)
      C(mig_mode) (C(Enabled)/C(Disabled)), C(mig_mode_pending), C(gsp_firmware_version), C(vbios_version),
      C(compute_mode). Values nvidia-smi cannot provide are null (GB10 reports memory as C([N/A])).
  returned: always
  type: list
  elements: dict
reason:
  description: Why there are no usable GPUs (no nvidia-smi, NVML mismatch, driver not loaded, no devices); null otherwise.
  returned: always
  type: str
error:
  description: Failure kind of nvidia-smi (C(nvml_mismatch), C(driver_not_loaded), C(no_devices), C(unknown), ...) or null.
  returned: always
  type: str
reboot_required:
  description: True when NVML reports a driver/library version mismatch (reboot pending).
  returned: always
  type: bool
topology:
  description:
    - Parsed C(nvidia-smi topo -m) with C(gpus), C(links) (pair to link type such as C(PHB), C(SYS), C(NV18)),
      C(nvlink_any), C(nvlink_all_pairs), C(pcie_only_pairs) and C(raw); null with fewer than two GPUs.
  returned: always
  type: dict
p2p_read:
  description: Parsed C(nvidia-smi topo -p2p r) with C(status), C(all_ok), C(not_ok_pairs); null with fewer than two GPUs.
  returned: always
  type: dict
pcie:
  description:
    - Per GPU bus id, C(ancestors) (bridges above it, nearest first), C(iommu_group_type) (C(identity), C(DMA),
      C(DMA-FQ) or null), C(acs_redirect_bridges) (bridges with ACS request/completion redirect enabled; null when
      unknown) and C(acs_reason) (why unknown).
  returned: always
  type: dict
iommu:
  description: IOMMU and ACS kernel parameters from C(/proc/cmdline) (C(tokens), C(passthrough), C(disabled), C(forced_on), C(acs_override)).
  returned: always
  type: dict
kernel_module:
  description: C(open) (true for the open kernel module, false for the proprietary one, null unknown), C(version), C(source).
  returned: always
  type: dict
pci_devices:
  description: NVIDIA display controllers in sysfs (C(bus_id), C(device_id) such as C(10de:2b85)), also when nvidia-smi sees none.
  returned: always
  type: list
  elements: dict
kernel_log_line:
  description: The kernel-log line that named the failure (see O(kernel_log)), or null.
  returned: always
  type: str
problems:
  description: Non-fatal problems while reading (for example C(nvidia-smi topo -m) failing); also emitted as warnings.
  returned: always
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.blackwell.sglang.plugins.module_utils import _bounded
from ansible_collections.blackwell.sglang.plugins.module_utils._gpu import NvidiaSmiError, collect


def main():
    module = AnsibleModule(
        argument_spec=dict(
            nvidia_smi=dict(type="path"),
            lspci=dict(type="path"),
            topology=dict(type="bool", default=True),
            pcie=dict(type="bool", default=True),
            kernel_log=dict(type="bool", default=True),
            probe_timeout=dict(type="float", default=60.0),
        ),
        supports_check_mode=True,
    )
    nvidia_smi = module.params["nvidia_smi"] or module.get_bin_path("nvidia-smi")
    if module.params["nvidia_smi"] and not module.get_bin_path(nvidia_smi):
        nvidia_smi = None
    lspci = module.params["lspci"] or module.get_bin_path("lspci")

    if module.params["probe_timeout"] <= 0:
        module.fail_json(msg="probe_timeout must be > 0 seconds, got %s" % module.params["probe_timeout"])

    def run(argv):
        # bounded: a wedged GPU is exactly when nvidia-smi blocks
        return _bounded.run(argv, module.params["probe_timeout"], env_update={"LC_ALL": "C"})

    journalctl = module.get_bin_path("journalctl") if module.params["kernel_log"] else None

    def kernel_log():
        # a log: bytes that are not UTF-8 are replaced (the controller refuses a result that is not UTF-8)
        rc, out, _err = module.run_command([journalctl, "-k", "-b", "-o", "cat", "--no-pager", "-n", "5000"],
                                           environ_update={"LC_ALL": "C"}, errors="replace")
        return out.splitlines() if rc == 0 else []

    try:
        facts = collect(run, nvidia_smi, lspci=lspci, topology=module.params["topology"], pcie=module.params["pcie"],
                        kernel_log=kernel_log if journalctl else None)
    except NvidiaSmiError as exc:
        module.fail_json(msg=exc.message, error=exc.kind, nvidia_smi=nvidia_smi)
    if facts["nvidia_smi"] is None and module.params["nvidia_smi"]:
        facts["reason"] = "nvidia-smi %s not found or not executable" % module.params["nvidia_smi"]
    facts["problems"] = facts.pop("warnings", [])
    for problem in facts["problems"]:
        module.warn(problem)
    module.exit_json(changed=False, **facts)


if __name__ == "__main__":
    main()
