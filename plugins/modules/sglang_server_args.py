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
  - With O(settings), plans the server first and validates the plan (the sglang_service role's one call); it chooses the
    FP4 backends (the pins, else the probe's recommendation, else the fallbacks), plans this host's place in a
    multi-node server (O(multinode)), merges the computed flags and environment with the inventory's (the inventory
    wins), renders the C(launch_server) argv, refuses a chosen FP4 backend the probe found broken on this host (with
    the probe's evidence) and warns about crash-prone speculative decoding (N06), a missing C(TRITON_PTXAS_PATH) on
    compute capability 12.x (N01), the fallback backends and every computed value the inventory overrides.
  - With O(stamp_dir), a validation already done for the same argv, compute capability, stand-ins, O(stamp_inputs)
    and installed SGLang distribution closure is taken from its stamp instead of importing SGLang again (seconds on
    every run); a changed flag, an SGLang or dependency upgrade or another interpreter validates again.
  - The logic lives in C(plugins/module_utils/_server_flags.py) and C(plugins/module_utils/_multinode.py).
author:
  - blackwell.sglang maintainers (@blackwell-sglang)
options:
  python:
    description:
      - Python interpreter of the venv SGLang is installed in.
      - Omitted (with neither O(args) nor O(settings)), only O(multinode) is planned and checked.
    type: path
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
  settings:
    description:
      - Render the argv from these C(launch_server) settings instead of taking O(args) (C(_server_flags.render_server_args)
        names the keys; C(extra_args) are the inventory's tokens). C(nnodes), C(node_rank), C(dist_init_addr),
        C(fp4_gemm_backend) and C(moe_runner_backend) come from O(multinode) and O(fp4_backends).
      - In check mode on a host whose venv does not exist yet the plan is returned without the parser validation.
    type: dict
  computed_args:
    description: Flags computed by preflight, merged under C(settings.extra_args) (a flag given there wins).
    type: list
    elements: str
    default: []
  computed_env:
    description: Environment computed by preflight; O(env) wins a key. Returned merged as RV(env).
    type: dict
    default: {}
  env:
    description: The inventory's NCCL environment, merged over O(computed_env).
    type: dict
    default: {}
  extra_env:
    description: Further environment the unit renders after RV(env) (model and extra environment); only read for the
      C(TRITON_PTXAS_PATH) warning.
    type: dict
    default: {}
  fp4_backends:
    description: C(fp4_gemm_backend) / C(moe_runner_backend) pins (empty = the probe's recommendation) and their
      C(fallback_gemm_backend) / C(fallback_moe_runner_backend) when no probe result recommends one.
    type: dict
    default: {}
  render_fp4_flags:
    description: Whether the chosen FP4 backends are rendered as flags (they are checked against the probe either way).
    type: bool
    default: true
  fp4_probe:
    description: The FP4 probe's result (C(sglang_stack_probe_result)); a chosen backend it found broken is refused.
    type: dict
    default: {}
  multinode:
    description:
      - One server over several hosts; C(members) empty = single-node. Keys as
        C(_multinode.plan_multinode) takes them (C(members), C(host), C(tp_size), C(ranks), C(addresses),
        C(release_ids), C(batch), C(dist_init_addr), C(dist_init_port)), and C(group) with the inventory's
        C(groups); a group name the inventory does not have is refused.
    type: dict
  reference_args:
    description: Tokens appended to the argv for the parser validation only (the launcher adds C(--api-key) in-process).
    type: list
    elements: str
    default: []
  stamp_dir:
    description: Directory of the validation stamps (one per argv); unset, the parser is read every time.
    type: path
  stamp_inputs:
    description: Further inputs of the stamp (for example a hash of the validating code).
    type: raw
    default: {}
extends_documentation_fragment:
  - blackwell.sglang.attributes.READ_ONLY
notes:
  - Never changes the host; with O(stamp_dir) it writes the validation stamp (outside check mode, reported as
    C(changed=false), a cache of the check, not configuration).
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
argv:
  description: The rendered argv (with O(settings)), without O(reference_args).
  returned: with O(settings)
  type: list
  elements: str
multinode:
  description: This host's multi-node plan (C(enabled), C(nnodes), C(node_rank), C(leader), C(dist_init_addr),
    C(tp_per_node), C(members)).
  returned: with O(settings)
  type: dict
fp4_backends:
  description: The chosen C(fp4_gemm_backend), C(moe_runner_backend) and their C(source).
  returned: with O(settings)
  type: dict
env:
  description: O(computed_env) merged with O(env).
  returned: with O(settings)
  type: dict
overridden:
  description: Computed values the inventory gives another value (C(flag --x), C(env NAME)).
  returned: with O(settings)
  type: list
  elements: str
validation:
  description: C(parser) (read now), C(stamp) (a matching stamp's copy) or C(skipped) (check mode, no venv yet).
  returned: success
  type: str
parser:
  description: What the validation found (C(version), C(commit), C(commit_source), C(revision), C(method),
    C(stubbed_modules), C(backends)); null when skipped.
  returned: success
  type: dict
"""

import hashlib
import json
import os
import re

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.blackwell.sglang.plugins.module_utils import _multinode
from ansible_collections.blackwell.sglang.plugins.module_utils import _server_flags as flags_util
from ansible_collections.blackwell.sglang.plugins.module_utils import _venv_state as venv_state
from ansible_collections.blackwell.sglang.plugins.module_utils import fp4_numerics

PARSER_KEYS = ("version", "commit", "commit_source", "revision", "method", "stubbed_modules", "backends")


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


def choose_fp4_backends(pins, probe):
    """The pins, else the probe's recommendation, else the fallbacks; ``source`` says which."""
    recommended = (probe or {}).get("recommended") or {}
    chosen = {}
    for key, fallback in (("fp4_gemm_backend", "fallback_gemm_backend"),
                          ("moe_runner_backend", "fallback_moe_runner_backend")):
        chosen[key] = pins.get(key) or recommended.get(key) or pins.get(fallback) or ""
    if pins.get("fp4_gemm_backend") or pins.get("moe_runner_backend"):
        chosen["source"] = "pinned"
    elif recommended.get("fp4_gemm_backend") is not None:
        chosen["source"] = "sglang_stack_probe_result.recommended"
    else:
        chosen["source"] = "fallback (no passing probe result)"
    return chosen


def plan_multinode(module, multinode):
    """This host's place in the multi-node server (O(multinode)); fail_json names the group or the member."""
    group = multinode.get("group") or ""
    if group and group not in (multinode.get("groups") or []):
        module.fail_json(msg="sglang_stack_service_multinode_group is '%s' but the inventory has no such group (groups: %s)"
                         % (group, ", ".join(g for g in multinode.get("groups") or [] if g not in ("all", "ungrouped"))))
    try:
        plan = _multinode.plan_multinode(
            list(multinode.get("members") or []), multinode.get("host", ""), multinode.get("tp_size", 1),
            ranks=multinode.get("ranks"), addresses=multinode.get("addresses"),
            batch=None if multinode.get("batch") is None else list(multinode["batch"]),
            release_ids=multinode.get("release_ids"), dist_init_addr=multinode.get("dist_init_addr") or "",
            dist_init_port=int(multinode.get("dist_init_port") or 50000))
    except (_multinode.MultinodeError, ValueError, TypeError) as exc:
        module.fail_json(msg="sglang_service multi-node: %s" % exc)
    return plan


def plan_server(module, p):
    """The server's plan from O(settings): backends, multi-node place, merged flags and env, argv; warnings shown."""
    cc = p["compute_capability"]
    multinode = dict(p["multinode"] or {})
    plan = plan_multinode(module, multinode)
    backends = choose_fp4_backends(p["fp4_backends"], p["fp4_probe"])
    settings = dict(p["settings"])
    try:
        merged = flags_util.merge_extra_args(p["computed_args"], settings.get("extra_args") or [])
    except (flags_util.FlagError, ValueError, TypeError) as exc:
        module.fail_json(msg="sglang_service_extra_args: %s" % exc)
    settings.update(nnodes=plan["nnodes"], node_rank=plan["node_rank"], dist_init_addr=plan["dist_init_addr"],
                    extra_args=merged["args"],
                    fp4_gemm_backend=backends["fp4_gemm_backend"] if p["render_fp4_flags"] else "",
                    moe_runner_backend=backends["moe_runner_backend"] if p["render_fp4_flags"] else "")
    try:
        argv = flags_util.render_server_args(settings)
        flags_util.check_backends(list(argv), cc or None)
        evidence = [fp4_numerics.pinned_flag_verdict(p["fp4_probe"], flag, backends[flag])
                    for flag in ("fp4_gemm_backend", "moe_runner_backend")]
    except (flags_util.FlagError, ValueError, TypeError) as exc:
        module.fail_json(msg="sglang_service: %s" % exc)
    evidence = [found for found in evidence if found]
    if evidence:
        module.fail_json(msg="sglang_service: %s -- evidence: %s" % (
            "; ".join(found["message"] for found in evidence), json.dumps(evidence, sort_keys=True)), evidence=evidence)
    env = dict(p["computed_env"], **p["env"])
    overridden = ["flag " + flag for flag in merged["overridden"]] + [
        "env " + key for key in sorted(p["env"]) if key in p["computed_env"]
        and str(p["env"][key]) != str(p["computed_env"][key])]
    if overridden:
        module.warn("the inventory overrides computed safety settings: %s (sglang_service_extra_args / "
                    "sglang_service_nccl_env win over sglang_stack_service_args / sglang_stack_service_env)"
                    % ", ".join(overridden))
    if backends["source"].startswith("fallback"):
        module.warn("No passing FP4 probe result on %s: rendering the fallback backends %s / %s" % (
            multinode.get("host", ""), backends["fp4_gemm_backend"], backends["moe_runner_backend"]))
    # Triton runs its bundled ptxas without TRITON_PTXAS_PATH, and that one may not know sm_12Xa (N01)
    if re.match(r"^12\.[0-9]+$", cc) and not dict(env, **p["extra_env"]).get("TRITON_PTXAS_PATH"):
        module.warn("TRITON_PTXAS_PATH is not set for compute capability %s: Triton would run its bundled ptxas, which "
                    "may not know sm_%sa (N01); set it to <CUDA_HOME>/bin/ptxas" % (cc, cc.replace(".", "")))
    for finding in flags_util.spec_decode_findings(settings):
        module.warn(finding["message"])
    return dict(argv=argv, multinode=plan, fp4_backends=backends, env=env, overridden=overridden)


def stamp_path(stamp_dir, inputs):
    """One stamp per validated argv: a check of a staged release and the service's own run may validate two argv."""
    digest = hashlib.sha256(json.dumps(inputs, sort_keys=True).encode("utf-8")).hexdigest()[:16]
    return os.path.join(stamp_dir, "sglang_service-parser-%s.json" % digest)


def validate(module, p, args, result):
    """Validate ``args`` against the installed parser into ``result`` (``validation``, ``parser`` and the details)."""
    spec, info = read_parser(module, p["python"], p["stub_modules"], p["timeout"])
    revision = "sglang %s (commit %s)" % (info.get("version") or "unknown version",
                                          (info.get("commit") or "unknown")[:12])
    result.update(revision=revision, method=info.get("method"), version=info.get("version"),
                  commit=info.get("commit"), commit_source=info.get("commit_source"),
                  stubbed_modules=info.get("stubbed_modules") or [], flags=flags_util.flag_table(spec))
    if args:
        try:
            result["backends"] = flags_util.check_backends(args, p["compute_capability"] or None)
            flags_util.check_draft_quantization_choice(args, spec, revision)
            result["validated"] = flags_util.validate_args(args, spec, revision)
        except (flags_util.FlagError, ValueError) as exc:
            result.pop("flags")
            module.fail_json(msg=str(exc), flag=getattr(exc, "flag", None), value=getattr(exc, "value", None),
                             **result)
    result.update(validation="parser", parser=dict((key, result.get(key)) for key in PARSER_KEYS))


def main():
    module = AnsibleModule(
        argument_spec=dict(
            python=dict(type="path"),
            args=dict(type="list", elements="str", default=[]),
            compute_capability=dict(type="str", default=""),
            stub_modules=dict(type="list", elements="str", default=[]),
            timeout=dict(type="int", default=180),
            settings=dict(type="dict"),
            computed_args=dict(type="list", elements="str", default=[]),
            computed_env=dict(type="dict", default={}),
            env=dict(type="dict", default={}),
            extra_env=dict(type="dict", default={}),
            fp4_backends=dict(type="dict", default={}),
            render_fp4_flags=dict(type="bool", default=True),
            fp4_probe=dict(type="dict", default={}),
            multinode=dict(type="dict"),
            reference_args=dict(type="list", elements="str", default=[]),
            stamp_dir=dict(type="path"),
            stamp_inputs=dict(type="raw", default={}),
        ),
        mutually_exclusive=[("args", "settings")],
        supports_check_mode=True,
    )
    p = module.params
    result = dict(changed=False, validation="skipped", parser=None)
    args = p["args"]
    if p["python"] is None:
        if args or p["settings"] is not None:
            module.fail_json(msg="python (the SGLang venv's interpreter) is required to validate flags")
        module.exit_json(multinode=plan_multinode(module, dict(p["multinode"] or {})), **result)
    if p["settings"] is not None:
        result.update(plan_server(module, p))
        args = result["argv"] + p["reference_args"]
        if module.check_mode and not os.path.exists(p["python"]):
            module.exit_json(**result)
    if not os.access(p["python"], os.X_OK):
        module.fail_json(msg="%s is not an executable python (is the SGLang venv installed?)" % p["python"])
    stamp = state = None
    if p["stamp_dir"]:
        inputs = dict(args=args, compute_capability=p["compute_capability"], stub_modules=p["stub_modules"],
                      extra=p["stamp_inputs"])
        stamp = dict(path=stamp_path(p["stamp_dir"], inputs), inputs=venv_state.inputs_digest(inputs, p["python"]))
        try:
            state = venv_state.read_state(lambda argv: module.run_command(argv, errors="replace"), p["python"],
                                          (), ["sglang"])
        except RuntimeError:
            state = None
        if state is not None:
            loaded = venv_state.load_stamp(stamp["path"])
            matched = venv_state.evaluate(loaded, stamp["inputs"], state, {})[0]
            if matched and loaded.get("result"):
                result.update(validation="stamp", parser=loaded["result"])
                module.exit_json(**result)
    validate(module, p, args, result)
    if stamp and state is not None and not module.check_mode:
        try:
            venv_state.write_stamp(stamp["path"], venv_state.build_stamp(stamp["inputs"], state, {}, result["parser"]))
        except (IOError, OSError) as exc:
            module.warn("cannot write the validation stamp %s: %s" % (stamp["path"], exc))
    module.exit_json(**result)


if __name__ == "__main__":
    main()
