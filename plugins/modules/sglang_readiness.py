#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang contributors
# Apache-2.0 (see LICENSE)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: sglang_readiness
short_description: Wait for an SGLang systemd service to become ready, following its start-up progress
version_added: "0.1.0"
description:
  - Polls the server's C(/health) endpoint (each request with a timeout of at least 5 seconds) until it answers
    HTTP 200 O(successes) times in a row; any other answer resets the count (field report B23).
  - Reads the unit's journal for the current start (its systemd InvocationID) while waiting and keeps waiting as
    long as something advances - the C(Loading safetensors checkpoint shards N/M) counter or a new start-up phase
    line (weights loaded, KV cache allocated, CUDA-graph capture, JIT) - and fails when nothing advanced for
    O(stall_timeout) seconds or after O(max_wait) (field report B22).
  - Stops at once when the unit fails or is being restarted after a crash.
  - On failure returns the cause classified from the journal (init-time vs runtime OOM, port in use, warm-up
    through a proxy, no kernel image, FA3 on a non-Hopper GPU, NCCL shared memory, P2P hang, ABI mismatch, ...)
    and the last journal lines.
  - A hang just after NCCL's C(Init COMPLETE) is blamed on an NCCL config file (C(/etc/nccl.conf), the unit
    user's C(~/.nccl.conf), C(NCCL_CONF_FILE)) when one puts keys into effect beside the unit's environment; the
    module reads the unit's C(User), C(Environment) and C(EnvironmentFiles) to find them (field report S03).
  - The logic lives in C(plugins/module_utils/_readiness.py) and C(plugins/module_utils/_journal.py).
author:
  - blackwell.sglang maintainers (@blackwell-sglang)
options:
  unit:
    description: systemd unit name, e.g. C(sglang.service).
    type: str
    required: true
  url:
    description: Health URL. C(/health) is exempt from the API key in SGLang.
    type: str
    default: http://127.0.0.1:30000/health
  request_timeout:
    description: Seconds per health request; at least 5.
    type: float
    default: 10
  successes:
    description: Consecutive HTTP 200 answers needed.
    type: int
    default: 3
  interval:
    description: Seconds between polls.
    type: float
    default: 5
  stall_timeout:
    description: Seconds without any start-up progress after which the wait fails.
    type: float
    default: 900
  max_wait:
    description: Hard cap in seconds for the whole wait.
    type: float
    default: 14400
  tail_lines:
    description: Journal lines returned in RV(last_lines).
    type: int
    default: 40
  tp_size:
    description: Tensor-parallel size; with more than one GPU a stall after NCCL init is reported as a P2P hang.
    type: int
    default: 1
  start_grace:
    description:
      - Seconds during which an C(inactive) unit counts as "start job still queued" (starts are issued with
        C(--no-block)). C(failed) and C(auto-restart) end the wait at once.
    type: float
    default: 30
  server_args:
    description:
      - The server's argv (the rendered C(launch_server) flags). Lets the classifier tell a speculative-decoding
        crash from a plain illegal memory access, and an inherited draft quantization from a wrong
        C(--quantization) (field reports N05, N06; docs/field-reports.md).
    type: list
    elements: str
    default: []
  compute_capability:
    description: Compute capability of the serving GPUs (C("12.1") marks a GB10, whose kernel-log OOM is N18).
    type: str
    default: ""
  kernel_log:
    description:
      - Also follow the NVIDIA driver lines (C(NVRM)) of the kernel log since the wait began, so that a wedged GPU
        (C(gpu_wedged_xid_<n>) with C(reboot_required) in the cause) or GB10 memory exhaustion is the reported cause (N03, N18).
    type: bool
    default: true
  mask:
    description: "Secret values (the API key) masked in every journal line and message returned; key-looking patterns
      (C(api_key='...'), C(--api-key X), C(Bearer X)) are masked in any case."
    type: list
    elements: str
    default: []
attributes:
  check_mode:
    description: Can run in check mode and return changed status prediction without modifying target.
    support: full
    details: In check mode one health request is made and its answer returned; nothing waits.
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in check mode), when in diff mode.
    support: none
"""

EXAMPLES = r"""
- name: Wait for SGLang
  blackwell.sglang.sglang_readiness:
    unit: sglang.service
    url: http://127.0.0.1:30000/health
    stall_timeout: 900
    tp_size: 8
  register: sglang_ready
"""

RETURN = r"""
ready:
  description: Whether the server became ready.
  returned: always
  type: bool
reason:
  description:
    - C(ready), C(unit_failed), C(stalled), C(max_wait), or C(unreachable) (the health URL's host name did not
      resolve, or its TLS failed, on 3 polls in a row; the message then names the URL, what failed and the
      variable that sets it).
  returned: always
  type: str
elapsed:
  description: Seconds waited.
  returned: always
  type: float
progress:
  description: Latest shard-loading progress C({done, total}) or null.
  returned: always
  type: dict
phase:
  description: Last start-up phase line seen.
  returned: always
  type: str
cause:
  description: Classified cause (C(cause), C(summary), C(remedy), C(line), C(matches)) when not ready.
  returned: when not ready
  type: dict
