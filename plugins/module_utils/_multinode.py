# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang contributors
# Apache-2.0 (see LICENSE)
"""Plan one SGLang server that spans several hosts (``--nnodes``, ``--node-rank``, ``--dist-init-addr``).

An inventory group names the hosts of one multi-node server (``sglang_stack_service_multinode_group``). This module turns
that group into the three launch_server flags for one member and checks, before anything changes on a host, what
would otherwise fail minutes into model loading:

- ranks are exactly 0..N-1, one per host (explicit ``sglang_service_node_rank`` or the inventory order);
- the tensor-parallel size divides evenly over the nodes. SGLang 0.5.9 ``engine.py`` gives node ``r`` the TP ranks
  ``[r * tp/nnodes, (r + 1) * tp/nnodes)`` (``tp_size_per_node = tp_size // nnodes_per_tp_group`` with
  ``pp_size == 1``), so a remainder would leave GPUs without a rank;
- every member is converged in the same play batch (a server whose ranks run different releases, or whose rank 0
  restarts alone, does not come up) and runs the same release id;
- rank 0's address is reachable by name: ``--dist-init-addr`` is ``<rank-0 address>:<port>`` (the torch.distributed
  TCP store and NCCL bootstrap listen there; SGLang splits the value on ``:``, IPv6 in ``[...]``).

Only rank 0 serves the HTTP API; ranks >= 1 run schedulers plus SGLang's "dummy" health server (``/health``,
``/health_generate``, ``/ping`` on the same host:port; ``launch_dummy_health_check_server`` in SGLang 0.5.9), so
readiness is checked on every rank and the smoke generation only on rank 0.
"""

from __future__ import annotations

import ipaddress


class MultinodeError(ValueError):
    """A multi-node group that cannot form one server; the message says which member and how to fix it."""


def _format_host_port(address, port):
    """``host:port``, with IPv6 literals in brackets (the form SGLang's server_args expects)."""
    address = str(address).strip()
    if address.startswith("[") and "]" in address:
        return "%s:%d" % (address[: address.index("]") + 1], port)
    try:
        if isinstance(ipaddress.ip_address(address), ipaddress.IPv6Address):
            return "[%s]:%d" % (address, port)
    except ValueError:
        pass
    return "%s:%d" % (address, port)


def _split_host_port(value):
    """``(host, port)`` of ``host:port`` / ``[v6]:port``; raises MultinodeError on a missing or bad port."""
    value = str(value).strip()
    if value.startswith("["):
        host, _sep, rest = value[1:].partition("]")
        port = rest[1:] if rest.startswith(":") else ""
    else:
        host, _sep, port = value.rpartition(":")
        if ":" in host:                               # a bare IPv6 literal: SGLang wants it in brackets
            raise MultinodeError("dist_init_addr %r: write an IPv6 address as [addr]:port" % value)
    if not host or not port.isdigit() or not 1 <= int(port) <= 65535:
        raise MultinodeError("dist_init_addr %r needs host:port with a port in 1-65535" % value)
    return host, int(port)


def _is_local_only(host):
    """True for addresses other machines cannot reach: loopback, unspecified, ``localhost`` names."""
    name = str(host).strip().strip("[]").lower()
    if name == "localhost" or name.startswith("localhost.") or name.endswith(".localhost"):
        return True
    try:
        addr = ipaddress.ip_address(name)
    except ValueError:
        return False
    return addr.is_loopback or addr.is_unspecified


