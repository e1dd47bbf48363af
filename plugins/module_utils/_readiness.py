# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang contributors
# Apache-2.0 (see LICENSE)
"""Progress-aware readiness wait for the SGLang service (pure Python, stdlib only; clock and I/O injected).

Rules and where they come from (``shared/domain/field-reports.md``):

* B22: a large checkpoint takes many minutes to load (163 shards > 9.5 min), so a fixed budget either kills a
  healthy start or waits forever on a hung one. The waiter keeps going while the journal shows progress: the
  ``Loading safetensors checkpoint shards: N/M`` counter advancing, or a new start-up phase line (weights done,
  KV cache allocated, CUDA-graph capture, JIT compile, NCCL init). It fails when nothing advanced for
  ``stall_timeout`` seconds, or when the hard ``max_wait`` cap is reached.
* B23: ``/health`` runs a one-token generation and can take about a second; a sub-second client timeout never
  sees it ready, and a single 503 under load is not death. Each request therefore has a timeout of at least
  :data:`MIN_REQUEST_TIMEOUT` seconds and the server counts as ready after ``successes`` consecutive HTTP 200s;
  any other answer resets the count.
* A unit that is ``failed``/``inactive`` (or restarting after a crash) stops the wait at once; the journal is
  classified (:mod:`_journal`) so the caller can print the cause and the last lines.
* B28: a stall right after NCCL reported ``Init COMPLETE`` with TP > 1 is the PCIe P2P hang (``nccl_p2p_hang``).
* A health URL whose host name does not resolve, or whose TLS handshake fails, :data:`PERMANENT_AFTER` times in a
  row ends the wait as ``unreachable`` (cause ``health_url_unreachable``): waiting does not fix the URL. A refused
  connection or a timeout is what a starting server gives, and is waited out.

All times are seconds.
"""

from __future__ import annotations

import re

from ansible_collections.blackwell.sglang.plugins.module_utils import _journal

MIN_REQUEST_TIMEOUT = 5.0
# Request failures that a starting server does not cure (the name does not resolve, TLS fails): after this many
# in a row the wait ends as ``unreachable`` instead of running into the stall timeout.
PERMANENT_FAILURES = ("dns", "tls")
PERMANENT_AFTER = 3

# Start-up phase lines of SGLang (0.5.x) that show the server is still making progress after the shards.
PHASE_PATTERNS = [
    re.compile(p) for p in (
        r"Load weight begin", r"Load weight end", r"KV Cache is allocated", r"Memory pool end",
        r"Capture cuda graph begin", r"Capture cuda graph end", r"Capture cuda graph bs", r"Capturing batches",
        r"NCCL INFO .*Init COMPLETE", r"Init torch distributed", r"Compiling|JIT|jit compile|Building extension",
        r"Uvicorn running on", r"Application startup complete", r"max_total_num_tokens=",
        r"The server is fired up and ready to roll",
    )
]


class ReadinessConfigError(ValueError):
    """Invalid waiter parameters."""


def validate_params(request_timeout, successes, interval, stall_timeout, max_wait):
    """Check waiter parameters; raises :class:`ReadinessConfigError` naming the parameter."""
    if request_timeout < MIN_REQUEST_TIMEOUT:
        raise ReadinessConfigError("request_timeout must be >= %.0f s (/health runs a generation, B23); got %s"
                                   % (MIN_REQUEST_TIMEOUT, request_timeout))
    if successes < 1:
        raise ReadinessConfigError("successes must be >= 1; got %s" % successes)
    if interval <= 0:
        raise ReadinessConfigError("interval must be > 0; got %s" % interval)
    if stall_timeout <= interval:
        raise ReadinessConfigError("stall_timeout (%s) must be longer than interval (%s)" % (stall_timeout, interval))
    if max_wait < stall_timeout:
        raise ReadinessConfigError("max_wait (%s) must be >= stall_timeout (%s)" % (max_wait, stall_timeout))


def validate_url(url):
    """Check a health URL: ``http``/``https``, a host that is an address or a name, an optional port 1-65535, no
    user info, no whitespace. Raises :class:`ReadinessConfigError` naming ``url`` and the value."""
    from urllib.parse import urlsplit
    from ansible_collections.blackwell.sglang.plugins.module_utils import _inputs
    text = url if isinstance(url, str) else ""
    problem = None
    try:
        parts = urlsplit(text)
        host = parts.hostname or ""
        port = parts.port
    except ValueError as exc:
        parts, host, port, problem = None, "", None, str(exc)
    if problem is None:
        if any(c.isspace() or ord(c) < 32 for c in text):
            problem = "contains whitespace or a control character"
        elif parts.scheme not in ("http", "https"):
            problem = "scheme must be http or https"
        elif parts.username is not None or parts.password is not None:
            problem = "must not carry user info"
        elif not _inputs.is_host(host):
            problem = "host is not an IP address or a host name"
        elif port is not None and not 1 <= port <= 65535:
            problem = "port outside 1-65535"
    if problem:
        raise ReadinessConfigError("url %r is not a health URL: %s" % (url, problem))


