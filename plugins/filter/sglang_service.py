# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang contributors
# Apache-2.0 (see LICENSE)
"""Controller-side filters of the sglang_service role (rendering only; the rules live in module_utils)."""

from __future__ import annotations

import re

from ansible.errors import AnsibleFilterError
from ansible.utils.display import Display

from ansible_collections.blackwell.sglang.plugins.module_utils import _multinode
from ansible_collections.blackwell.sglang.plugins.module_utils import _preflight
from ansible_collections.blackwell.sglang.plugins.module_utils import _server_flags
from ansible_collections.blackwell.sglang.plugins.module_utils import fp4_numerics

DOCUMENTATION_NOTE = """
sglang_service_args(settings) -> list      argv for launch_server (see _server_flags.render_server_args)
sglang_service_check_backends(argv, cc)    argv unchanged, or an error from the SM12x allow-list
sglang_service_env_warnings(env, cc) -> list   warnings about the unit environment (N01 TRITON_PTXAS_PATH)
systemd_exec_args(argv) -> str             argv quoted for a systemd Exec line (%% and $$ escaped, ${VAR} kept)
sglang_pinned_backend_evidence(probe, flag, value) -> dict|None   the probe's evidence against a pinned backend
nvidia_device_groups(proc_devices) -> list  char device groups named nvidia* in /proc/devices text
sglang_multinode(members, host, tp_size, ...) -> dict  --nnodes/--node-rank/--dist-init-addr of one member
"""

_ENV_REF = re.compile(r"^\$\{[A-Za-z_][A-Za-z0-9_]*\}$")
_SAFE = re.compile(r"^[A-Za-z0-9_@%+=:,./-]+$")


def sglang_service_args(settings):
    """Render the launch_server argv; FlagError becomes a filter error naming the flag.

    Speculative-decoding combinations reported to crash (N06) are shown as warnings (or fail with
    ``speculative_known_crash_action: fail``)."""
    try:
        argv = _server_flags.render_server_args(dict(settings))
    except (_server_flags.FlagError, ValueError, TypeError) as exc:
        raise AnsibleFilterError("sglang_service: %s" % exc)
    for finding in _server_flags.spec_decode_findings(dict(settings)):
        Display().warning(finding["message"])
    return argv


def sglang_service_env_warnings(env, cc):
    """Warnings for the rendered service environment (N01: TRITON_PTXAS_PATH on compute capability 12.x)."""
    warnings = _preflight.service_env_warnings(dict(env or {}), cc)
    for warning in warnings:
        Display().warning(warning)
    return warnings


def sglang_service_merge_args(computed, user):
    """Computed safety flags + the inventory's extra args: ``{"args", "overridden"}`` (_server_flags.merge_extra_args)."""
    try:
        return _server_flags.merge_extra_args(list(computed or []), list(user or []))
    except (_server_flags.FlagError, ValueError, TypeError) as exc:
        raise AnsibleFilterError("sglang_service_extra_args: %s" % exc)


def sglang_service_merge_env(computed, user):
    """Computed environment + the inventory's: ``{"env": merged, "overridden": [key whose user value differs]}``."""
    computed = dict(computed or {})
    user = dict(user or {})
    merged = dict(computed)
    merged.update(user)
    return {"env": merged, "overridden": sorted(k for k in user if k in computed and str(user[k]) != str(computed[k]))}


def sglang_service_check_backends(argv, cc):
    """Apply the compute-capability allow-list to ``argv`` on the controller (before anything changes)."""
    try:
        _server_flags.check_backends(list(argv), cc or None)
    except (_server_flags.FlagError, ValueError) as exc:
        raise AnsibleFilterError("sglang_service: %s" % exc)
    return list(argv)


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


def sglang_pinned_backend_evidence(probe_result, flag, value):
    """Evidence from the FP4 probe against a pinned backend value, or None (fp4_numerics.pinned_flag_verdict)."""
    try:
        return fp4_numerics.pinned_flag_verdict(probe_result or {}, flag, value)
    except ValueError as exc:
        raise AnsibleFilterError("sglang_service: %s" % exc)


def nvidia_device_groups(proc_devices, prefix="nvidia"):
    """Names of NVIDIA character-device groups in ``/proc/devices`` text (for ``DeviceAllow=char-<name>``).

    Drivers name major 195 ``nvidia-frontend`` (older) or ``nvidia`` (current); ``nvidia-uvm``, ``nvidia-caps``,
    ``nvidia-nvlink``, ``nvidia-caps-imex-channels`` appear as their modules load (ansible-practice 6.1).
    With ``prefix="infiniband"`` the RDMA groups instead: ``infiniband_verbs`` (``/dev/infiniband/uverbs*``) and
    ``infiniband_mad`` (``umad*``/``issm*``), which NCCL's IB/RoCE transport opens on a multi-node server.
    """
    groups = []
    in_char = False
    for line in (proc_devices or "").splitlines():
        if line.startswith("Character devices"):
            in_char = True
            continue
        if line.startswith("Block devices"):
            in_char = False
            continue
        parts = line.split()
        if in_char and len(parts) == 2 and parts[1].startswith(prefix) and parts[1] not in groups:
            groups.append(parts[1])
    return groups


def sglang_multinode(members, host, tp_size, ranks=None, addresses=None, batch=None, release_ids=None,
                     dist_init_addr="", dist_init_port=50000):
    """One member's multi-node settings (module_utils/_multinode.plan_multinode); errors name the member."""
    try:
        return _multinode.plan_multinode(list(members or []), host, tp_size, ranks=ranks, addresses=addresses,
                                         batch=None if batch is None else list(batch), release_ids=release_ids,
                                         dist_init_addr=dist_init_addr, dist_init_port=dist_init_port)
    except (_multinode.MultinodeError, ValueError, TypeError) as exc:
        raise AnsibleFilterError("sglang_service multi-node: %s" % exc)


class FilterModule(object):
    def filters(self):
        return {
            "sglang_service_args": sglang_service_args,
            "sglang_service_check_backends": sglang_service_check_backends,
            "sglang_service_env_warnings": sglang_service_env_warnings,
            "sglang_service_merge_args": sglang_service_merge_args,
            "sglang_service_merge_env": sglang_service_merge_env,
            "systemd_exec_args": systemd_exec_args,
            "sglang_pinned_backend_evidence": sglang_pinned_backend_evidence,
            "nvidia_device_groups": nvidia_device_groups,
            "sglang_multinode": sglang_multinode,
        }
