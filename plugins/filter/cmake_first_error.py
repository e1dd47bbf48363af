# -*- coding: utf-8 -*-
# Apache-2.0 (see LICENSE)
"""Filter ``blackwell.sglang.cmake_first_error``: CMake's first error block from a configure log, with the cause."""

from __future__ import annotations

DOCUMENTATION = r"""
name: cmake_first_error
short_description: CMake's first error from a configure log, with its classified cause and remedy
version_added: 0.1.0
description:
  - Returns the lines of the first C(CMake Error ...) message in the text (at most 14), then C(cause:) and
    C(remedy:) lines when the block (or the log) matches a known cause (missing libnuma, a CUDA library missing
    under C(CUDA_HOME), a FetchContent source missing offline, and the build-log causes of
    C(blackwell.sglang.sgl_kernel_build_failure)).
  - An empty list when the log holds no CMake error.
options:
  _input:
    description: The configure log text.
    type: str
    required: true
"""

EXAMPLES = r"""
- name: Explain a failed configure
  ansible.builtin.fail:
    msg: "{{ configure_log | blackwell.sglang.cmake_first_error }}"
"""

RETURN = r"""
_value:
  description: Lines; the first starts with C(first error:).
  type: list
  elements: str
"""

from ansible_collections.blackwell.sglang.plugins.module_utils._sgl_kernel_buildlog import first_cmake_error


def cmake_first_error(text):
    return first_cmake_error(text or "")


class FilterModule(object):
    def filters(self):
        return {"cmake_first_error": cmake_first_error}
