#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang contributors
# Apache-2.0 (see LICENSE)
"""Module blackwell.sglang.gpu_health: thin wrapper around module_utils._gpu_health."""

from __future__ import annotations

DOCUMENTATION = r"""
module: gpu_health
short_description: GPU health verdict from NVRM Xid kernel-log lines and nvidia-smi state (read-only)
version_added: "0.1.0"
description:
  - "Reads the kernel log of the current boot (C(journalctl -k -b 0), else C(dmesg)) for C(NVRM: Xid) lines since a
    given time, in the driver's own format (see the notes), plus C(GPU has fallen off the bus) and
    C(RmInitAdapter failed!) lines."
  - Reads C(nvidia-smi --query-gpu) state per GPU (persistence mode, ECC volatile and aggregate counters, retired
    pages, remapped rows, clocks event (throttle) reasons, telemetry) and compares the GPU count with
    O(expected_gpu_count). Query fields the installed nvidia-smi does not know are dropped and listed.
  - Every command is bounded by O(timeout); an nvidia-smi that does not answer is killed and reported as the
    finding C(nvidia_smi_hang), never waited for.
  - Returns a verdict per GPU and for the host (C(healthy), C(degraded), C(unhealthy)) with the remedy of the most
    severe finding, for example Xid 79/119/154/8 -> reboot or power-cycle, uncorrectable ECC -> drain and replace.
    Xid kinds are named C(gpu_wedged_xid_<n>), C(gpu_ecc_xid_<n>), ... (field report N03).
  - No nvidia-smi and no expected GPUs is C(healthy) with C(gpu_count) 0 (a host without GPU).
author:
  - blackwell.sglang maintainers (@blackwell-sglang)
options:
  since:
    description:
      - Only kernel-log lines from this time on. An epoch (C(1764540000) or C(@1764540000)), ISO 8601
        (C(2026-11-30T22:00:00Z)), relative (C(-2h), C(-30m), C(-1d)) or C(boot) (the whole current boot).
      - The current boot only in any case; a reboot clears a wedge.
    type: str
    default: boot
  expected_gpu_count:
    description:
      - GPUs the host should have (for example the inventory's TP share). Fewer visible is C(gpus_missing).
      - Null does not check the count.
    type: int
  kernel_log_source:
    description:
      - Where to read the kernel log. C(auto) is the journal, else C(dmesg); C(file) reads O(kernel_log_path)
        (a recorded log); C(none) skips the kernel log.
    type: str
    choices: [auto, journal, dmesg, file, none]
    default: auto
  kernel_log_path:
    description:
      - Kernel-log text to read with O(kernel_log_source=file).
    type: path
  nvidia_smi:
    description:
      - Path of C(nvidia-smi). Default is the one found on C(PATH).
    type: path
  timeout:
    description:
      - Seconds each external command may run before it is killed and reported.
    type: int
    default: 20
  retired_pages_max:
    description:
      - Retired pages (single- plus double-bit) at which a GPU is unhealthy (60 on page-retirement GPUs, from
        NVIDIA's memory error guide).
    type: int
    default: 60
  policy_models:
    description:
      - >-
        GPU policy per GPU model, C({model, power_limit_w, application_clocks: {memory_mhz, graphics_mhz}}); the
        first entry whose C(model) (a regular expression) is found in the GPU's name applies.
      - When given (an empty list is persistence mode only), RV(policy_plan) says what the policy changes on each GPU.
    type: list
    elements: dict
extends_documentation_fragment:
  - blackwell.sglang.attributes.READ_ONLY
notes:
  - "An Xid line as the driver prints it: NVRM: Xid (PCI:0000:41:00): 79, pid=2291107, name=python3, GPU has fallen
    off the bus. Older drivers leave out the PCI: prefix; both are read."
  - Sources of the formats, the Xid table and the remedies are listed in C(plugins/module_utils/_gpu_health.py)
    and in C(docs/operations.md).
  - Run as root to read the kernel log; without it the verdict carries the finding C(kernel_log_unreadable).
seealso:
  - module: blackwell.sglang.gpu_facts
"""

EXAMPLES = r"""
- name: Health of this host's GPUs
  blackwell.sglang.gpu_health:
    expected_gpu_count: 8
  register: health

- name: Stop on an unhealthy host
  ansible.builtin.assert:
    that: health.status != 'unhealthy'
    fail_msg: "{{ health.summary }} -- {{ health.remedy }}"

- name: What the GPU policy would change (persistence mode, a 450 W limit on RTX PRO 6000 boards)
  blackwell.sglang.gpu_health:
    kernel_log_source: none
    policy_models:
      - model: RTX PRO 6000
        power_limit_w: 450
  register: gpus

- name: Judge a recorded kernel log
  blackwell.sglang.gpu_health:
    kernel_log_source: file
    kernel_log_path: /tmp/kern.log
    since: "-2h"
"""

