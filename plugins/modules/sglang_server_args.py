#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang contributors
# Apache-2.0 (see LICENSE)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: sglang_server_args
short_description: Read the installed SGLang's own launch_server parser and validate flags against it
version_added: "0.1.0"
description:
  - Runs the service venv's python, imports the installed C(sglang.srt.server_args) and builds the same argparse
    parser C(prepare_server_args) builds (C(ServerArgs.add_cli_args)); falls back to parsing
    C(python -m sglang.launch_server --help) when that fails. Returns every known flag with its choices, the SGLang
    version and, when it can be found, the commit (C(sglang._version.__commit_id__), the C(direct_url.json) VCS
    record, or C(git rev-parse) in the source tree it was installed from).
  - With O(args), validates every flag and choice against that parser with argparse's own rules (exact option,
    unambiguous prefix, C(--flag=value), switches take no value) and applies the compute-capability allow-list
    (no C(fa3), C(trtllm_mha), C(trtllm_mla), C(flashinfer_trtllm), C(flashinfer_cutedsl), and no C(auto) backend
    on compute capability 12.x). A failure names the flag, the value and the SGLang revision.
  - The logic lives in C(plugins/module_utils/_server_flags.py).
author:
  - blackwell.sglang maintainers (@blackwell-sglang)
options:
  python:
    description: Python interpreter of the venv SGLang is installed in.
    type: path
    required: true
  args:
    description: Rendered C(launch_server) arguments to validate. Empty means "only read the parser".
    type: list
    elements: str
    default: []
  compute_capability:
    description: Compute capability the arguments are for (e.g. C(12.0)); empty skips the allow-list.
    type: str
    default: ""
  stub_modules:
    description:
      - Top-level modules that may be replaced by empty stand-ins if, and only if, importing them fails while
        importing C(sglang.srt.server_args). Meant for CPU-only sandboxes where e.g. C(torchvision) from PyPI
        cannot load against a CPU torch. Argument parsing never calls into them. Stand-ins used are returned
        in RV(stubbed_modules).
    type: list
    elements: str
    default: []
  timeout:
    description: Seconds allowed for each python run (importing SGLang takes several seconds).
    type: int
    default: 180
extends_documentation_fragment:
  - blackwell.sglang.attributes.READ_ONLY
notes:
  - Read-only; never changes the host.
"""

EXAMPLES = r"""
- name: Validate the rendered flags against the installed SGLang
  blackwell.sglang.sglang_server_args:
    python: /opt/sglang/current/venv/bin/python
    compute_capability: "12.0"
    args:
      - --model-path
      - /srv/models/qwen
      - --attention-backend
      - flashinfer
      - --fp4-gemm-backend
      - flashinfer_cudnn
  register: sglang_parser
"""

RETURN = r"""
version:
  description: Installed SGLang version.
  returned: success
  type: str
  sample: 0.5.9
commit:
  description: SGLang commit the package was built from, or null when unknown.
  returned: success
  type: str
commit_source:
  description: Where the commit came from.
  returned: success
  type: str
revision:
  description: Human-readable revision used in messages.
  returned: success
  type: str
  sample: sglang 0.5.9 (commit unknown)
method:
  description: C(ServerArgs.add_cli_args) or C(launch_server --help).
  returned: success
  type: str
stubbed_modules:
  description: Modules replaced by stand-ins while importing (see O(stub_modules)).
  returned: success
  type: list
  elements: str
flags:
  description: Every option string the parser knows, with C(takes_value) and C(choices) (null = free value).
  returned: success
  type: dict
  sample: {"--kv-cache-dtype": {"takes_value": true, "choices": ["auto", "bf16"]}}
validated:
  description: The flags of O(args) as checked (flag, parser option, value).
  returned: success
  type: list
  elements: dict
backends:
  description: Backend flags found in O(args) after the allow-list check.
  returned: success
  type: dict
"""

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.blackwell.sglang.plugins.module_utils import _server_flags as flags_util


def read_parser(module, python, stub_modules, timeout):
    """Return (spec, info) from the installed SGLang; fail_json when neither method works.

    Each python run is bounded by coreutils ``timeout`` (when present) so a hanging import cannot hang the play.
    """
    rc, out, err, data = flags_util.run_introspection(module, python, flags_util.INTROSPECT_SCRIPT, stub_modules, timeout)
    info = {"stubbed_modules": [], "commit": None, "commit_source": None, "version": None}
    errors = []
    if rc == 0:
        if data is None:
            errors.append("introspection printed no JSON: %s" % (out[-500:] or err[-500:]))
    else:
        data = None
        errors.append("introspection exited %s: %s" % (rc, err[-1500:]))
    if data:
        info.update({k: data.get(k) for k in ("version", "commit", "commit_source", "stubbed_modules")})
        if data.get("actions"):
            spec = flags_util.parser_spec_from_actions(data["actions"], allow_abbrev=data.get("allow_abbrev", True))
            info["method"] = data.get("method")
            return spec, info
        errors.append(data.get("import_error") or "no parser actions")
    rc, out, err = flags_util.run_bounded(module, [python, "-m", "sglang.launch_server", "--help"], timeout,
                                          {"COLUMNS": "200"})
    if rc == 0 and "--model-path" in out:
        info["method"] = "launch_server --help"
        return flags_util.parse_help_text(out), info
    errors.append("launch_server --help exited %s: %s" % (rc, (err or out)[-1500:]))
    module.fail_json(msg="cannot read the installed SGLang's argument parser with %s" % python, errors=errors,
                     **info)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            python=dict(type="path", required=True),
            args=dict(type="list", elements="str", default=[]),
            compute_capability=dict(type="str", default=""),
            stub_modules=dict(type="list", elements="str", default=[]),
            timeout=dict(type="int", default=180),
        ),
        supports_check_mode=True,
    )
    p = module.params
    if not os.access(p["python"], os.X_OK):
        module.fail_json(msg="%s is not an executable python (is the SGLang venv installed?)" % p["python"])
    spec, info = read_parser(module, p["python"], p["stub_modules"], p["timeout"])
    revision = "sglang %s (commit %s)" % (info.get("version") or "unknown version",
                                          (info.get("commit") or "unknown")[:12])
    result = dict(changed=False, revision=revision, method=info.get("method"), version=info.get("version"),
                  commit=info.get("commit"), commit_source=info.get("commit_source"),
                  stubbed_modules=info.get("stubbed_modules") or [],
                  flags=flags_util.flag_table(spec))
    args = p["args"]
    if args:
        try:
            result["backends"] = flags_util.check_backends(args, p["compute_capability"] or None)
            flags_util.check_draft_quantization_choice(args, spec, revision)
            result["validated"] = flags_util.validate_args(args, spec, revision)
        except (flags_util.FlagError, ValueError) as exc:
            result.pop("flags")
            module.fail_json(msg=str(exc), flag=getattr(exc, "flag", None), value=getattr(exc, "value", None),
                             **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
