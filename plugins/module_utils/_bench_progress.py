# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang contributors
# Apache-2.0 (see LICENSE)
"""Progress and time estimates for a running SGLang serving benchmark level (pure Python, controller side).

The benchmark draws a tqdm bar on stderr (``sglang/benchmark/serving.py``: ``tqdm(total=len(input_requests))``);
redirected to a log file it becomes a stream of ``\\r``-separated updates such as
``" 47%|####7     | 240/512 [01:23<01:34,  2.87it/s]"``. :func:`parse_progress` reads the newest one.
"""

from __future__ import annotations

import math
import re

# "240/512 [01:23<01:34," ; tqdm prints "?" for the remaining time until it has a rate, and H:MM:SS past an hour
# (ASCII digits, at most 18: tqdm prints nothing longer, and int() refuses numbers of thousands of digits)
_BAR_RE = re.compile(r"([0-9]{1,18})/([0-9]{1,18}) \[((?:[0-9]{1,9}:)?[0-9]{1,9}:[0-9]{1,9})<"
                     r"((?:[0-9]{1,9}:)?[0-9]{1,9}:[0-9]{1,9}|\?)")


def _seconds(text):
    if not text or text == "?":
        return None
    total = 0
    for part in text.split(":"):
        total = total * 60 + int(part)
    return total


def parse_progress(text):
    """Newest tqdm state in a benchmark log tail.

    :returns: dict ``done``, ``total`` (requests), ``elapsed_s``, ``remaining_s`` (None while tqdm has no rate),
        ``percent``; or None when no bar was printed yet (tokenizer loading, ready check, warmup).
    """
    matches = _BAR_RE.findall(text or "")
    if not matches:
        return None
    done, total, elapsed, remaining = matches[-1]
    done, total = int(done), int(total)
    return {"done": done, "total": total, "elapsed_s": _seconds(elapsed), "remaining_s": _seconds(remaining),
            "percent": round(100.0 * done / total, 1) if total else None}


# What the benchmark prints before its bar (sglang/benchmark/serving.py), newest marker wins.
_PHASES = (
    ("Waiting up to", "ready check: waiting for the server"),
    ("Server ready in", "server ready, loading the tokenizer"),
    ("is not ready. Exiting", "server not ready: giving up"),
    ("Namespace(", "loading the tokenizer and building prompts"),
    ("Starting warmup", "warmup requests"),
    ("Warmup completed", "warmup done, starting the run"),
    ("Serving Benchmark Result", "run done, writing the result"),
)


def describe_phase(text):
    """Short description of what the benchmark is doing, from its log, for the time before/after the bar.

    Python import time (torch, sglang) comes first and prints nothing: that is "loading Python modules".
    """
    text = text or ""
    best, where = "loading Python modules", -1
    for marker, phase in _PHASES:
        pos = text.rfind(marker)
        if pos > where:
            best, where = phase, pos
    return best


def _positive(value):
    """A finite number > 0 (not a boolean): a baseline point's concurrency or tok/s; anything else is left out."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0 \
        and int(value) > 0


def expected_output_tps(concurrency, points):
    """Expected output tok/s at ``concurrency`` from baseline points (list of {max_concurrency, output_throughput}).

    Linear in log2(concurrency) between points, flat beyond the ends; None without points. Used only for the ETA
    shown before the benchmark's own progress bar appears.
    """
    pts = sorted((int(p["max_concurrency"]), float(p["output_throughput"])) for p in points or []
                 if isinstance(p, dict) and _positive(p.get("max_concurrency")) and _positive(p.get("output_throughput")))
    if not pts:
        return None
    conc = max(1, int(concurrency))
    if conc <= pts[0][0]:
        return pts[0][1]
    for (c0, t0), (c1, t1) in zip(pts, pts[1:]):
        if c0 <= conc <= c1:
            frac = (math.log2(conc) - math.log2(c0)) / (math.log2(c1) - math.log2(c0)) if c1 > c0 else 0.0
            return t0 + frac * (t1 - t0)
    return pts[-1][1]


def estimate_level_seconds(num_prompts, output_len, concurrency, points, default_tps=None):
    """Rough duration of one level in seconds: prompts x output tokens / expected output tok/s.

    Prefill time is ignored (a few percent at 1024/1024 on the baseline host). Returns None when no rate is known.
    """
    rate = expected_output_tps(concurrency, points) or default_tps
    if not _positive(rate):
        return None
    return int(math.ceil(int(num_prompts) * int(output_len) / float(rate)))
