# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang contributors
# Apache-2.0 (see LICENSE)
"""SGLang's gateway ``smg`` in front of the fleet: the worker plan, its checks, the launch argv, and the worker API.

Everything here was read off the installed ``smg`` 1.13.0 (PyPI wheel, a Rust core behind a Python launcher) and
checked against a real ``smg launch`` on 127.0.0.1 (tests/unit/gateway):

- ``smg launch`` takes the router flags of ``smg.router_args.RouterArgs.add_cli_args(parser,
  use_router_prefix=False)``; ``smg.launch_router.parse_router_args(list)`` parses them and ``launch_router`` runs
  the router in-process. ``--policy`` choices in 1.13.0: random, round_robin, passthrough, cache_aware,
  power_of_two, least_load, manual, consistent_hashing, prefix_hash (default cache_aware).
- ``--api-key`` has no environment variable and no file form; it gates the data plane (clients send
  ``Authorization: Bearer <key>``), the worker API (``/workers`` answers 401 without it when no control-plane keys
  are set) and is forwarded to workers that have no key of their own. The role's launcher therefore adds it to
  the argument list inside the process (from a root-only environment file), never to argv.
- Worker API: ``GET /workers`` -> ``{"workers": [{"id", "url", "status", "is_healthy", "load", ...}], "total"}``;
  ``POST /workers {"url": ..., "api_key": ...}`` -> 202 (409 ``WORKER_ALREADY_EXISTS`` when the URL is registered);
  ``DELETE /workers/<id>`` -> 202, the worker shows ``status: draining`` (smg stops routing to it and waits its
  drain settle time, 5 s in 1.13.0) and then leaves the list. A worker added by POST shows ``is_healthy: true`` and
  ``status: ready`` once smg's registration workflow (metadata discovery + health) is through.
- A registration cannot be cancelled. ``POST /workers`` answers 202 with the worker's id and queues the workflow;
  its first step (``detect_connection_mode``) probes ``<url>/health`` and, while that fails, retries every
  ``--worker-startup-check-interval`` (30 s) for up to ``--worker-startup-timeout-secs`` (1800 s), with the worker
  not listed by ``GET /workers`` meanwhile. ``DELETE /workers/<id>`` of such a worker answers 202, but its removal job
  fails (``find_workers_to_remove - Worker ... not found``) and the registration goes on: the worker is listed and
  routed to as soon as a retry finds it healthy. There is no job API to cancel it (1.13.0 serves ``/workers``,
  ``/workers/{id}``, ``/workers/{id}/engine/...``). :func:`add_worker` therefore posts a worker only once it answers
  ``/health`` itself, and removes a registration it started that completes after it gave up.
- SGLang's ``/get_load`` (0.5.9 ``scheduler_metrics_mixin.get_load``) answers one
  ``{dp_rank, num_reqs, num_waiting_reqs, num_tokens, ts_tic}`` per data-parallel rank with
  ``num_reqs = running + waiting``: the in-flight count of a worker is the sum of ``num_reqs``. Its ``/metrics``
  gauge ``sglang:num_running_reqs`` is the fallback (running only).
"""

from __future__ import annotations

import json
import re
import time

try:
    from urllib import error as urlerror
except ImportError:  # pragma: no cover - Python 2 is not supported by the collection
    urlerror = None

from ansible.module_utils.six.moves import http_client
from ansible.module_utils.urls import open_url

from ansible_collections.blackwell.sglang.plugins.module_utils import _net


class GatewayError(ValueError):
    """Bad gateway settings or a failed gateway/worker call; the message names the variable or the endpoint."""

    def __init__(self, msg, variable=None):
        super().__init__(msg)
        self.variable = variable


# ---------------------------------------------------------------------------------------------------- the plan

def _norm_url(url):
    return str(url).strip().rstrip("/")


def _format_host(address):
    address = str(address).strip()
    if ":" in address and not address.startswith("["):
        return "[%s]" % address
    return address


def _is_loopback(address):
    name = str(address).strip().strip("[]").lower()
    return name in ("localhost", "::1") or name.startswith("127.")


