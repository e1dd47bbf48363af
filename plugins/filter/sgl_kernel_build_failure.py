# -*- coding: utf-8 -*-
# Apache-2.0 (see LICENSE)
"""Filter ``blackwell.sglang.sgl_kernel_build_failure``: classify a failed sgl-kernel configure, build or import log."""

from __future__ import annotations

DOCUMENTATION = r"""
name: sgl_kernel_build_failure
short_description: Classify an sgl-kernel configure, build or import failure from its log (field reports B01-B05, B07)
version_added: 0.1.0
description:
  - Returns the first known cause found in the text, most specific first; CMake policy unknown (B01), CMake 4 and an
    old C(cmake_minimum_required) (B02), CCCL headers missing for host units (B03), nvcc without sm_120a (B04),
    out of memory (B05), torch ABI mismatch or CUDA 12 libraries (B07).
  - For a CMake configure log, C(cmake_error) holds CMake's first error block (at most 14 lines) followed by its
    classified cause and remedy (a missing libnuma, a CUDA library missing under C(CUDA_HOME), a FetchContent
    source missing offline, or one of the causes above).
options:
  _input:
    description: The log text (or its tail).
    type: str
    required: true
  rc:
    description: Exit code of the build, when known (137 means SIGKILL, classified as B05).
    type: int
  timed_out:
    description: The build ran past its time limit.
    type: bool
    default: false
"""

EXAMPLES = r"""
- name: Explain a failed build
  ansible.builtin.debug:
    msg: "{{ log_text | blackwell.sglang.sgl_kernel_build_failure(rc=2) }}"

- name: Explain a failed configure
  ansible.builtin.fail:
    msg: "{{ (configure_log | blackwell.sglang.sgl_kernel_build_failure).cmake_error }}"
"""

RETURN = r"""
_value:
  description:
    - C(cause), C(field_report), C(message), C(remedy) and the matching C(line).
    - C(cmake_error) (list of str), CMake's first error with C(cause:) and C(remedy:) lines; the first line starts with
      C(first error:). Empty when the log holds no CMake error.
  type: dict
"""

from ansible_collections.blackwell.sglang.plugins.module_utils._sgl_kernel_buildlog import classify, first_cmake_error


def sgl_kernel_build_failure(text, rc=None, timed_out=False):
    result = classify(text, rc=None if rc is None else int(rc), timed_out=bool(timed_out))
    result["cmake_error"] = first_cmake_error(text or "")
    return result


class FilterModule(object):
    def filters(self):
        return {"sgl_kernel_build_failure": sgl_kernel_build_failure}
