#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang contributors
# Apache-2.0 (see LICENSE)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: sglang_checkpoint_facts
short_description: Read a local checkpoint's quantisation and KV-scale facts and apply the KV-cache guard
version_added: "0.1.0"
description:
  - Reads C(config.json), C(hf_quant_config.json) or C(config.json) C(quantization_config), and the safetensors
    index C(model.safetensors.index.json) (or, without an index, every C(*.safetensors) header) of a Hugging Face
    checkpoint directory on the target. No tensor data is read.
  - Reports the quantisation algorithm, the KV-cache quantisation the checkpoint asks for (normalised, e.g. C(FP8)),
    whether calibrated C(k_scale)/C(v_scale) (or C(kv_scale)) tensors exist, the shard count and size.
  - Applies the KV-cache guard. SGLang's C(--kv-cache-dtype auto) turns on an FP8 KV cache when the checkpoint
    declares C(kv_cache_quant_algo=FP8) and silently uses scale 1.0 when the scales are missing (accuracy loss,
    field report B13). The guard picks C(bf16) then, with a warning. Forcing C(fp8_e4m3)/C(fp8_e5m2) without
    scales fails unless O(allow_fp8_without_scales=true). On compute capability 12.x the guard always picks
    C(bf16) by default and refuses C(auto).
  - Field reports part 2 (ids resolve in C(docs/field-reports.md)). An FP4 KV cache (C(fp4_e2m1), C(nvfp4), ...)
    is refused off the FP4-KV allow-list (compute capability 10.0 and 10.3 only), with the cause
    C(fp4_kv_unsupported_on_sm12x) on 12.x, unless O(allow_experimental_fp4_kv=true); a checkpoint that declares
    an FP4 KV cache never turns C(auto) into FP4 (N04).
  - Normalises the quantisation metadata (ModelOpt C(hf_quant_config.json), C(MIXED_PRECISION) with
    C(quantized_layers), compressed-tensors C(config_groups), the hybrid FP8 linear + NVFP4 MoE layout) into
    RV(quant) and names the C(--quantization) value to render in RV(quantization), checked against
    O(quantization_choices) when given; an unknown layout fails with C(quant_layout_unknown) (N12).
  - With O(context_length), checks it against the native window or the static-YaRN-extended one, refuses
    C(SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN) in O(env) without YaRN and warns when the tokenizer caps the
    context (N09).
  - With O(python) (the release venv), fails C(model_type_unsupported) when the installed transformers does not know
    the checkpoint's C(model_type) (N07), and warns when SGLang's model registry lacks its architectures (the registry
    leaves out models whose module fails to import, so absence is no proof); for a Hub id with
    C(HF_HUB_ENABLE_HF_TRANSFER) in O(env) fails C(hf_transfer_missing) when C(hf_transfer) does not import (N13).
  - With O(speculative) naming a draft model, reads the draft checkpoint and returns
    RV(speculative_draft_model_quantization) (C(unquant) for a BF16 draft, which would otherwise inherit the
    target's C(--quantization)) (N05).
  - A model path that does not start with C(/) is a Hub id; nothing is inspected, only the O(env) checks run.
  - The logic lives in C(plugins/module_utils/_checkpoint.py).
author:
  - blackwell.sglang maintainers (@blackwell-sglang)
options:
  model_path:
    description: Checkpoint directory on the target (the directory that holds C(config.json)).
    type: path
    required: true
  compute_capability:
    description: Compute capability of the GPUs that will serve the model, e.g. C(12.0). Empty means unknown.
    type: str
    default: ""
  kv_cache_dtype:
    description:
      - The operator's C(--kv-cache-dtype) choice. Empty means "let the guard decide".
    type: str
    default: ""
    choices: ["", auto, bf16, bfloat16, fp8_e4m3, fp8_e5m2, fp4_e2m1, nvfp4]
  allow_fp8_without_scales:
    description: Allow an FP8 KV cache although the checkpoint has no k/v scales (SGLang then uses 1.0).
    type: bool
    default: false
  allow_experimental_fp4_kv:
    description: Allow an FP4 KV cache on a GPU off the FP4-KV allow-list (experimental SM120 paths; garbage reported).
    type: bool
    default: false
  context_length:
    description: The context length that will be rendered (tokens); null skips the context check.
    type: int
  env:
    description: The service environment (the unit's variables), for the N09 and N13 checks.
    type: dict
    default: {}
  python:
    description: Python of the release venv; enables the model-type (N07) and C(hf_transfer) (N13) probes.
    type: path
  probe_sglang_registry:
    description: Also import SGLang's model registry in the O(python) probe (slower; imports every model file).
    type: bool
    default: true
  probe_timeout:
    description: Seconds for the O(python) probe.
    type: int
    default: 180
  stamp_dir:
    description:
      - Directory of the N07 probe's stamp. With it, the probe's reading of the registries is kept in a stamp keyed
        on the probe and on the installed closure of C(transformers) (and C(sglang) with O(probe_sglang_registry);
        the name, version and RECORD digest of each distribution), and taken from there while they match, instead of
        importing transformers and SGLang's models again (tens of seconds of CPU on a converged host). An upgrade,
        a reinstall or a removed package probes again. Unset, the probe runs every time.
    type: path
  quantization:
    description: The operator's C(--quantization); wins over the checkpoint's layout. Empty = from the checkpoint.
    type: str
    default: ""
  quantization_choices:
    description: The installed SGLang's C(--quantization) choices; the first candidate on this list is chosen.
    type: list
    elements: str
  speculative:
    description:
      - Speculative decoding settings (C(algorithm), C(draft_model_path), C(num_draft_tokens),
        C(draft_model_quantization)); empty = off.
    type: dict
    default: {}
  missing_ok:
    description:
      - When O(model_path) does not exist, return RV(checkpoint=null) and the guard's decision for an uninspected
        checkpoint (C(bf16) on compute capability 12.x, with a warning) instead of failing. For hosts where the
        model is copied later.
    type: bool
    default: false
extends_documentation_fragment:
  - blackwell.sglang.attributes.READ_ONLY
notes:
  - Never changes the host; with O(stamp_dir) it writes the N07 probe's stamp (outside check mode, reported as
    C(changed=false), a cache of the check, not configuration).
"""

EXAMPLES = r"""
- name: Inspect the checkpoint and decide the KV cache dtype
  blackwell.sglang.sglang_checkpoint_facts:
    model_path: /srv/models/Qwen3.5-397B-A17B-NVFP4
    compute_capability: "12.0"
  register: ckpt

- name: Show the decision
  ansible.builtin.debug:
    msg: "{{ ckpt.kv_cache.dtype }} ({{ ckpt.kv_cache.reason }})"
"""

RETURN = r"""
checkpoint:
  description: Facts read from the checkpoint directory (null when O(missing_ok) applied).
  returned: always
  type: dict
  contains:
    model_path: {description: "The directory inspected.", type: str}
    model_type: {description: "C(config.json) C(model_type).", type: str}
    architectures: {description: "C(config.json) C(architectures).", type: list, elements: str}
    head_dim:
      description: >-
        Attention head dimension (C(head_dim), else C(hidden_size / num_attention_heads)); below 64 the service renders
        C(--attention-backend triton) when none is set (S19).
      type: int
    torch_dtype: {description: "Weight dtype from C(config.json).", type: str}
    quant_method: {description: "C(modelopt) for C(hf_quant_config.json), else C(quantization_config.quant_method).", type: str}
    quant_algo: {description: "Normalised quantisation algorithm, e.g. C(NVFP4) or C(FP8).", type: str}
    kv_cache_quant_algo: {description: "Normalised KV-cache quantisation the checkpoint asks for (C(FP8)) or null.", type: str}
    quant_config_source: {description: "File the quantisation came from.", type: str}
    has_kv_scales: {description: "Both k and v scales (or a combined kv_scale) exist.", type: bool}
    kv_scale_tensors: {description: "Counts of C(.k_scale), C(.v_scale), C(.kv_scale) tensors.", type: dict}
    num_shards: {description: "Number of safetensors shard files.", type: int}
    total_bytes: {description: "Tensor bytes (index C(metadata.total_size)) or, without it, the shard file bytes.", type: int}
    shard_bytes_on_disk: {description: "Bytes of the shard files present.", type: int}
    missing_shards: {description: "Shards named by the index but absent.", type: list, elements: str}
    tensor_names_from: {description: "C(index) or C(headers).", type: str}
  sample:
    quant_algo: NVFP4
    kv_cache_quant_algo: FP8
    has_kv_scales: false
    num_shards: 2
    total_bytes: 1234
quant:
  description: The canonical quantisation record (C(layout), C(weights), C(weight_formats), C(activations), C(linear),
    C(moe), C(producer), C(methods), C(method)); null for an unquantised or uninspected checkpoint.
  returned: always
  type: dict
quantization:
  description: The C(--quantization) value to render (the operator's, or the checkpoint's), or null.
  returned: always
  type: str
context:
  description: The context check (C(limits) from the checkpoint, C(status), C(cause), C(messages), C(warnings)); null when skipped.
  returned: always
  type: dict
model_support:
  description:
    - The N07 verdict (C(status), C(cause), C(message), C(probe)); null without O(python).
    - C(probe) holds C(transformers_version), C(sglang_version), C(errors) and C(source) (C(probe) when the venv was
      imported now, C(stamp) when a matching stamp of O(stamp_dir) gave the reading).
  returned: always
  type: dict
speculative_draft_model_quantization:
  description: The value for C(--speculative-draft-model-quantization), or null without a draft model.
  returned: always
  type: str
recommended_kv_cache_dtype:
  description: What the guard recommends with no operator choice (C(bf16), C(fp8_e4m3) or C(auto)).
  returned: always
  type: str
  sample: bf16
quant_algo:
  description: Same as RV(checkpoint.quant_algo).
  returned: always
  type: str
kv_cache_quant_algo:
  description: Same as RV(checkpoint.kv_cache_quant_algo).
  returned: always
  type: str
has_kv_scales:
  description: Same as RV(checkpoint.has_kv_scales).
  returned: always
  type: bool
num_shards:
  description: Same as RV(checkpoint.num_shards).
  returned: always
  type: int
total_bytes:
  description: Same as RV(checkpoint.total_bytes).
  returned: always
  type: int
kv_cache:
  description: The guard's decision for O(kv_cache_dtype).
  returned: always
  type: dict
  contains:
    dtype: {description: "The value to render as C(--kv-cache-dtype).", type: str}
    reason: {description: "Why.", type: str}
    warnings: {description: "Warnings (also emitted as Ansible warnings).", type: list, elements: str}
"""

import hashlib
import json
import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.blackwell.sglang.plugins.module_utils import _checkpoint
from ansible_collections.blackwell.sglang.plugins.module_utils import _venv_state as venv_state
from ansible_collections.blackwell.sglang.plugins.module_utils._server_flags import parse_cc

HF_TRANSFER_PROBE = "import hf_transfer"


def _truthy(value):
    return str(value).strip().lower() in ("1", "true", "yes", "on")


def run_probe(module, python, argv, timeout):
    timeout_bin = module.get_bin_path("timeout")
    prefix = [timeout_bin, str(timeout)] if timeout_bin else []
    # tool output (JSON, or a traceback on failure): bytes that are not UTF-8 are replaced, never fatal
    return module.run_command(prefix + [python] + argv, cwd="/", environ_update={"PYTHONWARNINGS": "ignore"},
                              check_rc=False, errors="replace")


def check_hf_transfer(module, params, result):
    """N13: HF_HUB_ENABLE_HF_TRANSFER for a Hub download needs hf_transfer in the venv."""
    env = params["env"] or {}
    if params["model_path"].startswith("/") or not _truthy(env.get("HF_HUB_ENABLE_HF_TRANSFER", "")):
        return
    if not params["python"]:
        module.warn("HF_HUB_ENABLE_HF_TRANSFER is set for Hub id %s but no venv python was given to check that "
                    "hf_transfer imports (N13)" % params["model_path"])
        return
    rc, _out, err = run_probe(module, params["python"], ["-c", HF_TRANSFER_PROBE], params["probe_timeout"])
    if rc != 0:
        last = (err.strip().splitlines() or ["no output"])[-1]
        module.fail_json(msg="hf_transfer_missing: HF_HUB_ENABLE_HF_TRANSFER=%s is in the service environment for "
                             "the Hub id %s but %s cannot import hf_transfer (%s): every download would fail at "
                             "first start (N13). Drop the variable or install hf_transfer into the venv"
                         % (env.get("HF_HUB_ENABLE_HF_TRANSFER"), params["model_path"], params["python"], last),
                         cause="hf_transfer_missing", **result)


def read_model_support(module, params):
    """The registries the N07 check compares against: the probe's JSON (``transformers_version``,
    ``config_mapping``, ``sglang_version``, ``sglang_archs``, ``errors``) and where it came from (``probe`` or
    ``stamp``). A reading without errors is stamped (O(stamp_dir)); one with errors is never kept."""
    argv = ["-c", _checkpoint.MODEL_SUPPORT_PROBE, "1" if params["probe_sglang_registry"] else "0"]
    stamp = state = None
    if params["stamp_dir"]:
        inputs = {"probe": argv}
        digest = hashlib.sha256(json.dumps(inputs, sort_keys=True).encode("utf-8")).hexdigest()[:16]
        stamp = dict(path=os.path.join(params["stamp_dir"], "sglang_service-model-support-%s.json" % digest),
                     inputs=venv_state.inputs_digest(inputs, params["python"]))
        names = ["transformers"] + (["sglang"] if params["probe_sglang_registry"] else [])
        try:
            state = venv_state.read_state(lambda cmd: module.run_command(cmd, errors="replace"), params["python"],
                                          (), names)
        except RuntimeError:
            state = None
        if state is not None:
            loaded = venv_state.load_stamp(stamp["path"])
            if venv_state.evaluate(loaded, stamp["inputs"], state)[0] and isinstance(loaded.get("result"), dict):
                return loaded["result"], "stamp"
    rc, out, err = run_probe(module, params["python"], argv, params["probe_timeout"])
    probe = None
    if rc == 0:
        try:
            probe = json.loads(out.strip().splitlines()[-1])
        except (ValueError, IndexError):
            probe = None
    if probe is None:
        probe = {"errors": ["probe exited %s: %s" % (rc, (err or out)[-500:])]}
    elif stamp and state is not None and not probe.get("errors") and not module.check_mode:
        try:
            venv_state.write_stamp(stamp["path"], venv_state.build_stamp(stamp["inputs"], state, {}, probe))
        except (IOError, OSError) as exc:
            module.warn("cannot write the model-support stamp %s: %s" % (stamp["path"], exc))
    return probe, "probe"


def check_model_type(module, params, facts, result):
    """N07: the venv's transformers (and SGLang) must know the checkpoint's model_type."""
    if not params["python"]:
        return None
    probe, source = read_model_support(module, params)
    verdict = _checkpoint.check_model_support(facts.get("model_type"), facts.get("architectures"), probe)
    verdict["probe"] = dict((k, probe.get(k)) for k in ("transformers_version", "sglang_version", "errors"))
    verdict["probe"]["source"] = source
    if verdict["status"] == "fail":
        module.fail_json(msg=verdict["message"], cause=verdict["cause"], model_support=verdict, **result)
    if verdict["status"] == "skip":
        module.warn("model type not checked: %s" % verdict["message"])
    if verdict["status"] == "warn":
        module.warn("model support: %s" % verdict["message"])
    return verdict


def main():
    module = AnsibleModule(
        argument_spec=dict(
            model_path=dict(type="path", required=True),
            compute_capability=dict(type="str", default=""),
            kv_cache_dtype=dict(type="str", default="",
                                choices=["", "auto", "bf16", "bfloat16", "fp8_e4m3", "fp8_e5m2", "fp4_e2m1", "nvfp4"]),
            allow_fp8_without_scales=dict(type="bool", default=False),
            allow_experimental_fp4_kv=dict(type="bool", default=False),
            context_length=dict(type="int"),
            env=dict(type="dict", default={}),
            python=dict(type="path"),
            probe_sglang_registry=dict(type="bool", default=True),
            probe_timeout=dict(type="int", default=180),
            stamp_dir=dict(type="path"),
            quantization=dict(type="str", default=""),
            quantization_choices=dict(type="list", elements="str"),
            speculative=dict(type="dict", default={}),
            missing_ok=dict(type="bool", default=False),
        ),
        supports_check_mode=True,
    )
    params = module.params
    try:
        cc = parse_cc(params["compute_capability"])
    except ValueError as exc:
        module.fail_json(msg=str(exc))
    cc_major = cc[0] if cc else None
    empty = dict(quant=None, quantization=params["quantization"] or None, context=None, model_support=None,
                 speculative_draft_model_quantization=(params["speculative"] or {}).get("draft_model_quantization"))
    check_hf_transfer(module, params, dict(checkpoint=None, **empty))
    try:
        requested, fp4_warnings = _checkpoint.guard_fp4_kv(params["kv_cache_dtype"], None, cc,
                                                           params["allow_experimental_fp4_kv"])
    except ValueError as exc:
        module.fail_json(msg=str(exc), cause=str(exc).split(":", 1)[0], checkpoint=None)
    hub_id = not params["model_path"].startswith("/")
    if hub_id or (params["missing_ok"] and not os.path.exists(params["model_path"])):
        try:
            decision = _checkpoint.decide_kv_cache_dtype(None, requested, params["allow_fp8_without_scales"],
                                                         cc_major)
        except ValueError as exc:
            module.fail_json(msg=str(exc), checkpoint=None)
        decision["warnings"] = fp4_warnings + decision["warnings"]
        if not hub_id:
            module.warn("%s does not exist; KV-cache guard applied without checkpoint facts" % params["model_path"])
        for warning in decision["warnings"]:
            module.warn(warning)
        module.exit_json(changed=False, checkpoint=None, recommended_kv_cache_dtype=decision["dtype"],
                         quant_algo=None, kv_cache_quant_algo=None, has_kv_scales=None, num_shards=None,
                         total_bytes=None, kv_cache=decision, **empty)
    try:
        facts = _checkpoint.checkpoint_facts(params["model_path"])
    except (_checkpoint.CheckpointError, OSError) as exc:
        module.fail_json(msg="cannot read checkpoint: %s" % exc)
    result = dict(checkpoint=facts, quant=facts["quant"])
    try:
        requested, fp4_warnings = _checkpoint.guard_fp4_kv(params["kv_cache_dtype"], facts, cc,
                                                           params["allow_experimental_fp4_kv"])
    except ValueError as exc:
        module.fail_json(msg=str(exc), cause=str(exc).split(":", 1)[0], **result)
    recommended, _reason = _checkpoint.recommend_kv_cache_dtype(facts, cc_major)
    if _checkpoint.is_fp4_kv_dtype(facts.get("kv_cache_quant_algo")) and not _checkpoint.is_fp4_kv_capable(cc):
        recommended = "bf16"
    try:
        decision = _checkpoint.decide_kv_cache_dtype(facts, requested, params["allow_fp8_without_scales"], cc_major)
    except ValueError as exc:
        module.fail_json(msg=str(exc), **result)
    decision["warnings"] = fp4_warnings + decision["warnings"]
    # N12: the --quantization to render
    quantization = params["quantization"] or None
    if not quantization:
        if facts["quant_layout_error"]:
            module.fail_json(msg=facts["quant_layout_error"], cause="quant_layout_unknown", **result)
        try:
            quantization, quant_warnings = _checkpoint.choose_quantization(facts["quant"],
                                                                           params["quantization_choices"])
        except _checkpoint.QuantLayoutError as exc:
            module.fail_json(msg=str(exc), cause="quant_layout_unknown", **result)
        decision["warnings"].extend(quant_warnings)
    result["quantization"] = quantization
    # N05: the draft model's quantisation
    spec = params["speculative"] or {}
    draft_q = spec.get("draft_model_quantization") or None
    if spec.get("draft_model_path") and str(spec["draft_model_path"]).startswith("/"):
        try:
            draft = _checkpoint.draft_quantization(spec["draft_model_path"], facts["quant"], draft_q)
        except (ValueError, OSError) as exc:
            module.fail_json(msg=str(exc), cause=str(exc).split(":", 1)[0] if ":" in str(exc) else None, **result)
        draft_q = draft["value"]
    result["speculative_draft_model_quantization"] = draft_q
    # N09 (with N06 headroom)
    context = None
    if params["context_length"] or (params["env"] or {}).get("SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN"):
        context = _checkpoint.check_context_length(facts["context"], params["context_length"], params["env"],
                                                   spec.get("num_draft_tokens") if spec.get("algorithm") else 0)
        context["limits"] = facts["context"]
        if context["status"] == "fail":
            module.fail_json(msg="; ".join(context["messages"]), cause=context["cause"], context=context, **result)
        decision["warnings"].extend(context["warnings"])
    result["context"] = context
    result["model_support"] = check_model_type(module, params, facts, result)
    for warning in decision["warnings"]:
        module.warn(warning)
    module.exit_json(
        changed=False,
        recommended_kv_cache_dtype=recommended,
        quant_algo=facts["quant_algo"],
        kv_cache_quant_algo=facts["kv_cache_quant_algo"],
        has_kv_scales=facts["has_kv_scales"],
        num_shards=facts["num_shards"],
        total_bytes=facts["total_bytes"],
        kv_cache=decision,
        **result
    )


if __name__ == "__main__":
    main()