def plan_workers(servers, group_name="sglang_servers"):
    """The gateway's workers: one per single-node server and one (rank 0) per multi-node server.

    :param servers: list of dicts, one per host of the worker group, in inventory order: ``host`` (inventory name),
        ``address`` (what the gateway connects to), ``port`` (int), optional ``scheme`` (``http``), optional
        ``multinode_members`` (the host names of its ``sglang_stack_service_multinode_group``, ``[]`` for one box),
        optional ``node_rank`` (an explicit ``sglang_service_node_rank`` or None), optional ``ranks`` (host ->
        explicit rank of the other members).
    :param group_name: the inventory group's name, for messages (``sglang_gateway_workers_group``).
    :returns: list of ``{"host", "url", "members"}``; ``members`` = the hosts behind the worker (itself alone for
        a single-node server), each worker once, in inventory order.
    :raises GatewayError: empty group, a bad port, two workers on one URL.
    """
    servers = list(servers or [])
    if not servers:
        raise GatewayError("sglang_gateway_workers_group: the inventory group %r has no hosts: the gateway would "
                           "route to nothing" % group_name, variable="sglang_gateway_workers_group")
    workers = []
    seen = {}
    for srv in servers:
        host = srv["host"]
        members = list(srv.get("multinode_members") or [])
        if members:
            ranks = dict(srv.get("ranks") or {})
            explicit = [m for m in members if ranks.get(m) is not None]
            if explicit:
                rank0 = [m for m in members if ranks.get(m) is not None and int(ranks[m]) == 0]
                rank0 = rank0[0] if rank0 else None
            else:
                rank0 = members[0]
            if rank0 != host:
                continue                              # ranks >= 1 serve no API (SGLang's dummy health server only)
        try:
            port = int(srv.get("port"))
        except (TypeError, ValueError):
            port = 0
        if not 1 <= port <= 65535:
            raise GatewayError("sglang_gateway_worker_port of %s: %r is not a port in 1-65535" % (host, srv.get("port")),
                               variable="sglang_gateway_worker_port")
        address = str(srv.get("address") or "").strip()
        if not address:
            raise GatewayError("sglang_gateway_worker_address of %s is empty (set it, or ansible_host)" % host,
                               variable="sglang_gateway_worker_address")
        url = "%s://%s:%d" % (srv.get("scheme") or "http", _format_host(address), port)
        if url in seen:
            raise GatewayError("sglang_gateway_worker_address: %s and %s both give the worker URL %s"
                               % (seen[url], host, url), variable="sglang_gateway_worker_address")
        seen[url] = host
        workers.append({"host": host, "url": url, "members": members or [host]})
    if not workers:
        raise GatewayError("sglang_gateway_workers_group: no host of %r is a worker (no multi-node rank 0)" % group_name,
                           variable="sglang_gateway_workers_group")
    return workers


