# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang contributors
# Apache-2.0 (see LICENSE)
"""A flat, bounded wait for a detached (``async``/``poll: 0``) job, printing progress.

An ``include_tasks`` that includes itself once per progress round cannot wait long: ansible-core nests every
include, and after a few hundred rounds (fewer than the default sgl-kernel build timeout has) it raises
``RecursionError`` in the controller. :func:`wait` is one ``while`` loop instead: it polls the job every
``poll_interval`` seconds, reports a progress line every ``progress_interval`` seconds and stops when the job
finished or ``timeout`` seconds passed. All times are seconds; clock, sleep and I/O are injected.
"""

from __future__ import annotations

import math
import re


class WaitConfigError(ValueError):
    """Invalid wait parameters (the message names the parameter and the value)."""


def validate(timeout, poll_interval, progress_interval):
    for name, value in (("timeout", timeout), ("poll_interval", poll_interval), ("progress_interval", progress_interval)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0 or math.isinf(value):
            raise WaitConfigError("%s must be a finite number of seconds > 0, got %r" % (name, value))


def latest_progress(lines, pattern=r".*\[[0-9]+/[0-9]+\]"):
    """The last line matching ``pattern`` (ninja's ``[N/M]``), else the last non-empty line, else None."""
    # tqdm rewrites its bar with carriage returns inside one line: the last segment is the newest
    lines = [seg for line in (lines or []) for seg in str(line).split("\r") if seg.strip()]
    regex = re.compile(pattern) if pattern else None
    matching = [line for line in lines if regex and regex.match(line)]
    if matching:
        return matching[-1].strip()
    return lines[-1].strip() if lines else None


def wait(poll, clock, sleep, timeout, poll_interval, progress_interval, tail=None, emit=None):
    """Wait for a job.

    :param poll: ``f() -> dict``: the job status (``finished`` truthy when done), e.g. async_status' result.
    :param clock: ``f() -> float`` monotonic seconds. ``sleep``: ``f(seconds)``.
    :param tail: ``f() -> list[str]`` the end of the job's log, read once per progress round (optional).
    :param emit: ``f(elapsed_s, finished, line)`` called once per progress round and at the end (optional).
    :returns: dict ``finished`` (bool), ``timed_out`` (bool), ``elapsed``, ``polls``, ``rounds`` (progress rounds),
        ``status`` (the last poll result), ``progress`` (the last progress line or None).
    :raises WaitConfigError: on a non-positive or non-numeric time.
    """
    validate(timeout, poll_interval, progress_interval)
    start = clock()
    next_report = start + progress_interval
    polls = rounds = 0
    status = {}
    progress = None
    # bounded twice over: by the clock, and by a poll count that a frozen clock cannot stretch
    max_polls = int(timeout / poll_interval) + 2
    while True:
        status = poll() or {}
        polls += 1
        finished = bool(status.get("finished"))
        now = clock()
        timed_out = not finished and (now - start >= timeout or polls >= max_polls)
        if finished or timed_out or now >= next_report:
            rounds += 1
            if tail is not None:
                progress = latest_progress(tail()) or progress
            if emit is not None:
                emit(round(now - start, 1), finished, progress)
            next_report = now + progress_interval
        if finished or timed_out:
            return {"finished": finished, "timed_out": timed_out, "elapsed": round(now - start, 3), "polls": polls,
                    "rounds": rounds, "status": status, "progress": progress}
        sleep(poll_interval)
