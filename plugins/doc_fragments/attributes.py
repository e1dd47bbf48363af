# -*- coding: utf-8 -*-
# Apache-2.0 (see LICENSE)
"""Shared ``attributes`` documentation for the collection's modules."""

from __future__ import annotations


class ModuleDocFragment(object):

    # Modules that only read the host (facts, probes, parser dumps).
    READ_ONLY = r"""
attributes:
  check_mode:
    support: full
    description: Read-only; runs unchanged in check mode and never reports a change.
  diff_mode:
    support: none
    description: Nothing is changed, so there is no diff.
"""
