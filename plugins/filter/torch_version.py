# -*- coding: utf-8 -*-
# Apache-2.0 (see LICENSE)
"""Filter ``blackwell.sglang.torch_version``: describe a torch (or any PEP 440) version string."""

from __future__ import annotations

DOCUMENTATION = r"""
name: torch_version
short_description: Parse a torch / PEP 440 version string (nightly, stable, CPU and source builds)
version_added: 0.1.0
description:
  - Parses with C(packaging.version) (field report B20), never string order. C(2.12.0.dev20260307+cu130) has
    release C([2, 12, 0]), dev C(20260307), local C(cu130) and CUDA C(13.0).
  - Also used for any other distribution version that needs a PEP 440 comparison (FlashInfer, torchvision).
options:
  _input:
    description: The version string, for example C(2.12.0.dev20260307+cu130) or C(2.13.0+cpu).
    type: str
    required: true
"""

EXAMPLES = r"""
- name: Read the CUDA tag of the pinned torch
  ansible.builtin.debug:
    msg: "{{ ('2.12.0.dev20260307+cu130' | blackwell.sglang.torch_version).cuda }}"  # "13.0"

- name: Compare an installed version with a pin (PEP 440 normalised)
  ansible.builtin.assert:
    that: (installed | blackwell.sglang.torch_version).version == (pin | blackwell.sglang.torch_version).version
"""

RETURN = r"""
_value:
  description:
    - C(version) (normalised), C(public) (without the local C(+...) part), C(release) (list of ints),
      C(major_minor) (C("2.12")), C(dev) (int or null), C(local) (str or null), C(cuda) (C("13.0") from a
      C(cuNNN) local tag, else null), C(is_nightly) (bool), C(source_build) (bool, C(+git...) local tag).
  type: dict
"""

from ansible.errors import AnsibleFilterError
from ansible_collections.blackwell.sglang.plugins.module_utils._versions import (
    MissingPackaging,
    parse_torch_version,
)


def torch_version(text):
    if text is None:
        raise AnsibleFilterError("torch_version: no version given (None)")
    try:
        info = dict(parse_torch_version(text))
    except (ValueError, MissingPackaging) as exc:
        raise AnsibleFilterError("torch_version: %s" % exc)
    info["release"] = list(info["release"])
    info["public"] = info["version"].split("+", 1)[0]
    return info


class FilterModule(object):
    def filters(self):
        return {"torch_version": torch_version}
