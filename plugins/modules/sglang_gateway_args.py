#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang contributors
# Apache-2.0 (see LICENSE)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: sglang_gateway_args
short_description: Read the installed smg gateway's own argument parser and validate launch flags against it
version_added: "0.1.0"
description:
  - Runs the gateway venv's python, imports the installed C(smg) and builds the parser C(smg launch) uses
    (C(smg.router_args.RouterArgs.add_cli_args(parser, use_router_prefix=False))). Returns the smg version, the
    C(--policy) choices and every option.
  - With O(args), parses them with smg's own C(smg.launch_router.parse_router_args) and runs
    C(RouterArgs._validate_router_args()); fails with smg's own message when they are refused. The flags are also
    checked option by option (known flag, switch or value, choices) with the rules of
    C(plugins/module_utils/_server_flags.validate_args).
  - The logic lives in C(plugins/module_utils/_gateway.py).
author:
  - blackwell.sglang maintainers (@blackwell-sglang)
options:
  python:
    description: Python interpreter of the venv smg is installed in.
    type: path
    required: true
  args:
    description: C(smg launch) arguments to validate (never the API key). Empty means "only read the parser".
    type: list
    elements: str
    default: []
  timeout:
    description: Seconds allowed for the python run.
    type: int
    default: 120
extends_documentation_fragment:
  - blackwell.sglang.attributes.READ_ONLY
notes:
  - Read-only; never changes the host.
"""

EXAMPLES = r"""
- name: Validate the gateway flags against the installed smg
  blackwell.sglang.sglang_gateway_args:
    python: /opt/sglang-gateway/venv/bin/python
    args: [--host, 0.0.0.0, --port, "8000", --worker-urls, "http://10.0.0.11:30000", --policy, cache_aware]
  register: gateway_parser
"""

RETURN = r"""
version:
  description: Installed smg version.
  returned: success
  type: str
  sample: 1.13.0
policies:
  description: The C(--policy) choices of the installed smg.
  returned: success
  type: list
  elements: str
  sample: [random, round_robin, cache_aware, power_of_two]
flags:
  description: Every option string the parser knows, with C(takes_value) and C(choices) (null = free value).
  returned: success
  type: dict
validated:
  description: The flags of O(args) as checked (flag, parser option, value).
  returned: success
  type: list
  elements: dict
"""

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.blackwell.sglang.plugins.module_utils import _gateway
from ansible_collections.blackwell.sglang.plugins.module_utils import _server_flags


def main():
    module = AnsibleModule(
        argument_spec=dict(
            python=dict(type="path", required=True),
            args=dict(type="list", elements="str", default=[]),
            timeout=dict(type="int", default=120),
        ),
        supports_check_mode=True,
    )
    p = module.params
    if not os.access(p["python"], os.X_OK):
        module.fail_json(msg="%s is not an executable python (is the smg venv installed?)" % p["python"])
    rc, out, err, data = _server_flags.run_introspection(module, p["python"], _gateway.INTROSPECT_SCRIPT, p["args"],
                                                         p["timeout"])
    if data is None:
        module.fail_json(msg="cannot read the installed smg's parser with %s (rc %s): %s"
                         % (p["python"], rc, (err or out)[-1500:]))
    if data.get("import_error") or not data.get("actions"):
        module.fail_json(msg="cannot import smg with %s: %s" % (p["python"], data.get("import_error")))
    spec = _server_flags.parser_spec_from_actions(data["actions"])
    revision = "smg %s" % (data.get("version") or "unknown version")
    result = dict(changed=False, version=data.get("version"), policies=data.get("policies") or [],
                  flags=_server_flags.flag_table(spec))
    if p["args"]:
        try:
            result["validated"] = _server_flags.validate_args(p["args"], spec, revision)
        except (_server_flags.FlagError, ValueError) as exc:
            result.pop("flags")
            module.fail_json(msg=str(exc), **result)
        if data.get("parse_error"):
            result.pop("flags")
            module.fail_json(msg="%s refuses the gateway flags: %s" % (revision, data["parse_error"]), **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
