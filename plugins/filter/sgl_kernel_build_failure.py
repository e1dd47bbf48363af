# -*- coding: utf-8 -*-
# Apache-2.0 (see LICENSE)
"""Filter ``blackwell.sglang.sgl_kernel_build_failure``: classify a failed sgl-kernel build or import log."""

from __future__ import annotations

DOCUMENTATION = r"""
name: sgl_kernel_build_failure
short_description: Classify an sgl-kernel build or import failure from its log (field reports B01-B05, B07)
version_added: 0.1.0
description:
  - Returns the first known cause found in the text, most specific first; CMake policy unknown (B01), CMake 4 and an
    old C(cmake_minimum_required) (B02), CCCL headers missing for host units (B03), nvcc without sm_120a (B04),
    out of memory (B05), torch ABI mismatch or CUDA 12 libraries (B07).
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
"""

RETURN = r"""
_value:
  description: C(cause), C(field_report), C(message), C(remedy) and the matching C(line).
  type: dict
"""

from ansible_collections.blackwell.sglang.plugins.module_utils._sgl_kernel_buildlog import classify


def sgl_kernel_build_failure(text, rc=None, timed_out=False):
    return classify(text, rc=None if rc is None else int(rc), timed_out=bool(timed_out))


class FilterModule(object):
    def filters(self):
        return {"sgl_kernel_build_failure": sgl_kernel_build_failure}
