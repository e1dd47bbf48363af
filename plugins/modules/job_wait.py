#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang contributors
# Apache-2.0 (see LICENSE)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: job_wait
short_description: Wait for a detached job in one flat, bounded loop, printing progress from its log
version_added: "0.1.0"
description:
  - "Polls an C(async) job started with C(poll: 0) (through C(ansible.builtin.async_status)) every O(poll_interval)
    seconds until it finished or O(timeout) seconds passed, and prints the latest progress line of O(log) every
    O(progress_interval) seconds (ninja's C([N/M]) lines by default)."
  - Replaces waits that included themselves once per round (ansible-core nests includes and raised
    C(RecursionError) a little above 240 rounds). The loop lives in C(plugins/module_utils/_async_wait.py).
  - An action plugin; runs on the controller and executes C(async_status) and C(tail) on the host.
author:
  - blackwell.sglang maintainers (@blackwell-sglang)
options:
  jid:
    description: The job id (C(ansible_job_id) of the async task).
    type: str
    required: true
  log:
    description: The job's log file on the host, tailed once per progress round.
    type: path
  timeout:
    description: Seconds to wait at most; a job still running then is reported with RV(timed_out).
    type: float
    required: true
  poll_interval:
    description: Seconds between two status polls.
    type: float
    default: 10
  progress_interval:
    description: Seconds between two progress lines.
    type: float
    default: 60
  progress_regex:
    description: Lines of the log that count as progress (the last match is printed; else the last line).
    type: str
    default: '.*\[[0-9]+/[0-9]+\]'
  tail_lines:
    description: How many log lines to read per progress round.
    type: int
    default: 60
  label:
    description: What is waited for, in the progress lines.
    type: str
    default: job
  final_tail_lines:
    description:
      - After the wait, read the last this many lines of O(log) into RV(log_tail), whatever the job's outcome, so
        that a caller classifying a failure needs no second read. V(0) reads nothing.
    type: int
    default: 0
attributes:
  check_mode:
    description: Can run in check_mode and return changed status prediction without modifying target.
    support: none
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in check_mode), when in diff mode.
    support: none
  platform:
    description: Target OS/families that can be operated against.
    support: full
    platforms: posix
"""

EXAMPLES = r"""
- name: Wait for the build
  blackwell.sglang.job_wait:
    jid: "{{ build_job.ansible_job_id }}"
    log: /var/log/build.log
    timeout: 14400
    poll_interval: 30
    progress_interval: 300
  register: build_wait
"""

RETURN = r"""
finished:
  description: Whether the job ended (successfully or not, see RV(status)).
  returned: always
  type: bool
timed_out:
  description: The job was still running after O(timeout).
  returned: always
  type: bool
status:
  description: The last C(async_status) result (C(rc), C(stdout), ...).
  returned: always
  type: dict
polls:
  description: Status polls made.
  returned: always
  type: int
rounds:
  description: Progress rounds reported.
  returned: always
  type: int
elapsed:
  description: Seconds waited.
  returned: always
  type: float
progress:
  description: The last progress line, or null.
  returned: always
  type: str
log_tail:
  description: The last O(final_tail_lines) lines of O(log) after the wait (empty when O(final_tail_lines) is V(0)).
  returned: always
  type: str
"""

from ansible.module_utils.basic import AnsibleModule


def main():
    module = AnsibleModule(argument_spec=dict(
        jid=dict(type="str", required=True),
        log=dict(type="path"),
        timeout=dict(type="float", required=True),
        poll_interval=dict(type="float", default=10),
        progress_interval=dict(type="float", default=60),
        progress_regex=dict(type="str", default=r".*\[[0-9]+/[0-9]+\]"),
        tail_lines=dict(type="int", default=60),
        label=dict(type="str", default="job"),
        final_tail_lines=dict(type="int", default=0),
    ), supports_check_mode=False)
    module.fail_json(msg="blackwell.sglang.job_wait is an action plugin; it cannot run as a module")


if __name__ == "__main__":
    main()