def check_settings(gateway_host, workers, settings, policies=None, server_ports=None, server_binds=None):
    """Refuse settings that cannot work, before anything changes; return the list of checks passed.

    :param gateway_host: inventory name of the gateway host being configured.
    :param workers: from :func:`plan_workers`.
    :param settings: dict with ``port``, ``prometheus_port``, ``policy`` (and optional ``health_check_port``).
    :param policies: the ``--policy`` choices of the installed smg (None: not read yet, policy not checked).
    :param server_ports: host -> SGLang's port (``sglang_stack_service_port``) of the worker hosts; a gateway on a worker
        host must not take that port.
    :param server_binds: host -> SGLang's bind address (``sglang_stack_service_host``); a loopback-only worker cannot be
        reached from a gateway on another host.
    :raises GatewayError: naming the variable.
    """
    passed = []
    ports = {}
    for key in ("port", "prometheus_port", "health_check_port"):
        value = settings.get(key)
        if value in (None, ""):
            continue
        try:
            value = int(value)
        except (TypeError, ValueError):
            value = 0
        if not 1 <= value <= 65535:
            raise GatewayError("sglang_gateway_%s: %r is not a port in 1-65535" % (key, settings.get(key)),
                               variable="sglang_gateway_" + key)
        if value in ports:
            raise GatewayError("sglang_gateway_%s and sglang_gateway_%s are both %d" % (ports[value], key, value),
                               variable="sglang_gateway_" + key)
        ports[value] = key
    passed.append("gateway ports distinct")
    server_port = (server_ports or {}).get(gateway_host)
    if server_port not in (None, ""):
        for value, key in ports.items():
            if value == int(server_port):
                raise GatewayError("sglang_gateway_%s: %d is SGLang's port (sglang_stack_service_port) on %s, which is also "
                                   "a worker; pick another port" % (key, value, gateway_host),
                                   variable="sglang_gateway_" + key)
        passed.append("no clash with SGLang's port on this host")
    for worker in workers:
        bind = (server_binds or {}).get(worker["host"])
        if bind and _is_loopback(bind) and worker["host"] != gateway_host:
            raise GatewayError("sglang_stack_service_host of %s is %s: SGLang listens on loopback only and the gateway on "
                               "%s cannot reach it (bind it to an address the gateway reaches)"
                               % (worker["host"], bind, gateway_host), variable="sglang_stack_service_host")
    passed.append("workers reachable by address")
    policy = settings.get("policy")
    if policies is not None:
        if policy not in policies:
            raise GatewayError("sglang_gateway_policy: %r is not a routing policy of the installed smg (choices: %s)"
                               % (policy, ", ".join(policies)), variable="sglang_gateway_policy")
        passed.append("policy %s offered by the installed smg" % policy)
    return passed


def render_args(settings, workers):
    """``smg launch`` argv (without the API key, which the launcher adds in-process).

    :param settings: dict: ``host``, ``port``, ``policy``, ``prometheus_host``, ``prometheus_port``, the health
        settings ``health_check_interval_secs``, ``health_check_timeout_secs``, ``health_failure_threshold``,
        ``health_success_threshold``, ``health_check_endpoint``, the retry settings ``retry_max_retries``,
        ``retry_initial_backoff_ms``, ``retry_max_backoff_ms``, ``request_timeout_secs``,
        ``shutdown_grace_period_secs``, ``log_level``, ``extra_args`` (list). None/"" values are left out (smg's
        default applies).
    :param workers: from :func:`plan_workers` (their ``url`` become ``--worker-urls``).
    """
    argv = ["--host", str(settings["host"]), "--port", str(int(settings["port"]))]
    argv += ["--worker-urls"] + [w["url"] for w in workers]
    argv += ["--policy", str(settings["policy"])]
    for key in ("prometheus_host", "prometheus_port", "health_check_interval_secs", "health_check_timeout_secs",
                "health_failure_threshold", "health_success_threshold", "health_check_endpoint",
                "retry_max_retries", "retry_initial_backoff_ms", "retry_max_backoff_ms", "request_timeout_secs",
                "shutdown_grace_period_secs", "log_level"):
        value = settings.get(key)
        if value is None or value == "":
            continue
        argv += ["--" + key.replace("_", "-"), str(value)]
    argv += [str(a) for a in settings.get("extra_args") or []]
    for tok in argv:
        if "api-key" in tok or "api_key" in tok:
            raise GatewayError("sglang_gateway_extra_args: give the API key as sglang_gateway_api_key, never in argv",
                               variable="sglang_gateway_extra_args")
    return argv


