# -*- coding: utf-8 -*-
# Apache-2.0 (see LICENSE)
"""Filter ``blackwell.sglang.pip_failure_class``: name a pip/uv failure."""

from __future__ import annotations

DOCUMENTATION = r"""
name: pip_failure_class
short_description: Classify pip or uv output into one verdict name
version_added: 0.1.0
description:
  - Returns the first matching verdict of C(torch_replaced), C(resolver_cuda_major_conflict), C(resolver_conflict),
    C(no_matching_distribution), C(network_unreachable), C(build_failed), C(disk_full), else C(unknown)
    (field report B19).
  - A C(.devYYYYMMDD) pin the index no longer serves is C(nightly_pin_purged) (every listed nightly is newer, or
    every one older) or C(nightly_pin_missing) (listed dates on both sides) instead of C(no_matching_distribution)
    (field report N14, docs/field-reports.md).
options:
  _input:
    description: The combined stdout and stderr of the failed command.
    type: str
    required: true
  detail:
    description:
      - Return a dict C(verdict), C(requirement), C(pin_date), C(listed_dates), C(remedy) instead of the verdict name.
    type: bool
    default: false
"""

EXAMPLES = r"""
- name: Explain the failure
  ansible.builtin.fail:
    msg: "pip failed: {{ result.stderr | blackwell.sglang.pip_failure_class }}"
"""

RETURN = r"""
_value:
  description: The verdict name (a dict with O(detail)).
  type: raw
"""

from ansible_collections.blackwell.sglang.plugins.module_utils._sglang_deps import explain_pip_failure


def pip_failure_class(text, detail=False):
    result = explain_pip_failure(text if isinstance(text, str) else str(text or ""))
    return result if detail else result["verdict"]


class FilterModule(object):
    def filters(self):
        return {"pip_failure_class": pip_failure_class}
