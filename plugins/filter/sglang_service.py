# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang contributors
# Apache-2.0 (see LICENSE)
"""Controller-side filters of the sglang_service role (rendering only; the rules live in module_utils)."""

from __future__ import annotations

import json
import re

from ansible.errors import AnsibleFilterError
from ansible.utils.display import Display

from ansible_collections.blackwell.sglang.plugins.module_utils import _server_flags
from ansible_collections.blackwell.sglang.plugins.module_utils import fp4_numerics

DOCUMENTATION_NOTE = """
sglang_service_args(settings, compute_capability, fp4_probe, fp4_backends) -> list   argv for launch_server, checked
systemd_exec_args(argv) -> str             argv quoted for a systemd Exec line (%% and $$ escaped, ${VAR} kept)
"""

_ENV_REF = re.compile(r"^\$\{[A-Za-z_][A-Za-z0-9_]*\}$")
_SAFE = re.compile(r"^[A-Za-z0-9_@%+=:,./-]+$")


def sglang_service_args(settings, compute_capability=None, fp4_probe=None, fp4_backends=None):
    """Render the launch_server argv and check it; every refusal is a filter error naming the flag.

    Speculative-decoding combinations reported to crash (N06) are shown as warnings (or fail with
    ``speculative_known_crash_action: fail``). With ``compute_capability`` the backend flags must pass its
    allow-list (_server_flags.check_backends). With ``fp4_probe`` (the sglang_stack_probe_result fact) a chosen
    ``fp4_backends`` value (``{fp4_gemm_backend, moe_runner_backend}``) that the probe found broken on this host is
    refused with the probe's evidence (fp4_numerics.pinned_flag_verdict), whether or not the flag is rendered."""
    try:
        argv = _server_flags.render_server_args(dict(settings))
        if compute_capability is not None:
            _server_flags.check_backends(list(argv), compute_capability or None)
    except (_server_flags.FlagError, ValueError, TypeError) as exc:
        raise AnsibleFilterError("sglang_service: %s" % exc)
    try:
        evidence = [fp4_numerics.pinned_flag_verdict(fp4_probe or {}, flag, value)
                    for flag, value in sorted((fp4_backends or {}).items())]
    except ValueError as exc:
        raise AnsibleFilterError("sglang_service: %s" % exc)
    evidence = [found for found in evidence if found]
    if evidence:
        raise AnsibleFilterError("sglang_service: %s -- evidence: %s" % (
            "; ".join(found["message"] for found in evidence), json.dumps(evidence, sort_keys=True)))
    for finding in _server_flags.spec_decode_findings(dict(settings)):
        Display().warning(finding["message"])
    return argv


def systemd_exec_args(argv, per_flag=False):
    """Quote tokens for an ``ExecStart=`` line.

    systemd splits on whitespace, honours double quotes and C-style escapes, expands ``%`` specifiers and
    ``$VAR``/``${VAR}`` (systemd.service(5) "Command lines"). A token that is exactly ``${NAME}`` stays an
    environment reference (the API key); everywhere else ``%`` -> ``%%`` and ``$`` -> ``$$`` so values are literal.
    With ``per_flag`` the result is a list of lines, one per flag with its values (for backslash continuations).
    """
    out = []
    for token in argv:
        token = str(token)
        if _ENV_REF.match(token):
            out.append(token)
            continue
        escaped = token.replace("%", "%%").replace("$", "$$")
        if _SAFE.match(escaped):
            out.append(escaped)
        else:
            out.append('"%s"' % escaped.replace("\\", "\\\\").replace('"', '\\"'))
    if not per_flag:
        return " ".join(out)
    lines = []
    for raw, quoted in zip([str(t) for t in argv], out):
        if raw.startswith("--") or not lines:
            lines.append(quoted)
        else:
            lines[-1] += " " + quoted
    return lines


class FilterModule(object):
    def filters(self):
        return {
            "sglang_service_args": sglang_service_args,
            "systemd_exec_args": systemd_exec_args,
        }