def plan_multinode(members, host, tp_size, ranks=None, addresses=None, batch=None, release_ids=None,
                   dist_init_addr="", dist_init_port=50000):
    """The multi-node settings of ``host`` in the server formed by ``members``.

    :param members: list of inventory host names of the group, in inventory order. An empty list means a
        single-node server: the result has ``enabled: False``, ``nnodes: 1``, ``node_rank: 0``.
    :param host: this host's inventory name; must be a member.
    :param tp_size: int, the server's total tensor-parallel size (all GPUs of all nodes).
    :param ranks: dict host -> int or None; an explicit ``sglang_service_node_rank``. Hosts without one take their
        position in ``members``. Mixed explicit/implicit ranks are allowed as long as the result is 0..N-1 once each.
    :param addresses: dict host -> str or None (``ansible_host``); rank 0's entry (or its name) builds
        ``--dist-init-addr`` unless ``dist_init_addr`` is given.
    :param batch: list of the hosts in this play batch (``ansible_play_batch``); None skips the check.
    :param release_ids: dict host -> str or None (``sglang_release_id``); the defined ones must all be equal.
    :param dist_init_addr: str ``host:port`` overriding the derived address ("" = derive).
    :param dist_init_port: int 1-65535, the port on rank 0 (SGLang's docs use 50000 in their examples; any free
        port works, it must be open between the nodes).
    :returns: dict ``enabled`` (bool), ``nnodes`` (int), ``node_rank`` (int), ``leader`` (inventory name of rank 0),
        ``dist_init_addr`` (str or ""), ``tp_per_node`` (int, GPUs this node serves), ``members`` (list ordered by
        rank).
    :raises MultinodeError: on any of the conditions in the module docstring.
    """
    members = [str(m) for m in (members or [])]
    tp_size = int(tp_size)
    if tp_size < 1:
        raise MultinodeError("tp_size must be >= 1, got %d" % tp_size)
    if not members:
        return {"enabled": False, "nnodes": 1, "node_rank": 0, "leader": str(host), "dist_init_addr": "",
                "tp_per_node": tp_size, "members": [str(host)]}
    if len(set(members)) != len(members):
        raise MultinodeError("the group lists a host twice: %s" % members)
    if host not in members:
        raise MultinodeError("%s is not a member of the multi-node group %s" % (host, members))
    nnodes = len(members)
    if nnodes < 2:
        raise MultinodeError("a multi-node group needs at least 2 hosts, it has 1 (%s); unset "
                             "sglang_stack_service_multinode_group for a single-node server" % members[0])

    ranks = dict(ranks or {})
    by_rank = {}
    for position, member in enumerate(members):
        raw = ranks.get(member)
        try:
            rank = position if raw is None or raw == "" else int(raw)
        except (TypeError, ValueError):
            raise MultinodeError("%s: sglang_service_node_rank %r is not an integer" % (member, raw))
        if not 0 <= rank < nnodes:
            raise MultinodeError("%s: node rank %d is outside 0..%d (the group has %d hosts)"
                                 % (member, rank, nnodes - 1, nnodes))
        if rank in by_rank:
            raise MultinodeError("%s and %s both have node rank %d; each rank 0..%d must be taken once"
                                 % (by_rank[rank], member, rank, nnodes - 1))
        by_rank[rank] = member
    ordered = [by_rank[r] for r in range(nnodes)]

    if tp_size % nnodes:
        raise MultinodeError("tp_size %d does not divide over %d nodes (SGLang gives each node tp_size/nnodes GPUs); "
                             "use a multiple of %d" % (tp_size, nnodes, nnodes))

    if batch is not None:
        missing = [m for m in ordered if m not in set(batch)]
        if missing:
            raise MultinodeError("%s not in this play batch; a multi-node server is converged and restarted as one "
                                 "(drop --limit to a subset, and keep the group inside one batch: sglang_rollout_serial, "
                                 "sglang_rollback_serial)"
                                 % ", ".join(missing))

    ids = {m: v for m, v in (release_ids or {}).items() if m in set(members) and v not in (None, "")}
    if len(set(ids.values())) > 1:
        raise MultinodeError("the members would run different releases (%s); every rank must run the same build"
                             % ", ".join("%s=%s" % (m, ids[m]) for m in ordered if m in ids))

    port = int(dist_init_port)
    if not 1 <= port <= 65535:
        raise MultinodeError("dist_init_port %d is outside 1-65535" % port)
    leader = ordered[0]
    if dist_init_addr:
        addr = str(dist_init_addr).strip()
        host_part, _port = _split_host_port(addr)
    else:
        host_part = (addresses or {}).get(leader) or leader
        addr = _format_host_port(host_part, port)
    if _is_local_only(host_part):
        raise MultinodeError("--dist-init-addr %s is only reachable on rank 0 (%s) itself; the other nodes cannot "
                             "connect. Set rank 0's ansible_host or sglang_service_dist_init_addr to an address "
                             "they reach" % (addr, leader))

    return {"enabled": True, "nnodes": nnodes, "node_rank": ordered.index(host), "leader": leader,
            "dist_init_addr": addr, "tp_per_node": tp_size // nnodes, "members": ordered}
