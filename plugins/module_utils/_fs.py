# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang contributors
# Apache-2.0 (see LICENSE)
"""Small read-only file helpers shared by the fact collectors (``_gpu``, ``_host``, ``_toolchain``)."""

from __future__ import annotations


def read_text(path):
    """The text of the file at ``path``, or None when it is missing or unreadable (procfs, sysfs, headers)."""
    try:
        with open(path) as handle:
            return handle.read()
    except (IOError, OSError):
        return None