# The installed smg's own parser, run with the gateway venv's python. argv[1]: JSON list of launch arguments.
INTROSPECT_SCRIPT = r"""
import argparse, contextlib, io, json, sys
out = {"version": None, "actions": None, "policies": None, "parse_error": None, "import_error": None}
try:
    from importlib import metadata
    out["version"] = metadata.version("smg")
except Exception as exc:
    out["version"] = None
try:
    from smg.router_args import RouterArgs
    from smg.launch_router import parse_router_args
    parser = argparse.ArgumentParser()
    RouterArgs.add_cli_args(parser, use_router_prefix=False)
    acts = []
    for a in parser._actions:
        acts.append({"option_strings": list(a.option_strings), "dest": a.dest,
                     "nargs": a.nargs if isinstance(a.nargs, (int, type(None))) else str(a.nargs),
                     "choices": [str(c) for c in a.choices] if a.choices is not None else None,
                     "default": a.default if isinstance(a.default, (str, int, float, bool, type(None))) else repr(a.default),
                     "type": getattr(a.type, "__name__", None) if a.type is not None else None})
    out["actions"] = acts
    out["policies"] = [a["choices"] for a in acts if "--policy" in a["option_strings"]][0]
    argv = json.loads(sys.argv[1])
    if argv:
        err = io.StringIO()
        try:
            with contextlib.redirect_stderr(err):
                parsed = parse_router_args(argv)
                parsed._validate_router_args()
        except SystemExit:
            out["parse_error"] = err.getvalue().strip().splitlines()[-1] if err.getvalue().strip() else "parse failed"
        except Exception as exc:
            out["parse_error"] = "%s: %s" % (type(exc).__name__, exc)
except Exception as exc:
    out["import_error"] = "%s: %s" % (type(exc).__name__, exc)
print(json.dumps(out))
"""


# ------------------------------------------------------------------------------------------------- the worker API

class Client:
    """The gateway's worker API and a worker's load endpoint over urllib (stdlib only: runs on any target).

    :param base_url: ``http://host:port`` of the gateway (or of a worker for :meth:`inflight`).
    :param api_key: bearer token (the gateway's ``--api-key``; SGLang's ``--api-key`` for a worker), may be "".
    :param timeout: seconds per HTTP call.
    :param source: the variable (and module option) that sets ``base_url``, named when a call fails.
    :param credential: the variable of ``api_key``, named when a call answers 401/403.
    :param what: what ``base_url`` is, for messages (``"gateway"``, ``"worker"``).
    """

    def __init__(self, base_url, api_key="", timeout=10.0, source=None, credential=None, what="gateway",
                 timeout_var="request_timeout"):
        self.base_url = _norm_url(base_url)
        self.api_key = api_key or ""
        self.timeout = float(timeout)
        self.source, self.credential, self.what, self.timeout_var = source, credential, what, timeout_var

    def error(self, method, path, exc=None, status=None, body=None, action=None):
        """A :class:`GatewayError` in :mod:`_net`'s shape for a call that failed (``exc``) or answered ``status``."""
        text, _kind, _status = _net.message(
            action or "%s API" % self.what, self.base_url + path, exc=exc, status=status, method=method,
            variable=self.source, credential=self.credential, timeout=self.timeout, timeout_var=self.timeout_var,
            body=None if body is None else str(body)[:300], secrets=[self.api_key] if self.api_key else None)
        return GatewayError(text)

    def call(self, method, path, body=None):
        """``(status, parsed JSON or text)``; a call without an HTTP answer raises GatewayError (:meth:`error`)."""
        data = None
        headers = {"Accept": "application/json"}
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        if self.api_key:
            headers["Authorization"] = "Bearer " + self.api_key
        try:
            # ansible's open_url (proxies, TLS settings); it raises urllib's HTTPError/URLError like urlopen
            resp = open_url(self.base_url + path, data=data, headers=headers, method=method, timeout=self.timeout,
                            follow_redirects="none")
            try:
                status, raw = resp.getcode(), resp.read()
            finally:
                resp.close()
        except urlerror.HTTPError as exc:
            try:
                status, raw = exc.code, exc.read()
            except (OSError, http_client.HTTPException, ValueError):
                status, raw = exc.code, b""
        except (urlerror.URLError, OSError, http_client.HTTPException, ValueError) as exc:
            # refused, DNS, timeout (raised bare by urllib while reading the answer), TLS, reset, a bad URL
            raise self.error(method, path, exc=exc)
        text = raw.decode("utf-8", "replace")
        try:
            return status, json.loads(text)
        except ValueError:
            return status, text

    def workers(self):
        """The gateway's worker list (``GET /workers``)."""
        status, payload = self.call("GET", "/workers")
        if status != 200:
            raise self.error("GET", "/workers", status=status, body=payload, action="gateway worker list")
        if not isinstance(payload, dict):
            raise GatewayError("GET %s/workers answered %s with something that is not smg's worker list: %s"
                               % (self.base_url, status, str(payload)[:300]))
        return list(payload.get("workers") or [])


