# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang contributors
# Apache-2.0 (see LICENSE)
"""The NCCL settings of a multi-node server over RoCE, checked against the host (field reports S02, S04).

Two DGX Sparks (GB10) serve one model over ConnectX-7: one QSFP cable appears as two PCIe x4 RDMA devices
(``rocep1s0f0`` and ``roceP2p1s0f0``), and both belong in ``NCCL_IB_HCA`` (S04: with one, ``all_gather_perf`` reached
about 3 GB/s). The RoCEv2 GID index differs per host and moves on interface events, and an empty
``NCCL_IB_GID_INDEX`` (a compose file's ``NCCL_IB_GID_INDEX=``) reads as 0, the fe80 link-local GID (S02): current
NCCL picks the GID itself, so the value is best left out.

:func:`check_fabric` returns one preflight check (``name``, ``status``, ``message``, ``remedy``). Pure Python.
"""

from __future__ import annotations

import re

NAME = "nccl_fabric"


def _check(status, message, remedy=""):
    return {"name": NAME, "status": status, "message": message, "remedy": remedy}


def _entries(value):
    """``NCCL_IB_HCA`` / ``NCCL_SOCKET_IFNAME`` syntax: comma list, a leading ``^`` excludes, ``=`` means exact,
    ``:<port>`` after an HCA name. :returns: ``(exclude, [(name, exact)])``."""
    text = str(value or "").strip()
    exclude = text.startswith("^")
    text = text.lstrip("^")
    exact = text.startswith("=")
    text = text.lstrip("=")
    names = [part.split(":", 1)[0].strip() for part in text.split(",") if part.strip()]
    return exclude, [(n, exact) for n in names]


def _matches(name, exact, present):
    return any(p == name if exact else p.startswith(name) for p in present)


def is_roce(device):
    """``rocep1s0f0`` / ``roceP2p1s0f0`` (the predictable names of RoCE devices, one per PCIe function)."""
    return re.match(r"^roce[pP]", str(device or "")) is not None


def check_fabric(env, nnodes=1, unified_memory=False, rdma_devices=None, net_interfaces=None):
    """Check the service's NCCL settings for a multi-node server.

    :param env: the NCCL settings the service gets (``sglang_service_nccl_env``), name -> value.
    :param nnodes: nodes of the server (1: single node; only the GID rule applies).
    :param unified_memory: the host's profile is unified memory (GB10: the one-cable, two-device rule applies).
    :param rdma_devices: names under ``/sys/class/infiniband`` (None: not read; the existence rules are skipped).
    :param net_interfaces: names under ``/sys/class/net`` (None: not read).
    :returns: a check dict; ``fail`` on ``nccl_gid_index_empty``, ``nccl_socket_ifname_missing``,
        ``nccl_ib_hca_missing``, ``nccl_ib_hca_one_port``; ``warn`` on a fixed ``NCCL_IB_GID_INDEX`` or an unset
        ``NCCL_SOCKET_IFNAME`` / ``NCCL_IB_HCA`` on a multi-node GB10 server.
    """
    env = dict((str(k), "" if v is None else str(v)) for k, v in (env or {}).items())
    fails, warns, notes = [], [], []
    remedies = []
    if "NCCL_IB_GID_INDEX" in env:
        if env["NCCL_IB_GID_INDEX"].strip() == "":
            fails.append("nccl_gid_index_empty: NCCL_IB_GID_INDEX is set but empty, which NCCL reads as 0, the fe80 "
                         "link-local GID: the TP handshake hangs or fails with 'unhandled system error'")
            remedies.append("remove NCCL_IB_GID_INDEX from sglang_service_nccl_env (current NCCL picks the "
                            "RoCEv2 GID itself); never render it empty")
        else:
            warns.append("nccl_gid_index_fixed: NCCL_IB_GID_INDEX=%s is fixed, but the RoCEv2 GID index differs per "
                         "host and moves on interface events (3 -> 4 was seen within 30 min)" % env["NCCL_IB_GID_INDEX"])
            remedies.append("leave NCCL_IB_GID_INDEX out and let NCCL pick the GID")
    if int(nnodes or 1) > 1:
        ifname = env.get("NCCL_SOCKET_IFNAME", "")
        if not ifname.strip():
            warns.append("NCCL_SOCKET_IFNAME is not set for a %d-node server: NCCL may bootstrap over another "
                         "interface (docker0, Wi-Fi)" % int(nnodes))
            remedies.append("set NCCL_SOCKET_IFNAME in sglang_service_nccl_env to the interface of the fast link")
        elif net_interfaces is not None:
            exclude, names = _entries(ifname)
            missing = [n for n, exact in names if not _matches(n, exact, net_interfaces)]
            if missing and not exclude:
                fails.append("nccl_socket_ifname_missing: NCCL_SOCKET_IFNAME=%s names %s, which this host does not "
                             "have (interfaces: %s)" % (ifname, ", ".join(missing), ", ".join(sorted(net_interfaces))))
                remedies.append("set NCCL_SOCKET_IFNAME per host (host_vars) to an interface it has")
        hca = env.get("NCCL_IB_HCA", "")
        roce_here = sorted(d for d in (rdma_devices or []) if is_roce(d))
        if hca.strip():
            exclude, names = _entries(hca)
            if rdma_devices is not None and not exclude:
                missing = [n for n, exact in names if not _matches(n, exact, rdma_devices)]
                if missing:
                    fails.append("nccl_ib_hca_missing: NCCL_IB_HCA=%s names %s, which /sys/class/infiniband does not "
                                 "list (devices: %s)" % (hca, ", ".join(missing),
                                                         ", ".join(sorted(rdma_devices)) or "none"))
                    remedies.append("set NCCL_IB_HCA to the host's RDMA devices (ibv_devices, rdma link)")
            listed_roce = [n for n, _exact in names if is_roce(n)]
            if unified_memory and not exclude and len(listed_roce) == 1:
                fails.append("nccl_ib_hca_one_port: NCCL_IB_HCA=%s lists one RoCE device, but on a DGX Spark one "
                             "QSFP cable appears as two PCIe x4 endpoints (rocep*/roceP*): with one of them NCCL "
                             "reaches about 3 GB/s" % hca)
                remedies.append("list both devices of the cable in NCCL_IB_HCA%s" % (
                    " (this host has %s)" % ",".join(roce_here) if roce_here else ""))
        elif unified_memory and len(roce_here) >= 2:
            warns.append("NCCL_IB_HCA is not set; this host has the RoCE devices %s (one cable = two devices on a "
                         "DGX Spark)" % ", ".join(roce_here))
            remedies.append("set NCCL_IB_HCA=%s in sglang_service_nccl_env" % ",".join(roce_here))
        notes.append("%d nodes; NCCL_SOCKET_IFNAME=%s NCCL_IB_HCA=%s" % (
            int(nnodes), ifname or "-", hca or "-"))
    if fails:
        return _check("fail", "; ".join(fails + warns), "; ".join(remedies))
    if warns:
        return _check("warn", "; ".join(warns + notes), "; ".join(remedies))
    if int(nnodes or 1) <= 1:
        return _check("pass", "single node: no inter-node NCCL settings to check")
    return _check("pass", "NCCL settings fit this host: %s" % "; ".join(notes))
