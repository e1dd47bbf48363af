#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang contributors
# Apache-2.0 (see LICENSE)
"""Module blackwell.sglang.sglang_tool_call_smoke: thin wrapper around module_utils._tool_call."""

from __future__ import annotations

DOCUMENTATION = r"""
---
module: sglang_tool_call_smoke
short_description: Send one tool-use request (or one plain generation) to the OpenAI-compatible endpoint and judge it
version_added: "0.1.0"
description:
  - With O(prompt), sends that one plain chat completion instead (the service's smoke generation) and passes when it
    has a choice and at least one completion token; fails C(no_tokens) otherwise.
  - Posts one chat completion with a trivial function (C(get_current_weather)) and C(tool_choice=auto) to
    O(url) and judges the answer (field report N08 in docs/field-reports.md).
  - Passes when C(choices[0].message.tool_calls) calls the function. Fails C(tool_call_in_reasoning) when
    C(tool_calls) is empty and the tool-call markup (C(<tool_call>), C(<function=), C([TOOL_CALLS]), ...) sits in
    C(reasoning_content) (Qwen3.5 with C(--reasoning-parser qwen3 --tool-call-parser qwen3_coder), sglang#26172),
    C(tool_call_unparsed) when it sits in C(content), C(no_tool_call) when the model did not call the tool, and
    C(bad_response) for anything that is not a chat completion.
  - The logic lives in C(plugins/module_utils/_tool_call.py).
author:
  - blackwell.sglang maintainers (@blackwell-sglang)
options:
  url:
    description: Chat-completions URL, e.g. C(http://127.0.0.1:30000/v1/chat/completions).
    type: str
    required: true
  model:
    description: Model name sent in the request (the served model name).
    type: str
    required: true
  api_key:
    description: Bearer token; sent in the C(Authorization) header, never logged.
    type: str
    default: ""
  timeout:
    description:
      - Seconds for the request.
      - A request without an answer (refused, DNS, timeout, TLS) or with an HTTP error fails with a message naming
        the URL, what failed, the variable that sets it and what to check.
    type: int
    default: 300
  prompt:
    description: A plain generation with this user message instead of the tool-use request.
    type: str
  max_tokens:
    description: C(max_tokens) of the request (reasoning models need room to think before calling).
    type: int
    default: 512
attributes:
  check_mode:
    description: Can run in check mode and return changed status prediction without modifying target.
    support: none
    details: Sends a request to the server; skipped in check mode by the role.
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in check mode), when in diff mode.
    support: none
notes:
  - Changes nothing; the request is one generation.
"""

EXAMPLES = r"""
- name: Check that tool calls are parsed
  blackwell.sglang.sglang_tool_call_smoke:
    url: http://127.0.0.1:30000/v1/chat/completions
    model: qwen3.5
"""

RETURN = r"""
verdict:
  description: C(pass), C(tool_call_in_reasoning), C(tool_call_unparsed), C(no_tool_call), C(bad_response) or (with
    O(prompt)) C(no_tokens).
  returned: always
  type: str
ok:
  description: True when the verdict is C(pass).
  returned: always
  type: bool
message:
  description: What was found.
  returned: always
  type: str
remedy:
  description: What to do (empty on C(pass)).
  returned: always
  type: str
tool_calls:
  description: Names of the functions in C(tool_calls).
  returned: always
  type: list
  elements: str
evidence:
  description: Excerpt around the tool-call markup found outside C(tool_calls), or null.
  returned: always
  type: str
status:
  description: HTTP status of the answer (null when there was none).
  returned: always
  type: int
"""

import json

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.urls import open_url
from ansible.module_utils.six.moves.http_client import HTTPException
from ansible.module_utils.six.moves.urllib.error import HTTPError, URLError

from ansible_collections.blackwell.sglang.plugins.module_utils import _net
from ansible_collections.blackwell.sglang.plugins.module_utils import _tool_call

URL_VAR = "url (the role builds it from sglang_stack_service_host and sglang_stack_service_port)"


def main():
    module = AnsibleModule(
        argument_spec=dict(
            url=dict(type="str", required=True),
            model=dict(type="str", required=True),
            api_key=dict(type="str", default="", no_log=True),
            timeout=dict(type="int", default=300),
            max_tokens=dict(type="int", default=512, no_log=False),
            prompt=dict(type="str"),
        ),
        supports_check_mode=False,
    )
    p = module.params
    headers = {"Content-Type": "application/json"}
    if p["api_key"]:
        headers["Authorization"] = "Bearer %s" % p["api_key"]
    what = "smoke generation request" if p["prompt"] is not None else "tool-call smoke request"
    body = json.dumps(_tool_call.generation_body(p["model"], p["prompt"], p["max_tokens"]) if p["prompt"] is not None
                      else _tool_call.request_body(p["model"], p["max_tokens"]))
    if p["timeout"] < 1:
        module.fail_json(msg="timeout must be >= 1 second; got %s" % p["timeout"])
    status, text = None, ""
    where = dict(variable=URL_VAR, credential="api_key (sglang_service_api_key)", timeout=p["timeout"],
                 timeout_var="timeout (sglang_service_smoke_timeout)", method="POST",
                 secrets=[p["api_key"]] if p["api_key"] else None)
    try:
        resp = open_url(p["url"], data=body, headers=headers, method="POST", timeout=p["timeout"], use_proxy=False,
                        validate_certs=True)
        status, text = resp.getcode(), resp.read().decode("utf-8", "replace")
    except HTTPError as exc:
        try:
            status, text = exc.code, exc.read().decode("utf-8", "replace") if exc.fp else ""
        except (OSError, HTTPException, ValueError):
            status, text = exc.code, ""
    except (URLError, OSError, HTTPException, ValueError) as exc:
        # refused, DNS, timeout (urllib raises it bare while reading), TLS, reset, a bad URL
        text = _net.message(what, p["url"], exc=exc, **where)[0]
        module.fail_json(msg="[bad_response] " + text, verdict="bad_response", ok=False, status=None, message=text,
                         remedy=_tool_call.REMEDIES["bad_response"],
                         tool_calls=[], evidence=None)
    if p["prompt"] is not None:
        result = _tool_call.generation_verdict(text if status == 200 else None, status)
    else:
        result = _tool_call.verdict(text if status == 200 else None)
    if status != 200:
        result["message"] = _net.message(what, p["url"], status=status, body=text, **where)[0]
    result["status"] = status
    if not result["ok"]:
        module.fail_json(msg="[%s] %s. Remedy: %s" % (result["verdict"], result["message"], result["remedy"]),
                         **result)
    module.exit_json(changed=False, msg=result["message"], **result)


if __name__ == "__main__":
    main()
