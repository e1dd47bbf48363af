#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang contributors
# Apache-2.0 (see LICENSE)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: unknown_variables
short_description: Find host variables with a role's prefix that no role of the collection defines (misspellings)
version_added: "0.1.0"
description:
  - "Ansible ignores a variable nobody reads, so a misspelt one (C(sglang_servcie_tp_size: 8)) leaves the default in
    place without a word. This compares the host's variables with every name the collection defines (the roles'
    argument specs, defaults and vars, and what their tasks and playbooks register, set or read) and reports each one
    that carries a role's prefix, or a misspelling of one, and is not among them, with the nearest real name."
  - A name the collection no longer reads (C(blackwell_stack), now C(sglang_stack_preset)) is reported with its
    successor.
  - Private names (C(__<role>_x)) are never reported. The preflight runs it first (C(preflight_unknown_variables)).
  - An action plugin; runs on the controller only and reads the collection's own files
    (C(plugins/plugin_utils/_variable_names.py)).
author:
  - blackwell.sglang maintainers (@blackwell-sglang)
options:
  mode:
    description: C(warn) - report them as warnings; C(fail) - fail the task naming them.
    type: str
    choices: [warn, fail]
    default: warn
  names:
    description: The variable names to check; default every variable of the host (inventory, extra vars, facts).
    type: list
    elements: str
  ignore:
    description: Names never reported (variables of one's own that happen to carry a role's prefix).
    type: list
    elements: str
    default: []
attributes:
  check_mode:
    description: Can run in check_mode and return changed status prediction without modifying target.
    support: full
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in check_mode), when in diff mode.
    support: none
  platform:
    description: Target OS/families that can be operated against.
    support: full
    platforms: posix
"""

EXAMPLES = r"""
- name: Warn about misspelt variables before anything else runs
  blackwell.sglang.unknown_variables:
    mode: warn

- name: Refuse them
  blackwell.sglang.unknown_variables:
    mode: fail
    ignore: [sglang_fleet_notes]
"""

RETURN = r"""
unknown:
  description: One entry per reported variable, sorted by name.
  returned: always
  type: list
  elements: dict
  contains:
    name:
      description: The variable as set.
      type: str
    nearest:
      description: The closest name a role of the collection reads, or null.
      type: str
    message:
      description: What is wrong, with the suggestion.
      type: str
  sample: [{name: sglang_servcie_tp_size, nearest: sglang_stack_service_tp_size,
            message: "sglang_servcie_tp_size is not a variable of any role ...: did you mean sglang_stack_service_tp_size?"}]
checked:
  description: How many variable names were checked.
  returned: always
  type: int
"""

from ansible.module_utils.basic import AnsibleModule


def main():
    module = AnsibleModule(argument_spec=dict(
        mode=dict(type="str", default="warn", choices=["warn", "fail"]),
        names=dict(type="list", elements="str"),
        ignore=dict(type="list", elements="str", default=[]),
    ), supports_check_mode=True)
    module.fail_json(msg="blackwell.sglang.unknown_variables is an action plugin; it cannot run as a module")


if __name__ == "__main__":
    main()