def find_worker(workers, url):
    """The entry of ``workers`` (``GET /workers``) whose URL is ``url`` (trailing ``/`` ignored), or None."""
    want = _norm_url(url)
    for entry in workers or []:
        if _norm_url(entry.get("url", "")) == want:
            return entry
    return None


def is_routable(entry):
    """True when smg routes to the worker: healthy and ``ready`` (not ``draining``/``pending``)."""
    return bool(entry) and bool(entry.get("is_healthy")) and str(entry.get("status", "ready")) == "ready"


def inflight_from_load(payload):
    """Requests in flight from SGLang's ``/get_load`` (list per DP rank, or one dict): sum of ``num_reqs``."""
    items = payload if isinstance(payload, list) else [payload]
    total = 0
    found = False
    for item in items:
        if isinstance(item, dict) and "num_reqs" in item:
            total += int(item["num_reqs"])
            found = True
    if not found:
        raise GatewayError("/get_load answer has no num_reqs: %s" % str(payload)[:200])
    return total


_RUNNING = re.compile(r"^sglang[:_]num_running_reqs(?:\{[^}]*\})?\s+([0-9.eE+-]+)\s*$", re.M)
_QUEUE = re.compile(r"^sglang[:_]num_queue_reqs(?:\{[^}]*\})?\s+([0-9.eE+-]+)\s*$", re.M)


def inflight_from_metrics(text):
    """Requests in flight from SGLang's Prometheus text: ``sglang:num_running_reqs`` (+ ``num_queue_reqs``)."""
    running = _RUNNING.findall(text or "")
    if not running:
        raise GatewayError("/metrics has no sglang:num_running_reqs (is --enable-metrics on?)")
    return int(sum(float(v) for v in running) + sum(float(v) for v in _QUEUE.findall(text or "")))


def worker_inflight(client):
    """In-flight requests of the worker behind ``client``: ``/get_load``, else ``/metrics``."""
    status, payload = client.call("GET", "/get_load")
    if status == 200:
        return inflight_from_load(payload), "/get_load"
    load_status = status
    status, text = client.call("GET", "/metrics")
    if status == 200:
        return inflight_from_metrics(text if isinstance(text, str) else json.dumps(text)), "/metrics"
    raise client.error("GET", "/metrics", status=status, body=text,
                       action="requests in flight (/get_load answered HTTP %s, then /metrics)" % load_status)


def remove_worker(client, url, timeout=60.0, poll=0.5, clock=time.monotonic, sleep=time.sleep):
    """Take ``url`` out of the gateway and wait until smg lists it no more (its own drain settle time included).

    :returns: ``{"changed": bool, "worker_id": str|None, "waited_s": float}``; not changed when it was not listed.
    :raises GatewayError: the DELETE was refused or the worker is still listed after ``timeout`` seconds.
    """
    start = clock()
    entry = find_worker(client.workers(), url)
    if entry is None:
        return {"changed": False, "worker_id": None, "waited_s": 0.0}
    status, payload = client.call("DELETE", "/workers/%s" % entry["id"])
    if status not in (200, 202, 404):
        raise client.error("DELETE", "/workers/%s" % entry["id"], status=status, body=payload,
                           action="removal of %s from the gateway" % url)
    while True:
        current = find_worker(client.workers(), url)
        if current is None:
            return {"changed": True, "worker_id": entry["id"], "waited_s": round(clock() - start, 2)}
        if clock() - start > timeout:
            raise GatewayError("%s still listed by the gateway %s after %ss (status %s)"
                               % (url, client.base_url, timeout, current.get("status")))
        sleep(poll)


def worker_healthy(client):
    """True when the worker behind ``client`` answers ``GET /health`` with 200 (what smg's registration probes)."""
    try:
        status, _payload = client.call("GET", "/health")
    except GatewayError:
        return False
    return status == 200