RETURN = r"""
status:
  description: C(healthy), C(degraded) (warnings, the host may serve) or C(unhealthy) (drain it).
  returned: always
  type: str
healthy:
  description: True when RV(status) is C(healthy).
  returned: always
  type: bool
reboot_required:
  description: True when an unhealthy finding needs a reboot or power-cycle (Xid 79/119/120/154/8, nvidia-smi hang).
  returned: always
  type: bool
drain:
  description: True when the host should be taken out of service (status unhealthy).
  returned: always
  type: bool
summary:
  description: One line naming the status and the first findings.
  returned: always
  type: str
report:
  description: Lines for a person, one per GPU (status and finding kinds), one per host finding, then the remedy.
  returned: always
  type: list
  elements: str
remedy:
  description: Remedy of the most severe finding; empty when healthy.
  returned: always
  type: str
gpu_count:
  description: GPUs nvidia-smi lists.
  returned: always
  type: int
expected_gpu_count:
  description: The O(expected_gpu_count) given (null when not checked).
  returned: always
  type: int
gpus:
  description:
    - Per GPU C(index), C(bus_id), C(name), C(uuid), C(status), C(findings) (list of C(kind), C(severity)
      info/warn/fail, C(message), C(remedy)) and C(state) (the parsed nvidia-smi fields; null where C([N/A])).
  returned: always
  type: list
  elements: dict
host_findings:
  description: Findings not tied to a visible GPU (nvidia-smi hang or failure, missing GPUs, Xids of a GPU gone).
  returned: always
  type: list
  elements: dict
xids:
  description: Xid events read (C(xid), C(bus_id), C(pid), C(process), C(message), C(time), C(kind), C(line), ...).
  returned: always
  type: list
  elements: dict
xid_counts:
  description: Xid number (as a string) to the number of lines seen.
  returned: always
  type: dict
kernel_log:
  description: How the kernel log was read (C(source), C(argv), C(rc), C(timed_out), C(error), C(since)).
  returned: always
  type: dict
policy_plan:
  description:
    - With O(policy_models), one entry per GPU C(index), C(name), C(model) (the matching entry or null),
      C(persistence) (bool, on now), C(power_limit_w) (wanted, or null), C(power_limit_now), C(set_power) (bool),
      C(clocks) (wanted C("<memory>,<graphics>") MHz, or null), C(clocks_now), C(set_clocks) (bool), C(changes)
      (the nvidia-smi arguments that set the power limit and the clocks that differ, C([{args, label}])). Power
      limits within 0.5 W are equal (nvidia-smi prints two decimals).
  returned: when O(policy_models) is given
  type: list
  elements: dict
table_row:
  description:
    - This host's row of the fleet table that C(playbooks/health.yml) prints, C([status, gpus, xids, detail]), that is
      GPUs as visible/expected, the Xids seen this boot (C(79,119x3); C(-) for none), the summary with the remedy.
  returned: always
  type: list
  elements: str
nvidia_smi:
  description: How nvidia-smi answered (C(ok), C(result), C(failure), C(unsupported_fields)); null without one.
  returned: always
  type: dict
"""

import re

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.blackwell.sglang.plugins.module_utils._gpu_health import collect, parse_since, policy_plan, table_row


def main():
    module = AnsibleModule(
        argument_spec=dict(
            since=dict(type="str", default="boot"),
            expected_gpu_count=dict(type="int"),
            kernel_log_source=dict(type="str", default="auto", choices=["auto", "journal", "dmesg", "file", "none"]),
            kernel_log_path=dict(type="path"),
            nvidia_smi=dict(type="path"),
            timeout=dict(type="int", default=20),
            retired_pages_max=dict(type="int", default=60),
            policy_models=dict(type="list", elements="dict"),
        ),
        required_if=[("kernel_log_source", "file", ["kernel_log_path"])],
        supports_check_mode=True,
    )
    params = module.params
    if params["timeout"] < 1:
        module.fail_json(msg="timeout must be at least 1 second, got %d" % params["timeout"])
    if params["expected_gpu_count"] is not None and params["expected_gpu_count"] < 0:
        module.fail_json(msg="expected_gpu_count must not be negative, got %d" % params["expected_gpu_count"])
    nvidia_smi = params["nvidia_smi"] or module.get_bin_path("nvidia-smi")
    if params["nvidia_smi"] and not module.get_bin_path(nvidia_smi):
        nvidia_smi = None
    try:
        parse_since(params["since"])
    except ValueError as exc:
        module.fail_json(msg="since: %s" % exc)
    try:
        verdict, _smi = collect(
            nvidia_smi,
            kernel_log_source=params["kernel_log_source"],
            since=params["since"],
            expected_gpu_count=params["expected_gpu_count"],
            timeout=params["timeout"],
            kernel_log_path=params["kernel_log_path"],
            journalctl=module.get_bin_path("journalctl"),
            dmesg=module.get_bin_path("dmesg"),
            retired_pages_max=params["retired_pages_max"],
        )
    except (OSError, ValueError) as exc:       # not `since` (checked above): say what failed, never blame it
        module.fail_json(msg="gpu_health could not assess the host: %s: %s" % (type(exc).__name__, exc))
    if params["policy_models"] is not None:
        try:
            verdict["policy_plan"] = policy_plan(verdict["gpus"], params["policy_models"])
        except (KeyError, TypeError, ValueError, re.error) as exc:
            module.fail_json(msg="policy_models: %s" % exc)
    verdict["table_row"] = table_row(verdict)
    module.exit_json(changed=False, **verdict)


if __name__ == "__main__":
    main()
