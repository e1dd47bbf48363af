# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang contributors
# Apache-2.0 (see LICENSE)
"""Run an external probe with a time limit (a wedged GPU is exactly when ``nvidia-smi`` blocks).

:func:`run` has ``AnsibleModule.run_command``'s result shape ``(rc, stdout, stderr)``, no shell. A probe still
running after ``timeout`` seconds is killed with its whole process group and reported as rc :data:`TIMEOUT_RC`
with stderr starting ``TIMEOUT_MARKER`` so callers can classify it as a finding instead of hanging the play.
"""

from __future__ import annotations

import os
import signal
import subprocess

TIMEOUT_RC = 124            # what coreutils timeout(1) returns
TIMEOUT_MARKER = "timed out after"


def run(argv, timeout, env_update=None):
    """Run ``argv`` with at most ``timeout`` seconds; ``(rc, stdout, stderr)`` as text."""
    if not timeout or timeout <= 0:
        raise ValueError("timeout must be > 0 seconds, got %r" % (timeout,))
    env = dict(os.environ)
    env.update(env_update or {})
    try:
        proc = subprocess.Popen([str(a) for a in argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                stdin=subprocess.DEVNULL, env=env, start_new_session=True)
    except OSError as exc:
        return 127, "", "%s: %s" % (argv[0], exc.strerror)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass
        out, err = proc.communicate()
        # the program and its first short arguments only: a probe script passed with -c would drown the message
        shown = " ".join([str(argv[0])] + [str(a) for a in argv[1:4] if len(str(a)) <= 40])
        return TIMEOUT_RC, out.decode("utf-8", "replace"), "%s %s s: %s" % (TIMEOUT_MARKER, timeout, shown)
    return proc.returncode, out.decode("utf-8", "replace"), err.decode("utf-8", "replace")


def timed_out(rc, stderr):
    return rc == TIMEOUT_RC and (stderr or "").startswith(TIMEOUT_MARKER)