def add_worker(client, url, timeout=300.0, poll=1.0, remove_on_failure=True, worker_api_key="", pending_timeout=45.0,
               worker_client=None, clock=time.monotonic, sleep=time.sleep):
    """Put ``url`` (back) into the gateway and wait until smg reports it healthy and ready.

    ``worker_api_key`` goes into the worker spec (``api_key``): smg 1.13.0 gives its own ``--api-key`` only to the
    workers of ``--worker-urls``; one added through ``POST /workers`` without a key fails backend detection with
    401 against an SGLang that has ``--api-key`` (seen with the real smg in tests/unit/gateway).

    With ``remove_on_failure`` a worker that gives up stays out, although smg cannot cancel a registration (see the
    module docstring): the worker is posted only once its own ``/health`` answers 200 (probed from this host, the
    gateway's, until ``timeout``); a worker that never does is never posted. Once posted, smg gets at least
    ``min(timeout, 15)`` s to list it. When it is not routable by then it is removed if listed; if not listed (it
    turned unhealthy between the probe and smg's, so the registration is retrying), the gateway is watched for
    ``pending_timeout`` more seconds (one retry of smg's default 30 s interval and a margin) and the worker is
    removed as soon as it shows up. Without ``remove_on_failure`` the worker is posted at once and left to smg.

    :param worker_client: a :class:`Client` for the worker itself (``/health``); default: ``url`` with
        ``worker_api_key``.
    :returns: ``{"changed": bool, "worker_id": str, "waited_s": float}``; not changed when it was already routable.
    :raises GatewayError: refused, or not healthy after ``timeout`` s; the message says whether the worker was
        never put into the gateway, taken out again, or (a registration still pending after ``pending_timeout`` s)
        may still be registered by smg later.
    """
    start = clock()
    deadline = start + float(timeout)
    entry = find_worker(client.workers(), url)
    if is_routable(entry):
        return {"changed": False, "worker_id": entry.get("id"), "waited_s": 0.0}
    posted = None
    if entry is None or str(entry.get("status")) == "draining":
        while entry is not None:                      # a removal still settling: wait for it to finish first
            if clock() > deadline:
                raise GatewayError("%s still draining on %s after %ss" % (url, client.base_url, timeout))
            sleep(poll)
            entry = find_worker(client.workers(), url)
        if remove_on_failure:
            worker = worker_client or Client(url, worker_api_key, timeout=client.timeout, what="worker")
            while not worker_healthy(worker):
                if clock() > deadline:
                    raise GatewayError("%s not healthy after %ss (its /health did not answer 200 from the gateway "
                                       "host); not put into the gateway %s, so it stays out"
                                       % (url, timeout, client.base_url))
                sleep(poll)
        spec = {"url": _norm_url(url)}
        if worker_api_key:
            spec["api_key"] = worker_api_key
        status, payload = client.call("POST", "/workers", spec)
        if status not in (200, 201, 202, 409):
            raise client.error("POST", "/workers", status=status, body=payload, action="adding %s to the gateway" % url)
        posted = (payload.get("worker_id") if isinstance(payload, dict) else None) or "?"
        deadline = max(deadline, clock() + min(float(timeout), 15.0))
    last = None
    while True:
        last = find_worker(client.workers(), url)
        if is_routable(last):
            return {"changed": True, "worker_id": last.get("id"), "waited_s": round(clock() - start, 2)}
        if clock() > deadline:
            break
        sleep(poll)
    state = "not listed" if last is None else "status %s, healthy %s" % (last.get("status"), last.get("is_healthy"))
    if not remove_on_failure:
        raise GatewayError("%s not healthy on the gateway %s after %ss (%s)" % (url, client.base_url, timeout, state))
    if last is not None:
        try:
            remove_worker(client, url, timeout=60.0, poll=poll, clock=clock, sleep=sleep)
        except GatewayError as exc:
            raise GatewayError("%s not healthy on the gateway %s after %ss (%s), and taking it out again failed: %s"
                               % (url, client.base_url, timeout, state, exc))
        raise GatewayError("%s not healthy on the gateway %s after %ss (%s); taken out again"
                           % (url, client.base_url, timeout, state))
    if posted is None:                                # listed before, not any more: nothing of ours is pending
        raise GatewayError("%s not healthy on the gateway %s after %ss (not listed any more); it stays out"
                           % (url, client.base_url, timeout))
    # posted, not listed: smg's registration (id ``posted``) is retrying its health step and cannot be cancelled
    watch_end = clock() + float(pending_timeout)
    while clock() <= watch_end:
        if find_worker(client.workers(), url) is not None:
            remove_worker(client, url, timeout=60.0, poll=poll, clock=clock, sleep=sleep)
            raise GatewayError("%s not healthy on the gateway %s after %ss (not listed); its registration (smg worker "
                               "id %s) completed %.0f s later and was taken out again"
                               % (url, client.base_url, timeout, posted, clock() - start - float(timeout)))
        sleep(poll)
    raise GatewayError("%s not healthy on the gateway %s after %ss (not listed); smg's registration of it (worker id "
                       "%s) was still retrying after %ss more and cannot be cancelled in smg 1.13.0: smg lists it as "
                       "soon as it answers /health (up to --worker-startup-timeout-secs); take it out with a drain "
                       "(sglang_gateway tasks_from: drain) then" % (url, client.base_url, timeout, posted, pending_timeout))