def wait_ready(http_get, read_journal, unit_state, clock, sleep, request_timeout=10.0, successes=3,
               interval=5.0, stall_timeout=600.0, max_wait=14400.0, tail_lines=40, tp_size=1, start_grace=30.0,
               classify_context=None):
    """Wait until the server answers ``successes`` consecutive health checks, or fail with a classified cause.

    :param http_get: ``f(timeout) -> (status_or_None, error_text)``; status None means no HTTP answer, and then
        the error text starts with the failure's kind (``refused: ...``, ``dns: ...``, :mod:`_net`).
    :param read_journal: ``f() -> list[str]``: journal lines *new since the previous call* for this start.
    :param unit_state: ``f() -> (active_state, sub_state)`` from systemd (e.g. ``("active", "running")``).
    :param clock: ``f() -> float`` monotonic seconds.
    :param sleep: ``f(seconds)``.
    :param start_grace: seconds during which ``inactive`` is read as "the queued start job has not run yet"
        (the role starts the unit with ``--no-block``); ``failed`` and ``auto-restart`` always end the wait.
    :param classify_context: optional dict ``argv`` (the server's argv) and ``compute_capability``, passed to
        :func:`_journal.classify` (N05/N06/N18 depend on them).
    :returns: dict ``ready`` (bool), ``elapsed``, ``polls``, ``consecutive_ok``, ``progress``
        (``{"done", "total"}`` of the shard bar or None), ``last_progress_at`` (elapsed s), ``phase`` (last phase
        line), ``reason`` (``ready``, ``unit_failed``, ``stalled``, ``max_wait``, ``unreachable``), ``cause`` (the
        :func:`_journal.classify` dict, or None when ready), ``last_lines`` (up to ``tail_lines`` journal lines).
    """
    validate_params(request_timeout, successes, interval, stall_timeout, max_wait)
    context = dict(classify_context or {})
    argv = context.pop("argv", None)

    def classify(journal_lines):
        return _journal.classify(journal_lines, argv=argv, context=context)

    start = clock()
    last_progress = start
    lines = []
    progress = None
    phase = None
    seen_phases = set()
    ok = 0
    best_ok = 0
    polls = 0
    last_http = None
    answers = {}
    permanent = 0

    def result(ready, reason, cause=None):
        now = clock()
        return {
            "ready": ready,
            "reason": reason,
            "elapsed": round(now - start, 3),
            "polls": polls,
            "consecutive_ok": ok,
            "progress": {"done": progress[0], "total": progress[1]} if progress else None,
            "last_progress_at": round(last_progress - start, 3),
            "phase": phase,
            "last_http": last_http,
            "health_answers": dict(answers),
            "cause": cause,
            "last_lines": lines[-tail_lines:] if tail_lines else [],
        }

    while True:
        new = _journal.split_lines(read_journal() or [])
        if new:
            lines.extend(new)
            del lines[:-max(tail_lines, 2000)]
            now_progress = _journal.shard_progress(new)
            if now_progress is not None and now_progress != progress:
                if progress is None or now_progress[0] > progress[0] or now_progress[1] != progress[1]:
                    last_progress = clock()
                progress = now_progress
            for line in new:
                for pattern in PHASE_PATTERNS:
                    if pattern.search(line):
                        key = pattern.pattern
                        phase = line.strip()
                        if key not in seen_phases or key.startswith("Capture cuda graph bs"):
                            seen_phases.add(key)
                            last_progress = clock()
        active, sub = unit_state()
        not_started_yet = active == "inactive" and clock() - start < start_grace
        if active == "failed" or sub in ("auto-restart", "failed") or (
                (active == "inactive" or sub == "dead") and not not_started_yet):
            cause = classify(lines)
            cause["unit_state"] = "%s/%s" % (active, sub)
            return result(False, "unit_failed", cause)

        polls += 1
        status, error = http_get(request_timeout)
        last_http = status if status is not None else error
        label = str(status) if status is not None else (str(error or "no answer").split(":", 1)[0])
        answers[label] = answers.get(label, 0) + 1
        permanent = permanent + 1 if status is None and label in PERMANENT_FAILURES else 0
        if permanent >= PERMANENT_AFTER:
            return result(False, "unreachable", {
                "cause": "health_url_unreachable", "line": None, "matches": ["health_url_unreachable"],
                "summary": "the health URL cannot be reached (%s), %d times in a row" % (error, permanent),
                "remedy": "fix the URL (the service's host and port settings) or the host's DNS/TLS setup; the "
                          "server itself may be running"})
        if status == 200:
            ok += 1
            # A longer run of 200s than ever before is progress; a /health flapping 200/503 is not, or the stall
            # timer would restart forever (at most successes - 1 resets from here).
            if ok > best_ok:
                best_ok = ok
                last_progress = clock()
            if ok >= successes:
                return result(True, "ready")
        else:
            ok = 0

        now = clock()
        if now - start >= max_wait:
            cause = classify(lines)
            return result(False, "max_wait", cause)
        if now - last_progress >= stall_timeout:
            cause = classify(lines)
            if cause["cause"] in ("unknown", "busy_not_dead") and tp_size > 1 and _journal.nccl_init_complete(lines):
                cause = {"cause": "nccl_p2p_hang", "line": None, "matches": ["nccl_p2p_hang"] + cause["matches"],
                         "summary": "no progress after NCCL 'Init COMPLETE' with TP > 1: the first all-reduce "
                                    "hangs (PCIe ACS/IOMMU routing P2P, B28)",
                         "remedy": "set NCCL_P2P_DISABLE=1 (sglang_stack_service_env) or fix ACS/IOMMU in BIOS/kernel; "
                                   "the GPUs may need a reset or reboot"}
            return result(False, "stalled", cause)
        sleep(interval)
