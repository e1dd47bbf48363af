#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang contributors
# Apache-2.0 (see LICENSE)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: sglang_worker_inflight
short_description: Wait until an SGLang server has no request in flight
version_added: "0.1.0"
description:
  - Polls SGLang's own load endpoint C(/get_load) (one C({dp_rank, num_reqs, num_waiting_reqs, ...}) per DP rank,
    C(num_reqs) = running + waiting; SGLang 0.5.9) and sums C(num_reqs); falls back to the Prometheus gauge
    C(sglang:num_running_reqs) (+ C(sglang:num_queue_reqs)) of C(/metrics).
  - Returns RV(idle) false when requests are still in flight after O(timeout) seconds; it never fails for that
    (the caller decides to proceed or abort). It fails when the server answers neither endpoint, or cannot be
    reached; the message names the URL (credentials masked), what failed (refused, DNS, timeout, TLS, the HTTP
    status), the variable that sets the URL and what to check.
author:
  - blackwell.sglang maintainers (@blackwell-sglang)
options:
  url:
    description: Base URL of the SGLang server, e.g. C(http://10.0.0.17:30000).
    type: str
    required: true
  api_key:
    description: SGLang's API key, sent as a bearer token in the C(Authorization) header. Empty for none.
    type: str
    default: ""
  timeout:
    description: Seconds to wait for zero requests in flight.
    type: int
    default: 600
  poll:
    description: Seconds between checks.
    type: float
    default: 1.0
  request_timeout:
    description: Seconds allowed for each HTTP call.
    type: int
    default: 10
extends_documentation_fragment:
  - blackwell.sglang.attributes.READ_ONLY
"""

EXAMPLES = r"""
- name: Wait for the requests in flight to end
  blackwell.sglang.sglang_worker_inflight:
    url: http://10.0.0.17:30000
    api_key: "{{ sglang_service_api_key }}"
    timeout: 600
  register: inflight
  no_log: true
"""

RETURN = r"""
idle:
  description: True when no request was in flight before the timeout.
  returned: success
  type: bool
inflight:
  description: Requests in flight at the last check.
  returned: success
  type: int
waited_s:
  description: Seconds waited.
  returned: success
  type: float
source:
  description: The endpoint read (C(/get_load) or C(/metrics)).
  returned: success
  type: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.blackwell.sglang.plugins.module_utils import _gateway


def main():
    module = AnsibleModule(
        argument_spec=dict(
            url=dict(type="str", required=True),
            api_key=dict(type="str", default="", no_log=True),
            timeout=dict(type="int", default=600),
            poll=dict(type="float", default=1.0),
            request_timeout=dict(type="int", default=10),
        ),
        supports_check_mode=True,
    )
    p = module.params
    for name, low in (("request_timeout", 1), ("timeout", 0)):
        if p[name] < low:
            module.fail_json(msg="%s must be >= %d seconds; got %s" % (name, low, p[name]))
    if not p["poll"] > 0:
        module.fail_json(msg="poll must be > 0 seconds; got %s" % p["poll"])
    client = _gateway.Client(p["url"], p["api_key"], timeout=p["request_timeout"], what="worker",
                             source="url (the worker's URL: sglang_gateway_worker_address, else ansible_host, and "
                                    "sglang_gateway_worker_port)",
                             credential="api_key (sglang_gateway_worker_api_key)",
                             timeout_var="request_timeout (sglang_gateway_request_timeout)")
    try:
        res = _gateway.wait_idle(client, timeout=p["timeout"], poll=p["poll"])
    except _gateway.GatewayError as exc:
        module.fail_json(msg=str(exc))
    module.exit_json(changed=False, **res)


if __name__ == "__main__":
    main()
