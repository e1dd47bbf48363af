#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang contributors
# Apache-2.0 (see LICENSE)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: sglang_gateway_worker
short_description: Take a worker out of an smg gateway or put it back, and wait for the gateway to agree
version_added: "0.1.0"
description:
  - Talks to the worker API of SGLang's gateway C(smg) (C(GET /workers), C(POST /workers), C(DELETE /workers/<id>),
    as smg 1.13.0 serves it).
  - C(state=absent) removes the worker with O(worker_url) and waits until the gateway no longer lists it (smg first
    marks it C(draining) - no new requests - and waits its drain settle time). Not listed - nothing to do.
  - C(state=present) adds it and waits until the gateway reports it C(is_healthy) and C(ready). Already routable -
    nothing to do. Not healthy within O(timeout) - the task fails; with O(remove_on_failure) the worker stays out of
    the gateway (a worker that cannot come back is not routed to later by itself).
  - smg 1.13.0 cannot cancel a registration it started (C(POST /workers) retries the worker's C(/health) every 30 s
    for up to 30 min; C(DELETE) finds nothing while it is not listed). So with O(remove_on_failure) the worker is
    posted only once its own C(/health) answers 200 from this host (run the task on the gateway host); a worker that
    does not within O(timeout) is never posted. One that was posted and is not routable is removed; one whose
    registration is still retrying (it turned unhealthy right after the probe) is watched for O(pending_timeout)
    seconds and removed when it appears. Without O(remove_on_failure) the worker is posted at once and left to smg.
  - C(state=query) only reads the gateway's view of the worker.
  - C(state=audit) compares the gateway's whole worker list with O(expected_urls) (routable, listed but not healthy,
    missing, unexpected); with O(timeout) > 0 it reads again every O(poll) seconds until they agree or the time is
    up. It never fails for the gateway - a gateway that does not answer is reported C(reachable=false).
  - The logic lives in C(plugins/module_utils/_gateway.py).
author:
  - blackwell.sglang maintainers (@blackwell-sglang)
options:
  gateway_url:
    description: Base URL of the gateway, e.g. C(http://127.0.0.1:8000).
    type: str
    required: true
  api_key:
    description: The gateway's API key (its C(--api-key)); sent as a bearer token in the C(Authorization) header. Empty for none.
    type: str
    default: ""
  worker_api_key:
    description:
      - The worker's own API key (SGLang's C(--api-key)), sent in the worker spec of C(POST /workers). smg gives its
        C(--api-key) only to the workers it started with; a worker added later needs its key here.
    type: str
    default: ""
  worker_url:
    description: The worker's URL exactly as the gateway knows it (C(http://host:port)); required unless C(state=audit).
    type: str
  expected_urls:
    description: With C(state=audit), the worker URLs the inventory gives.
    type: list
    elements: str
    default: []
  state:
    description: What the gateway should do with the worker.
    type: str
    choices: [absent, present, query, audit]
    default: present
  timeout:
    description:
      - Seconds to wait for the gateway to drop or to report the worker healthy.
      - With C(state=audit), seconds to wait for the gateway to agree with O(expected_urls) (0 reads once).
    type: int
    default: 300
  poll:
    description: Seconds between checks.
    type: float
    default: 1.0
  remove_on_failure:
    description:
      - With C(state=present), keep a worker that does not become healthy in time out of the gateway - post it only
        once its C(/health) answers, remove it when it is listed but not healthy, and remove a registration that
        completes within O(pending_timeout) after giving up.
    type: bool
    default: true
  pending_timeout:
    description:
      - With C(state=present) and O(remove_on_failure), seconds to watch for a registration of the worker that was
        posted but is not listed when O(timeout) ran out (smg retries it every C(--worker-startup-check-interval), 30 s
        by default), removing it when it appears. The task fails either way; the message says whether smg may still
        list the worker later.
    type: float
    default: 45
  request_timeout:
    description:
      - Seconds allowed for each HTTP call.
      - A call that fails (refused, DNS, timeout, TLS, an HTTP error) fails the module with a message naming the
        request (method, URL with credentials masked), what failed, the variable that sets the URL and what to check.
    type: int
    default: 10
attributes:
  check_mode:
    support: full
    description: Reports whether the worker would be added or removed, and changes nothing.
  diff_mode:
    support: none
    description: No diff.
"""

EXAMPLES = r"""
- name: Drain gpu-07 from the gateway
  blackwell.sglang.sglang_gateway_worker:
    gateway_url: http://127.0.0.1:8000
    api_key: "{{ sglang_gateway_api_key }}"
    worker_url: http://10.0.0.17:30000
    state: absent
  no_log: true