def wait_idle(client, timeout=600.0, poll=1.0, clock=time.monotonic, sleep=time.sleep):
    """Wait until the worker behind ``client`` has no request in flight.

    :returns: ``{"idle": bool, "inflight": int, "waited_s": float, "source": str}``; ``idle`` False after
        ``timeout`` seconds (the caller decides: proceed or abort).
    """
    start = clock()
    while True:
        count, source = worker_inflight(client)
        if count == 0:
            return {"idle": True, "inflight": 0, "waited_s": round(clock() - start, 2), "source": source}
        if clock() - start > timeout:
            return {"idle": False, "inflight": count, "waited_s": round(clock() - start, 2), "source": source}
        sleep(poll)


def audit(workers_listed, expected_urls):
    """Compare a gateway's worker list with the inventory's plan.

    :returns: ``{"routes_to": [urls routable], "unhealthy": [urls listed, not routable], "missing": [expected, not
        listed], "unexpected": [listed, not expected], "in_sync": bool}``.
    """
    listed = {_norm_url(w.get("url", "")): w for w in workers_listed or []}
    expected = [_norm_url(u) for u in expected_urls or []]
    routes = sorted(u for u, w in listed.items() if is_routable(w))
    unhealthy = sorted(u for u, w in listed.items() if not is_routable(w))
    missing = sorted(u for u in expected if u not in listed)
    unexpected = sorted(u for u in listed if u not in expected)
    return {"routes_to": routes, "unhealthy": unhealthy, "missing": missing, "unexpected": unexpected,
            "in_sync": not (missing or unexpected or unhealthy)}


def watch(client, expected_urls, timeout=0.0, poll=2.0, clock=time.monotonic, sleep=time.sleep):
    """Read the gateway's worker list and compare it with the inventory (:func:`audit`); with ``timeout`` > 0, read
    again every ``poll`` seconds until it is in sync or ``timeout`` seconds passed. Never raises for the gateway: a
    gateway that does not answer is reported, not failed (an audit and the start-up report both say what they saw).

    :returns: :func:`audit`'s dict plus ``reachable`` (the last read answered), ``waited_s`` and ``msg`` (why the
        last read failed, "" when it did not).
    """
    start = clock()
    while True:
        try:
            report = dict(audit(client.workers(), expected_urls), reachable=True, msg="")
        except GatewayError as exc:
            report = dict(audit([], expected_urls), reachable=False, msg=str(exc))
        if report["in_sync"] or clock() - start >= timeout:
            report["waited_s"] = round(clock() - start, 2)
            return report
        sleep(poll)


def api_key_problem(api_key_given, require_api_key, host):
    """The message for an empty API key on a gateway that other hosts reach, else None."""
    if api_key_given or not require_api_key or str(host) in ("127.0.0.1", "::1", "localhost"):
        return None
    return ("sglang_gateway_api_key is empty and the gateway listens on %s: put the key in ansible-vault "
            "(vault_sglang_api_key) or set sglang_gateway_require_api_key: false" % host)
