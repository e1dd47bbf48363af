# -*- coding: utf-8 -*-
# Apache-2.0 (see LICENSE)
"""Filters ``blackwell.sglang.bench_progress``, ``bench_phase`` and ``bench_eta`` for the benchmark role (logic in module_utils)."""

from __future__ import annotations

# Documentation: bench_progress.yml, bench_phase.yml and bench_eta.yml next to this file (one per filter).

from ansible.errors import AnsibleFilterError
from ansible_collections.blackwell.sglang.plugins.module_utils._bench_progress import (
    describe_phase,
    estimate_level_seconds,
    parse_progress,
)


def bench_progress(text):
    return parse_progress(text if isinstance(text, str) else "")


def bench_phase(text):
    return describe_phase(text if isinstance(text, str) else "")


def bench_eta(concurrency, num_prompts, output_len, points=None, default_tps=None):
    try:
        return estimate_level_seconds(num_prompts, output_len, concurrency, points or [], default_tps)
    except (TypeError, ValueError) as exc:
        raise AnsibleFilterError("bench_eta: %s" % exc)


class FilterModule(object):
    def filters(self):
        return {"bench_progress": bench_progress, "bench_phase": bench_phase, "bench_eta": bench_eta}
