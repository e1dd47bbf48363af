#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang contributors
# Apache-2.0 (see LICENSE)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: apt_packages
short_description: Install the Debian packages a role needs, asking dpkg first (one quick call on a converged host)
version_added: "0.1.0"
description:
  - "Asks C(dpkg-query) which of O(name) are not installed. Only when one is missing does it look for apt's package
    lists and run C(ansible.builtin.apt) (C(state: present), C(update_cache)) on the whole list: with C(cache_valid_time: 0)
    when there are no package lists yet (a fresh image) or O(refresh) is set, else O(cache_valid_time)."
  - A version pin (C(name=1.2)) or a name dpkg does not know counts as missing, so apt decides.
  - "In check mode the dpkg question is still asked; a host without package lists is reported as changed (what would
    be refreshed and installed) instead of asking apt, which does not refresh in check mode and would know no package."
  - When apt fails, the message names the calling role (O(role)) and the packages.
  - The one apt step of the collection's roles. An action plugin; runs on the controller and executes C(dpkg-query),
    C(find) and C(ansible.builtin.apt) on the host.
author:
  - blackwell.sglang maintainers (@blackwell-sglang)
options:
  name:
    description: The packages (apt's C(name) syntax). An empty list does nothing.
    type: list
    elements: str
    required: true
  role:
    description: Who asks, in the messages; the role of the task when omitted.
    type: str
  refresh:
    description: Refresh apt's package lists before installing even when they exist (a package source was just added).
    type: bool
    default: false
  cache_valid_time:
    description: Seconds apt's lists may be old when they exist and O(refresh) is not set.
    type: int
    default: 3600
  install_recommends:
    description: C(ansible.builtin.apt)'s C(install_recommends); apt's own default when omitted.
    type: bool
  check_only:
    description: Only ask dpkg and return RV(missing); install nothing.
    type: bool
    default: false
extends_documentation_fragment:
  - ansible.builtin.action_common_attributes
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
  platform:
    platforms: debian
"""

EXAMPLES = r"""
- name: Install the packages the checkout needs
  blackwell.sglang.apt_packages:
    name: [git, ca-certificates]

- name: Install dcgm-exporter from the package source added just before
  blackwell.sglang.apt_packages:
    name: datacenter-gpu-manager-exporter
    refresh: "{{ dcgm_repo is changed }}"
"""

RETURN = r"""
missing:
  description: The packages dpkg did not report as installed (before this task installed them).
  returned: always
  type: list
  elements: str
lists_found:
  description: Whether apt's package lists existed; null when nothing was missing (they were not looked at).
  returned: always
  type: bool
cache_updated:
  description: Whether apt refreshed its package lists.
  returned: always
  type: bool
"""

from ansible.module_utils.basic import AnsibleModule


def main():
    module = AnsibleModule(argument_spec=dict(
        name=dict(type="list", elements="str", required=True),
        role=dict(type="str"),
        refresh=dict(type="bool", default=False),
        cache_valid_time=dict(type="int", default=3600),
        install_recommends=dict(type="bool"),
        check_only=dict(type="bool", default=False),
    ), supports_check_mode=True)
    module.fail_json(msg="blackwell.sglang.apt_packages is an action plugin; it cannot run as a module")


if __name__ == "__main__":
    main()
