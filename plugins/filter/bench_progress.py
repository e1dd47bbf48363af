# -*- coding: utf-8 -*-
# Apache-2.0 (see LICENSE)
"""Filters ``blackwell.sglang.bench_progress`` and ``blackwell.sglang.bench_eta`` for the benchmark role."""

from __future__ import annotations

DOCUMENTATION = r"""
name: bench_progress
short_description: Read the newest progress of SGLang's serving benchmark from its log
version_added: 0.1.0
description:
  - Parses the tqdm bar the benchmark writes to stderr (C(240/512 [01:23<01:34, 2.87it/s])) and returns the newest
    state, or null before the first bar (tokenizer loading, ready check, warmup).
  - The companion filter C(blackwell.sglang.bench_phase) names what the benchmark is doing before and after the
    bar (loading Python modules, ready check, tokenizer, warmup, writing the result).
  - The companion filter C(blackwell.sglang.bench_eta) estimates a level's duration in seconds as
    C(num_prompts * output_len / expected output tok/s), the rate interpolated (log2 of concurrency) between baseline
    points; its options are C(num_prompts), C(output_len) and C(points) (the baseline C(points) list), with the
    concurrency as input.
options:
  _input:
    description: Tail of the benchmark log.
    type: str
    required: true
"""

EXAMPLES = r"""
- name: Show progress
  ansible.builtin.debug:
    msg: "{{ (log_tail.stdout | blackwell.sglang.bench_progress) or 'starting' }}"

- name: Estimate a level (seconds)
  ansible.builtin.debug:
    msg: "{{ 64 | blackwell.sglang.bench_eta(256, 1024, baseline.points) }}"
"""

RETURN = r"""
_value:
  description: C(done), C(total) (requests), C(elapsed_s), C(remaining_s) (null until tqdm has a rate), C(percent);
    null when no bar was printed yet.
  type: dict
"""

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