- name: Compare the gateway's workers with the inventory, waiting up to a minute for them to agree
  blackwell.sglang.sglang_gateway_worker:
    gateway_url: http://127.0.0.1:8000
    api_key: "{{ sglang_gateway_api_key }}"
    state: audit
    expected_urls: [http://10.0.0.17:30000, http://10.0.0.18:30000]
    timeout: 60
    poll: 2
  register: gateway_audit
"""

RETURN = r"""
worker_id:
  description: smg's id of the worker (null when it was not listed).
  returned: unless C(state=audit)
  type: str
waited_s:
  description: Seconds waited for the gateway.
  returned: always
  type: float
entry:
  description: The gateway's entry for the worker after the change (null when not listed).
  returned: unless C(state=audit)
  type: dict
routes_to:
  description: The listed workers the gateway routes to (healthy and ready).
  returned: with C(state=audit)
  type: list
  elements: str
unhealthy:
  description: Listed workers that are not routable.
  returned: with C(state=audit)
  type: list
  elements: str
missing:
  description: Expected workers the gateway does not list.
  returned: with C(state=audit)
  type: list
  elements: str
unexpected:
  description: Listed workers the inventory does not give.
  returned: with C(state=audit)
  type: list
  elements: str
in_sync:
  description: The gateway routes to exactly the expected workers.
  returned: with C(state=audit)
  type: bool
reachable:
  description: The gateway's worker list was read (false - the lists above are what an empty gateway gives).
  returned: with C(state=audit)
  type: bool
msg:
  description: Why the gateway's worker list could not be read ("" when it was).
  returned: with C(state=audit)
  type: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.blackwell.sglang.plugins.module_utils import _gateway


def main():
    module = AnsibleModule(
        argument_spec=dict(
            gateway_url=dict(type="str", required=True),
            api_key=dict(type="str", default="", no_log=True),
            worker_api_key=dict(type="str", default="", no_log=True),
            worker_url=dict(type="str"),
            expected_urls=dict(type="list", elements="str", default=[]),
            state=dict(type="str", choices=["absent", "present", "query", "audit"], default="present"),
            timeout=dict(type="int", default=300),
            poll=dict(type="float", default=1.0),
            remove_on_failure=dict(type="bool", default=True),
            pending_timeout=dict(type="float", default=45.0),
            request_timeout=dict(type="int", default=10),
        ),
        required_if=[("state", "absent", ["worker_url"]), ("state", "present", ["worker_url"]),
                     ("state", "query", ["worker_url"])],
        supports_check_mode=True,
    )
    p = module.params
    for name, low in (("request_timeout", 1), ("timeout", 0)):
        if p[name] < low:
            module.fail_json(msg="%s must be >= %d seconds; got %s" % (name, low, p[name]))
    if not p["poll"] > 0:
        module.fail_json(msg="poll must be > 0 seconds; got %s" % p["poll"])
    client = _gateway.Client(p["gateway_url"], p["api_key"], timeout=p["request_timeout"],
                             source="gateway_url (the role builds it from sglang_gateway_host and sglang_gateway_port)",
                             credential="api_key (sglang_gateway_api_key)",
                             timeout_var="request_timeout (sglang_gateway_request_timeout)")
    if p["state"] == "audit":                          # read-only, also in check mode
        watched = _gateway.watch(client, p["expected_urls"], timeout=p["timeout"], poll=p["poll"])
        module.exit_json(changed=False, **watched)
    try:
        entry = _gateway.find_worker(client.workers(), p["worker_url"])
        if p["state"] == "query" or module.check_mode:
            would = ((p["state"] == "absent" and entry is not None)
                     or (p["state"] == "present" and not _gateway.is_routable(entry)))
            module.exit_json(changed=bool(would) and p["state"] != "query",
                             worker_id=(entry or {}).get("id"), waited_s=0.0, entry=entry)
        if p["state"] == "absent":
            res = _gateway.remove_worker(client, p["worker_url"], timeout=p["timeout"], poll=p["poll"])
        else:
            res = _gateway.add_worker(client, p["worker_url"], timeout=p["timeout"], poll=p["poll"],
                                      remove_on_failure=p["remove_on_failure"], worker_api_key=p["worker_api_key"],
                                      pending_timeout=p["pending_timeout"])
        entry = _gateway.find_worker(client.workers(), p["worker_url"])
    except _gateway.GatewayError as exc:
        module.fail_json(msg=str(exc), worker_id=None, waited_s=None, entry=None)
    module.exit_json(changed=res["changed"], worker_id=res["worker_id"], waited_s=res["waited_s"], entry=entry)


if __name__ == "__main__":
    main()
