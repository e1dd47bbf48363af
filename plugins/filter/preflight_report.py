# -*- coding: utf-8 -*-
# Apache-2.0 (see LICENSE)
"""Filter ``blackwell.sglang.preflight_report``: the failed preflight checks with remedies as one message."""

from __future__ import annotations

DOCUMENTATION = r"""
name: preflight_report
short_description: Render the failed preflight checks with their remedies as one message
version_added: 0.1.0
description:
  - "Takes C(preflight_checks) and returns a text block that starts with the count of failed checks and lists
    each failed check as C(- name: message) followed by C(remedy: ...). Used by the preflight role's final C(fail)."
options:
  _input:
    description: The list of checks (C(name), C(status), C(message), C(remedy)).
    type: list
    elements: dict
    required: true
"""

EXAMPLES = r"""
- name: Fail with every failed check
  ansible.builtin.fail:
    msg: "{{ preflight_checks | blackwell.sglang.preflight_report }}"
"""

RETURN = r"""
_value:
  description: The report text.
  type: str
"""

from ansible_collections.blackwell.sglang.plugins.module_utils._preflight import failure_report


def preflight_report(checks):
    return failure_report(checks)


class FilterModule(object):
    def filters(self):
        return {"preflight_report": preflight_report}
