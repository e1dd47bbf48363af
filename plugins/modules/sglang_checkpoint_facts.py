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
    choices: ["", auto, bf16, bfloat16, fp8_e4m3, fp8_e5m2, fp4_e2m1]
  allow_fp8_without_scales:
    description: Allow an FP8 KV cache although the checkpoint has no k/v scales (SGLang then uses 1.0).
    type: bool
    default: false
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
  - Read-only; never changes the host.
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

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.blackwell.sglang.plugins.module_utils import _checkpoint
from ansible_collections.blackwell.sglang.plugins.module_utils._server_flags import parse_cc


def main():
    module = AnsibleModule(
        argument_spec=dict(
            model_path=dict(type="path", required=True),
            compute_capability=dict(type="str", default=""),
            kv_cache_dtype=dict(type="str", default="",
                                choices=["", "auto", "bf16", "bfloat16", "fp8_e4m3", "fp8_e5m2", "fp4_e2m1"]),
            allow_fp8_without_scales=dict(type="bool", default=False),
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
    if params["missing_ok"] and not os.path.exists(params["model_path"]):
        try:
            decision = _checkpoint.decide_kv_cache_dtype(None, params["kv_cache_dtype"],
                                                         params["allow_fp8_without_scales"], cc_major)
        except ValueError as exc:
            module.fail_json(msg=str(exc), checkpoint=None)
        module.warn("%s does not exist; KV-cache guard applied without checkpoint facts" % params["model_path"])
        for warning in decision["warnings"]:
            module.warn(warning)
        module.exit_json(changed=False, checkpoint=None, recommended_kv_cache_dtype=decision["dtype"],
                         quant_algo=None, kv_cache_quant_algo=None, has_kv_scales=None, num_shards=None,
                         total_bytes=None, kv_cache=decision)
    try:
        facts = _checkpoint.checkpoint_facts(params["model_path"])
    except (_checkpoint.CheckpointError, OSError) as exc:
        module.fail_json(msg="cannot read checkpoint: %s" % exc)
    recommended, _reason = _checkpoint.recommend_kv_cache_dtype(facts, cc_major)
    try:
        decision = _checkpoint.decide_kv_cache_dtype(facts, params["kv_cache_dtype"],
                                                     params["allow_fp8_without_scales"], cc_major)
    except ValueError as exc:
        module.fail_json(msg=str(exc), checkpoint=facts)
    for warning in decision["warnings"]:
        module.warn(warning)
    module.exit_json(
        changed=False,
        checkpoint=facts,
        recommended_kv_cache_dtype=recommended,
        quant_algo=facts["quant_algo"],
        kv_cache_quant_algo=facts["kv_cache_quant_algo"],
        has_kv_scales=facts["has_kv_scales"],
        num_shards=facts["num_shards"],
        total_bytes=facts["total_bytes"],
        kv_cache=decision,
    )


if __name__ == "__main__":
    main()
