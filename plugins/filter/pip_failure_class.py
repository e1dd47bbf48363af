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
options:
  _input:
    description: The combined stdout and stderr of the failed command.
    type: str
    required: true
"""

EXAMPLES = r"""
- name: Explain the failure
  ansible.builtin.fail:
    msg: "pip failed: {{ result.stderr | blackwell.sglang.pip_failure_class }}"
"""

RETURN = r"""
_value:
  description: The verdict name.
  type: str
"""

from ansible_collections.blackwell.sglang.plugins.module_utils._sglang_deps import classify_pip_failure


def pip_failure_class(text):
    return classify_pip_failure(text if isinstance(text, str) else str(text or ""))


class FilterModule(object):
    def filters(self):
        return {"pip_failure_class": pip_failure_class}