last_lines:
  description: The last journal lines of this start.
  returned: always
  type: list
  elements: str
health_answers:
  description: 'How often /health answered what, e.g. C({"200": 3, "503": 7, "URLError": 2}); kept in the failure message.'
  returned: when the wait ran
  type: dict
invocation_id:
  description: systemd InvocationID of the start that was followed.
  returned: always
  type: str
"""

import time

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.urls import open_url
from ansible.module_utils.six.moves.urllib.error import HTTPError

from ansible_collections.blackwell.sglang.plugins.module_utils import _inputs
from ansible_collections.blackwell.sglang.plugins.module_utils import _nccl_conf
from ansible_collections.blackwell.sglang.plugins.module_utils import _net
from ansible_collections.blackwell.sglang.plugins.module_utils import _readiness


class Journal(object):
    """Incremental reader of one unit invocation's journal (``journalctl --after-cursor``)."""

    def __init__(self, module, unit, invocation_id):
        self.module = module
        self.unit = unit
        self.invocation_id = invocation_id
        self.cursor = None
        self.journalctl = module.get_bin_path("journalctl")

    def __call__(self):
        if not self.journalctl:
            return []
        # The role starts/restarts with --no-block: follow the newest invocation once systemd has begun it.
        current = systemctl_show(self.module, self.unit, ["InvocationID"]).get("InvocationID") or None
        if current and current != self.invocation_id:
            self.invocation_id = current
            self.cursor = None
        cmd = [self.journalctl, "--no-pager", "-o", "cat", "--show-cursor"]
        if self.invocation_id:
            cmd.append("_SYSTEMD_INVOCATION_ID=%s" % self.invocation_id)
        else:
            cmd.extend(["-u", self.unit, "-n", "500"])
        if self.cursor:
            cmd.append("--after-cursor=%s" % self.cursor)
        lines, self.cursor = read_journal(self.module, cmd, self.cursor)
        return [line for line in lines if line.strip() and line.strip() != "-- No entries --"]


class KernelLog(object):
    """NVIDIA driver lines (``NVRM``) of the kernel log since the wait began (``journalctl -k``): a GPU wedged by an
    Xid 119/154/8/79 or GB10's unified memory running out shows there, not in the unit's journal (N03, N18)."""

    def __init__(self, module, since):
        self.module = module
        self.since = since
        self.cursor = None
        self.journalctl = module.get_bin_path("journalctl")

    def __call__(self):
        if not self.journalctl:
            return []
        cmd = [self.journalctl, "-k", "--no-pager", "-o", "cat", "--show-cursor"]
        cmd.append("--after-cursor=%s" % self.cursor if self.cursor else "--since=@%d" % int(self.since))
        lines, self.cursor = read_journal(self.module, cmd, self.cursor)
        return [line for line in lines if "NVRM" in line]


def read_journal(module, cmd, cursor):
    """Run a ``journalctl ... --show-cursor`` command; returns ``(lines, cursor)``.

    ``lines`` are the output lines without the ``-- cursor: `` line (none when journalctl failed); ``cursor`` is the
    one it printed, else the ``cursor`` given (the next call continues from there).
    """
    # a log: bytes that are not UTF-8 (a model's output, a driver message) are replaced, never fatal
    rc, out, _err = module.run_command(cmd, check_rc=False, errors="replace")
    if rc != 0:
        return [], cursor
    lines = []
    for line in out.splitlines():
        if line.startswith("-- cursor: "):
            cursor = line[len("-- cursor: "):].strip()
        else:
            lines.append(line)
    return lines, cursor


def systemctl_show(module, unit, props):
    systemctl = module.get_bin_path("systemctl", required=True)
    rc, out, err = module.run_command([systemctl, "show", unit] + ["--property=%s" % p for p in props],
                                      check_rc=False)
    values = {}
    for line in out.splitlines():
        if "=" in line:
            key, value = line.split("=", 1)
            values[key] = value
    return values


def unit_nccl_conf(module, unit):
    """The NCCL config files that put keys into effect for the unit's process (its account and environment as
    systemd has them), ``{path: [KEY, ...]}``: the classifier names them for a hang after Init COMPLETE (S03)."""
    systemctl = module.get_bin_path("systemctl")
    if not systemctl:
        return {}
    rc, out, _err = module.run_command([systemctl, "show", unit, "--property=User", "--property=Environment",
                                        "--property=EnvironmentFiles"], check_rc=False)
    return _nccl_conf.unit_context(out) if rc == 0 else {}


URL_VAR = "url (the role builds it from sglang_stack_service_host and sglang_stack_service_port)"
TIMEOUT_VAR = "request_timeout (sglang_service_readiness_request_timeout)"


