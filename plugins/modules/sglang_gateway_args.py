#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang contributors
# Apache-2.0 (see LICENSE)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: sglang_gateway_args
short_description: Check the gateway settings, render the smg launch flags, validate them with the installed smg
version_added: "0.1.0"
description:
  - With O(settings) (the role's use), first the checks that need no smg, naming the variable - an empty API key
    on a gateway that other hosts reach, ports distinct and in range, no clash with SGLang's port on a gateway host
    that is also a worker, no loopback-only worker behind a gateway on another host - then renders the C(smg launch)
    argv (never the API key), returned as RV(argv) and validated as O(args) would be.
  - Runs the gateway venv's python, imports the installed C(smg) and builds the parser C(smg launch) uses
    (C(smg.router_args.RouterArgs.add_cli_args(parser, use_router_prefix=False))). Returns the smg version, the
    C(--policy) choices and every option.
  - With O(args) (or O(settings)), parses them with smg's own C(smg.launch_router.parse_router_args) and runs
    C(RouterArgs._validate_router_args()); fails with smg's own message when they are refused. The flags are also
    checked option by option (known flag, switch or value, choices) with the rules of
    C(plugins/module_utils/_server_flags.validate_args).
  - With O(version), an installed smg of another version fails (after the policy and the flags).
  - With O(before_install), a missing venv, an smg that cannot be read or one other than O(version) is not checked
    (the install replaces it). So a re-run refuses bad settings before any change, and a first run does not need smg
    yet.
    Without it, a missing venv is skipped only in check mode (the install was only simulated).
  - The logic lives in C(plugins/module_utils/_gateway.py).
author:
  - blackwell.sglang maintainers (@blackwell-sglang)
options:
  python:
    description: Python interpreter of the venv smg is installed in.
    type: path
    required: true
  args:
    description:
      - C(smg launch) arguments to validate (never the API key). Empty means "only read the parser".
      - Ignored with O(settings), whose argv is validated instead.
    type: list
    elements: str
    default: []
  settings:
    description:
      - The gateway settings (C(host), C(port), C(policy), C(prometheus_host), C(prometheus_port), the health, retry
        and timeout settings, C(log_level), C(extra_args)), as C(module_utils/_gateway.render_args) reads them.
      - Errors name the role variable (C(sglang_gateway_<key>)).
    type: dict
  workers:
    description: The gateway's workers (C(workers) of C(blackwell.sglang.sglang_gateway_workers)), with O(settings).
    type: list
    elements: dict
    default: []
  servers:
    description: The servers (C(servers) of C(blackwell.sglang.sglang_gateway_workers)), for the port and bind checks.
    type: list
    elements: dict
    default: []
  gateway_host:
    description: Inventory name of the gateway host O(settings) are for; omitted, only the argv is rendered.
    type: str
  api_key_given:
    description: Whether the gateway has an API key (the key itself never reaches this module).
    type: bool
    default: true
  require_api_key:
    description: Refuse O(api_key_given=false) unless the gateway listens on loopback only.
    type: bool
    default: false
  version:
    description: The pinned smg version; another installed version fails (C(sglang_gateway_version)).
    type: str
  before_install:
    description: Validate only an smg that is already the O(version) (see the description).
    type: bool
    default: false
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

- name: Check the settings for this gateway, render its flags and validate them with the smg already installed
  blackwell.sglang.sglang_gateway_args:
    python: /opt/sglang-gateway/venv/bin/python
    settings: {host: 0.0.0.0, port: 8000, policy: cache_aware, prometheus_port: 29000}
    workers: "{{ plan.workers }}"
    servers: "{{ plan.servers }}"
    gateway_host: "{{ inventory_hostname }}"
    version: 1.13.0
    before_install: true
  register: gateway_flags
"""

RETURN = r"""
argv:
  description: The C(smg launch) argv of O(settings) (never the API key).
  returned: with O(settings)
  type: list
  elements: str
installed:
  description: Whether the installed smg was read (false - nothing was validated against it).
  returned: success
  type: bool
version:
  description: Installed smg version.
  returned: when smg was read
  type: str
  sample: 1.13.0
policies:
  description: The C(--policy) choices of the installed smg.
  returned: when smg was read
  type: list
  elements: str
  sample: [random, round_robin, cache_aware, power_of_two]
flags:
  description: Every option string the parser knows, with C(takes_value) and C(choices) (null = free value).
  returned: when smg was read
  type: dict
validated:
  description: The flags as checked (flag, parser option, value).
  returned: when smg was read and flags were given
  type: list
  elements: dict
"""

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.blackwell.sglang.plugins.module_utils import _gateway
from ansible_collections.blackwell.sglang.plugins.module_utils import _server_flags

# the role's settings: a failure of the installed smg's run names them (the policy and the version name their own)
_SETTINGS = "sglang_gateway settings (sglang_gateway_extra_args and the rest): "


def _plan(module, p):
    """The checks that need no smg and the argv of O(settings); a refusal names the variable."""
    settings = dict(p["settings"])
    problem = _gateway.api_key_problem(p["api_key_given"], p["require_api_key"], settings.get("host"))
    if problem:
        module.fail_json(msg=problem)
    try:
        if p["gateway_host"] is not None:
            servers = list(p["servers"])
            _gateway.check_settings(p["gateway_host"], list(p["workers"]), settings, None,
                                    dict((s["host"], s.get("service_port")) for s in servers),
                                    dict((s["host"], s.get("service_host")) for s in servers))
        return _gateway.render_args(settings, list(p["workers"]))
    except (_gateway.GatewayError, KeyError, TypeError, ValueError) as exc:
        module.fail_json(msg="sglang_gateway: %s" % exc)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            python=dict(type="path", required=True),
            args=dict(type="list", elements="str", default=[]),
            settings=dict(type="dict"),
            workers=dict(type="list", elements="dict", default=[]),
            servers=dict(type="list", elements="dict", default=[]),
            gateway_host=dict(type="str"),
            api_key_given=dict(type="bool", default=True),
            require_api_key=dict(type="bool", default=False),
            version=dict(type="str"),
            before_install=dict(type="bool", default=False),
            timeout=dict(type="int", default=120),
        ),
        supports_check_mode=True,
    )
    p = module.params
    role = p["settings"] is not None
    result = dict(changed=False, installed=False)
    args = p["args"]
    if role:
        args = result["argv"] = _plan(module, p)
    prefix = _SETTINGS if role else ""
    if not os.access(p["python"], os.X_OK):
        if p["before_install"] or module.check_mode:
            module.exit_json(**result)                 # nothing installed yet (a check run only simulated it)
        module.fail_json(msg="%s%s is not an executable python (is the smg venv installed?)" % (prefix, p["python"]),
                         **result)
    rc, out, err, data = _server_flags.run_introspection(module, p["python"], _gateway.INTROSPECT_SCRIPT, args,
                                                         p["timeout"])
    if data is None or data.get("import_error") or not data.get("actions"):
        if p["before_install"]:
            module.exit_json(**result)                 # the install replaces an smg that cannot be read
        if data is None:
            module.fail_json(msg="%scannot read the installed smg's parser with %s (rc %s): %s"
                             % (prefix, p["python"], rc, (err or out)[-1500:]), **result)
        module.fail_json(msg="%scannot import smg with %s: %s" % (prefix, p["python"], data.get("import_error")),
                         **result)
    version = data.get("version")
    if p["before_install"] and p["version"] is not None and version != p["version"]:
        module.exit_json(version=version, **result)    # the install replaces another version
    spec = _server_flags.parser_spec_from_actions(data["actions"])
    revision = "smg %s" % (version or "unknown version")
    policies = data.get("policies") or []
    result.update(installed=True, version=version, policies=policies)
    policy = str(p["settings"].get("policy")) if role else None
    if role and policy not in policies:
        module.fail_json(msg="sglang_gateway_policy: %s is not a routing policy of the installed smg %s (choices: %s)"
                         % (policy, version or "?", ", ".join(policies)), **result)
    if args:
        try:
            result["validated"] = _server_flags.validate_args(args, spec, revision)
        except (_server_flags.FlagError, ValueError) as exc:
            module.fail_json(msg=prefix + str(exc), **result)
        if data.get("parse_error"):
            module.fail_json(msg="%s%s refuses the gateway flags: %s" % (prefix, revision, data["parse_error"]),
                             **result)
    if p["version"] is not None and version != p["version"]:
        module.fail_json(msg="sglang_gateway_version: %s pinned, the venv %s has smg %s"
                         % (p["version"], os.path.dirname(os.path.dirname(p["python"])), version), **result)
    result["flags"] = _server_flags.flag_table(spec)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
