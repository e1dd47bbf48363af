# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang contributors
# Apache-2.0 (see LICENSE)
"""Filters of the torch_nightly role: wheel file patterns of pins, and the message for a failed install."""

from __future__ import annotations

# Documentation: torch_nightly_wheel_patterns.yml and torch_nightly_failure_message.yml next to this file (one per
# filter, so that ansible-doc shows each filter its own).

import re

from ansible.errors import AnsibleFilterError

from ansible_collections.blackwell.sglang.plugins.module_utils._sglang_deps import explain_pip_failure

_PIN_RE = re.compile(r"^\s*([A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)\s*==\s*(\S+)\s*$")


def torch_nightly_wheel_patterns(pins):
    patterns = []
    for pin in pins or []:
        match = _PIN_RE.match(str(pin))
        if not match:
            raise AnsibleFilterError("torch_nightly_wheel_patterns: %r is not an exact name==version pin" % pin)
        patterns.append("%s-%s-*.whl" % (re.sub(r"[-_.]+", "_", match.group(1)), match.group(2)))
    return patterns


def torch_nightly_failure_message(text, pins, wheelhouse=""):
    """The error text for a failed torch install: verdict, the pins, and a remedy for the kinds we know."""
    info = explain_pip_failure(text if isinstance(text, str) else str(text or ""))
    verdict = info["verdict"]
    pins = ", ".join(str(p) for p in pins or [])
    where = "wheelhouse %s" % wheelhouse if wheelhouse else "the index"
    if verdict in ("nightly_pin_purged", "nightly_pin_missing"):
        listed = info["listed_dates"]
        span = "%s..%s" % (listed[0], listed[-1]) if listed else "none"
        return ("[%s] %s is not served by %s any more (pin date %s; nightlies listed: %s; see docs/field-reports.md "
                "N14). Remedy: %s." % (verdict, info["requirement"], where, info["pin_date"], span, info["remedy"]))
    lines = [line.strip() for line in str(text or "").splitlines() if line.strip()]
    tail = " | ".join(lines[-3:]) if lines else "no output"
    return "[%s] installing %s from %s failed: %s" % (verdict, pins, where, tail)


class FilterModule(object):
    def filters(self):
        return {"torch_nightly_wheel_patterns": torch_nightly_wheel_patterns,
                "torch_nightly_failure_message": torch_nightly_failure_message}