def make_http_get(url):
    """``http_get(timeout) -> (status or None, error text)`` for :func:`_readiness.wait_ready`; the error text of a
    request without an HTTP answer starts with its :func:`_net.label` (``refused: ...``, ``dns: ...``) and the last
    exception is kept in ``http_get.last_error`` for the failure message."""
    def http_get(timeout):
        try:
            resp = open_url(url, method="GET", timeout=timeout, validate_certs=True, use_proxy=False)
            try:
                return resp.getcode(), None
            finally:
                resp.close()
        except HTTPError as exc:
            return exc.code, "HTTP %s" % exc.code
        except Exception as exc:  # refused, timeout, reset while the server starts; DNS and TLS do not heal
            http_get.last_error = exc
            kind, _detail = _net.describe(exc)
            return None, "%s: %s" % (kind, _net.reason_text(kind, _net.describe(exc)[1], url, timeout))
    http_get.last_error = None
    return http_get


def main():
    module = AnsibleModule(
        argument_spec=dict(
            unit=dict(type="str", required=True),
            url=dict(type="str", default="http://127.0.0.1:30000/health"),
            request_timeout=dict(type="float", default=10.0),
            successes=dict(type="int", default=3),
            interval=dict(type="float", default=5.0),
            stall_timeout=dict(type="float", default=900.0),
            max_wait=dict(type="float", default=14400.0),
            tail_lines=dict(type="int", default=40),
            tp_size=dict(type="int", default=1),
            start_grace=dict(type="float", default=30.0),
            server_args=dict(type="list", elements="str", default=[], no_log=False),
            compute_capability=dict(type="str", default=""),
            kernel_log=dict(type="bool", default=True),
            mask=dict(type="list", elements="str", default=[], no_log=True),
        ),
        supports_check_mode=True,
    )
    p = module.params
    try:
        _readiness.validate_params(p["request_timeout"], p["successes"], p["interval"], p["stall_timeout"],
                                   p["max_wait"])
        _readiness.validate_url(p["url"])
        for name in ("tail_lines", "start_grace"):
            if p[name] < 0:
                raise _readiness.ReadinessConfigError("%s must be >= 0; got %s" % (name, p[name]))
        if p["tp_size"] < 1:
            raise _readiness.ReadinessConfigError("tp_size must be >= 1; got %s" % p["tp_size"])
    except _readiness.ReadinessConfigError as exc:
        module.fail_json(msg=str(exc))
    http_get = make_http_get(p["url"])
    invocation_id = systemctl_show(module, p["unit"], ["InvocationID"]).get("InvocationID") or None
    if module.check_mode:
        status, error = http_get(p["request_timeout"])
        module.exit_json(changed=False, ready=status == 200, reason="check_mode", elapsed=0.0, progress=None,
                         phase=None, last_lines=[], invocation_id=invocation_id, last_http=status or error)

    unit_journal = Journal(module, p["unit"], invocation_id)
    kernel = KernelLog(module, time.time() - 5) if p["kernel_log"] else (lambda: [])

    def journal():
        return unit_journal() + kernel()

    def unit_state():
        values = systemctl_show(module, p["unit"], ["ActiveState", "SubState"])
        return values.get("ActiveState", "unknown"), values.get("SubState", "unknown")

    result = _readiness.wait_ready(
        http_get=http_get, read_journal=journal, unit_state=unit_state,
        clock=time.monotonic, sleep=time.sleep, request_timeout=p["request_timeout"], successes=p["successes"],
        interval=p["interval"], stall_timeout=p["stall_timeout"], max_wait=p["max_wait"],
        tail_lines=p["tail_lines"], tp_size=p["tp_size"], start_grace=p["start_grace"],
        classify_context={"argv": p["server_args"] or None, "compute_capability": p["compute_capability"],
                          "nccl_conf_files": unit_nccl_conf(module, p["unit"])})
    result["invocation_id"] = unit_journal.invocation_id
    secrets = [s for s in p["mask"] if s]
    result["last_lines"] = [_inputs.mask(line, secrets) for line in result.get("last_lines") or []]
    result["phase"] = _inputs.mask(result.get("phase"), secrets)
    if result["ready"]:
        result.pop("cause", None)
        module.exit_json(changed=False, **result)
    cause = result["cause"] or {}
    if cause.get("line"):
        cause["line"] = _inputs.mask(cause["line"], secrets)
    answers = ", ".join("%s x%d" % (k, v) for k, v in sorted(result.get("health_answers", {}).items())) or "none"
    msg = "%s is not ready (%s after %.0f s): %s [%s] - %s. %s answered: last %s; all: %s" % (
        p["unit"], result["reason"], result["elapsed"], cause.get("summary"), cause.get("cause"), cause.get("remedy"),
        _net.show_url(p["url"]), result.get("last_http"), answers)
    if not isinstance(result.get("last_http"), int) and http_get.last_error is not None:
        msg += ". Last request: " + _net.message("readiness check of %s" % p["unit"], p["url"], exc=http_get.last_error,
                                                 variable=URL_VAR, timeout=p["request_timeout"],
                                                 timeout_var=TIMEOUT_VAR)[0]
    elif isinstance(result.get("last_http"), int) and result["last_http"] >= 400:
        msg += ". Last request: " + _net.message("readiness check of %s" % p["unit"], p["url"],
                                                 status=result["last_http"], variable=URL_VAR,
                                                 credential="none: SGLang's /health needs no key")[0]
    module.fail_json(msg=_inputs.mask(msg, secrets), changed=False, **result)


if __name__ == "__main__":
    main()
