#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang contributors
# Apache-2.0 (see LICENSE)
"""Module blackwell.sglang.fp4_kernel_probe: thin wrapper around module_utils._fp4_probe_runner."""

from __future__ import annotations

DOCUMENTATION = r"""
module: fp4_kernel_probe
short_description: Measure which NVFP4 GEMM / MoE kernels compute correctly on this GPU and pick SGLang's FP4 flags
version_added: 0.1.0
description:
  - Runs the FP4 kernel probe with the Python of the venv under test (option O(python)), not Ansible's Python. The
    module ships the probe runner and the reference NVFP4 quantizer to a private temporary directory on the target,
    runs it, reads its JSON result and removes the directory.
  - The runner starts one child process per step (environment, reference, each backend), each in its own process
    group with a timeout, so a segfault or hang of one backend becomes that backend's V(crash) or V(timeout) verdict.
  - Operands are quantized by a reference NVFP4 quantizer written from the format (E2M1 values, 16-element blocks,
    FP8 E4M3 block scales, FP32 global scale C(448*6/amax), 128x4 swizzled scales) in plain torch. Each backend's
    output is judged against the product of the dequantized operands (tight tolerance); the cosine against the
    bf16 product of the original inputs is reported.
  - Each backend runs over every M of O(m_list) and every shape; all values finite, relative error norm, global and
    per-row cosine and (near) all-zero output or rows are checked, on the first call and again after the timed calls.
    One bad M fails the backend.
  - Verdicts are V(ok), V(wrong_numerics), V(nan), V(zeros), V(unsupported) (the library refuses this GPU),
    V(crash) (with the error text) and V(timeout).
  - RV(recommended) names the fastest backend that is V(ok) in SGLang's own naming for C(--fp4-gemm-backend) and
    C(--moe-runner-backend); it never names a backend that failed, and is null when none passed.
  - Without a CUDA device it returns cleanly with RV(device) C(present=false) and the reason in C(device.reason); the reference
    quantizer still runs on the CPU of the target python as a self-test (RV(reference)).
  - Changes nothing on the host (FlashInfer may fill its JIT cache); runs the same in check mode.
author:
  - blackwell.sglang maintainers (@blackwell-sglang)
options:
  python:
    description:
      - Python interpreter of the venv to probe, for example C({{ sglang_stack_venv }}/bin/python). It must have
        torch; FlashInfer and sgl_kernel are probed when importable.
    type: path
    required: true
  m_list:
    description:
      - Activation row counts M. Field report B09 showed M-dependent zeros, so keep odd sizes (9, 150).
    type: list
    elements: int
    default: [1, 9, 128, 150, 1024]
  shapes:
    description:
      - Dense GEMM weight shapes, each a dict with C(n) (output features) and C(k) (input features, a multiple of 32).
      - Default C([{n 256, k 512}, {n 2048, k 4096}, {n 1536, k 7168}]).
    type: list
    elements: dict
  moe_shapes:
    description:
      - Fused MoE shapes, each a dict with C(hidden), C(intermediate), C(experts), C(top_k).
      - Default C([{hidden 1024, intermediate 512, experts 8, top_k 2}]).
    type: list
    elements: dict
  backends:
    description:
      - Probe only these backends (keys of RV(backends)). Default all that the installed libraries offer.
    type: list
    elements: str
    choices:
      - gemm/flashinfer_cutlass
      - gemm/flashinfer_cudnn
      - gemm/flashinfer_trtllm
      - gemm/flashinfer_cutedsl
      - gemm/flashinfer_b12x
      - gemm/sgl_kernel_cutlass
      - moe/flashinfer_cutlass
      - moe/flashinfer_trtllm
      - moe/flashinfer_cutedsl
  timeout:
    description:
      - Seconds allowed for one backend's child process, including FlashInfer JIT compilation and autotuning on the
        first call (a cold JIT of the CUTLASS FP4 GEMM can take minutes).
    type: float
    default: 300
  env_timeout:
    description:
      - Seconds allowed for the environment child (import torch, FlashInfer, sgl_kernel; query the device).
    type: float
    default: 120
  total_timeout:
    description:
      - Seconds for the whole probe. Backends not started within it get V(timeout) with that reason.
    type: float
    default: 1500
  warmup:
    description: Untimed calls per case before timing.
    type: int
    default: 2
  iters:
    description: Timed calls per case; the median time per call is reported.
    type: int
    default: 10
  seed:
    description: Seed of the random operands (the same on every backend).
    type: int
    default: 20260301
  device_index:
    description: CUDA device index to probe.
    type: int
    default: 0
  allowed_fp4_gemm_backends:
    description:
      - Values RV(recommended) may name for C(--fp4-gemm-backend). Empty or unset - the values O(parser) accepts, or any
        SGLang name without O(parser).
      - With O(parser), a value the installed SGLang does not accept fails the module, naming the role's variable
        C(fp4_probe_allowed_fp4_gemm_backends).
    type: list
    elements: str
  allowed_moe_runner_backends:
    description:
      - Values RV(recommended) may name for C(--moe-runner-backend), as O(allowed_fp4_gemm_backends)
        (C(fp4_probe_allowed_moe_runner_backends)).
    type: list
    elements: str
  parser:
    description:
      - The result of M(blackwell.sglang.sglang_server_args) for the venv (its C(flags) and C(revision)); the
        recommendation is limited to the values the installed SGLang accepts. Without C(flags) (the parser could not
        be read) the module fails before it measures. Unset - no parser (a venv without SGLang).
    type: dict
  reuse_from:
    description:
      - An earlier result file (the role's C(fp4_probe_result_file)). When it holds a result with this RV(probe_key)
        measured on a device of O(compute_capability), that result is returned (RV(reused)) and nothing is measured.
    type: path
  compute_capability:
    description: Compute capability of the probed device (C(12.0)); part of RV(probe_key), and what O(reuse_from)'s
      result must have been measured on.
    type: str
    default: ""
  environment:
    description:
      - Extra environment for the probe processes, for example C(CUDA_HOME), C(FLASHINFER_WORKSPACE_BASE),
        C(TVM_FFI_CACHE_DIR).
    type: dict
    default: {}
attributes:
  check_mode:
    description: Can run in check mode and return changed status prediction without modifying target.
    support: full
    details: The probe only measures; it runs (and reports real verdicts) in check mode too.
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in check mode), when in diff mode.
    support: none
notes:
  - What the probe proves on sm_90 and what only on SM120 is in C(docs/fp4-probe.md).
  - The judging logic is C(plugins/module_utils/fp4_numerics.py) (C(compare), C(judge_backend), C(recommend),
    C(pinned_flag_verdict)); the reference quantizer is C(plugins/module_utils/nvfp4_reference.py).
seealso:
  - module: blackwell.sglang.gpu_facts
"""

EXAMPLES = r"""
- name: Probe FP4 kernels in the release venv
  blackwell.sglang.fp4_kernel_probe:
    python: "{{ sglang_stack_venv }}/bin/python"
    environment:
      CUDA_HOME: /usr/local/cuda-13.0
  register: probe

- name: Quick probe of FlashInfer's dense backends only
  blackwell.sglang.fp4_kernel_probe:
    python: /opt/sglang/venv/bin/python
    m_list: [1, 9, 128]
    shapes:
      - {n: 256, k: 512}
    backends: [gemm/flashinfer_cutlass, gemm/flashinfer_cudnn, gemm/flashinfer_b12x]

- name: Show the flags the probe picked
  ansible.builtin.debug:
    msg: >-
      --fp4-gemm-backend {{ probe.recommended.fp4_gemm_backend }}
      --moe-runner-backend {{ probe.recommended.moe_runner_backend }}
"""

RETURN = r"""
probe_key:
  description: SHA-256 of what was measured (python, M list, shapes, backends, device index, allowed values, compute
    capability).
  returned: always
  type: str
allowed:
  description: The values each recommendation may name (C(fp4_gemm_backend), C(moe_runner_backend)); null = any.
  returned: always
  type: dict
parser:
  description: The revision of the SGLang whose parser limited RV(allowed), or null.
  returned: always
  type: str
skipped:
  description: C(false) (the role records a skipped probe without calling the module).
  returned: always
  type: bool
reused:
  description: The result is the one of O(reuse_from), not measured now.
  returned: always
  type: bool
device:
  description:
    - The probed GPU, C(present), C(name), C(compute_capability) (C("12.0")), C(cc) (120), C(sm), C(index),
      C(total_memory_mib), C(arch_list) (torch's), or C(present=false) and C(reason).
  returned: always
  type: dict
  sample: {present: true, name: NVIDIA RTX PRO 6000 Blackwell Server Edition, compute_capability: "12.0", cc: 120}
versions:
  description: Versions read in the target venv (python, torch, torch_cuda, cudnn, flashinfer and distributions).
  returned: always
  type: dict
fp4_paths_present:
  description: Which FP4 entry points exist in the installed build (C(flashinfer.mm_fp4), C(sgl_kernel.cutlass_scaled_fp4_mm), ...).
  returned: always
  type: dict
offered_mm_fp4_backends:
  description: Backends the installed C(flashinfer.mm_fp4) offers (version dependent).
  returned: when the environment step ran
  type: list
  elements: str
not_offered:
  description: Probe keys not run because the installed libraries do not offer them, with the reason.
  returned: always
  type: dict
import_errors:
  description: Import errors of FlashInfer / sgl_kernel (for example an ABI mismatch), by package.
  returned: when the environment step ran
  type: dict
reference:
  description:
    - Reference quantize, dequantize and matmul run on the probe device (CPU without a GPU) with C(ok), C(device),
      C(cases) (time per call in microseconds, exact re-quantization round trip, SNR, cosine vs bf16).
  returned: always
  type: dict
backends:
  description:
    - Per probe key (C(gemm/flashinfer_cutlass), C(moe/flashinfer_cutlass), ...) a dict with C(kind) (gemm/moe),
      C(api), C(sglang) (the SGLang flag value, null if SGLang has none), C(verdict), C(reason), C(source)
      (C(library), C(capability_table) or C(probe)), C(cases) (per M and shape, C(verdict), C(metrics), C(time_us)
      median microseconds per call), C(failed_cases), C(score_us) (sum of case times, for ranking), C(setup_s)
      (first call, includes JIT) and C(wall_s).
  returned: always
  type: dict
recommended:
  description:
    - C(fp4_gemm_backend) and C(moe_runner_backend) in SGLang naming (null when nothing passed), C(reasons) and
      C(ranking) per flag.
  returned: always
  type: dict
  sample: {fp4_gemm_backend: flashinfer_cudnn, moe_runner_backend: flashinfer_cutlass}
probe:
  description: The probe parameters and timings (C(wall_s), C(setup_s) total of first calls, C(runner_wall_s), C(module_wall_s)).
  returned: always
  type: dict
"""

import json
import os
import shutil
import tempfile
import time

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.blackwell.sglang.plugins.module_utils import _fp4_probe_runner as runner
from ansible_collections.blackwell.sglang.plugins.module_utils import _inputs
from ansible_collections.blackwell.sglang.plugins.module_utils import fp4_numerics as num


def main():
    module = AnsibleModule(
        argument_spec=dict(
            python=dict(type="path", required=True),
            m_list=dict(type="list", elements="int", default=[1, 9, 128, 150, 1024]),
            shapes=dict(type="list", elements="dict"),
            moe_shapes=dict(type="list", elements="dict"),
            backends=dict(type="list", elements="str", choices=sorted(num.BACKENDS)),
            timeout=dict(type="float", default=300.0),
            env_timeout=dict(type="float", default=120.0),
            total_timeout=dict(type="float", default=1500.0),
            warmup=dict(type="int", default=2),
            iters=dict(type="int", default=10),
            seed=dict(type="int", default=20260301),
            device_index=dict(type="int", default=0),
            allowed_fp4_gemm_backends=dict(type="list", elements="str"),
            allowed_moe_runner_backends=dict(type="list", elements="str"),
            environment=dict(type="dict", default={}),
            parser=dict(type="dict"),
            reuse_from=dict(type="path"),
            compute_capability=dict(type="str", default=""),
        ),
        supports_check_mode=True,
    )
    p = module.params
    # every option checked before anything starts, with the rules the role checks its variables with
    problems = _inputs.check({
        "gemm_shapes": {"shapes": p["shapes"]} if p["shapes"] is not None else {},
        "moe_shapes": {"moe_shapes": p["moe_shapes"]} if p["moe_shapes"] is not None else {},
        "int(min=1)": {"m_list": p["m_list"], "iters": p["iters"]},
        "int(min=0)": {"warmup": p["warmup"], "device_index": p["device_index"]},
        "number(gt=0)": {"timeout": p["timeout"], "env_timeout": p["env_timeout"], "total_timeout": p["total_timeout"]},
    })
    if problems:
        module.fail_json(msg="; ".join(problems))
    parser = p["parser"]
    if parser is not None and parser.get("flags") is None:
        module.fail_json(msg="fp4_probe: cannot read the installed SGLang's parser with %s to limit the recommendation "
                         "to the values it accepts: %s %s. Install SGLang in that venv first (sglang_source), or set "
                         "fp4_probe_read_parser: false for a venv without it."
                         % (p["python"], parser.get("msg") or "", " ".join(parser.get("errors") or [])))
    requested = {num.GEMM_FLAG: p["allowed_fp4_gemm_backends"], num.MOE_FLAG: p["allowed_moe_runner_backends"]}
    choices = runner.parser_choices(parser)
    refused = runner.not_accepted(requested, choices)
    if refused:
        module.fail_json(msg="; ".join("fp4_probe_allowed_%ss=%s: %s accepts %s %s" % (
            name, json.dumps(req), parser.get("revision"), flag, json.dumps(accepted))
            for name, flag, req, accepted in refused))
    allowed = runner.allowed_values(requested, choices)
    revision = parser.get("revision") if parser is not None else None
    # the probe's inputs as given (before the shapes' numbers are made whole)
    key = runner.probe_key({
        "python": p["python"], "m_list": p["m_list"], "shapes": p["shapes"], "moe_shapes": p["moe_shapes"],
        "backends": p["backends"] or [], "device_index": p["device_index"], "allowed": allowed,
        "compute_capability": p["compute_capability"]})
    if p["reuse_from"]:
        try:
            with open(p["reuse_from"], encoding="utf-8") as handle:
                previous = json.load(handle)
        except (IOError, OSError, ValueError):
            previous = None                     # none yet, or unreadable: measure
        if runner.reusable(previous, key, p["compute_capability"]):
            previous.update(changed=False, reused=True)
            module.exit_json(**previous)
    for shp in (p["shapes"] or []) + (p["moe_shapes"] or []):
        for dim in ("n", "k", "hidden", "intermediate", "experts", "top_k"):
            if dim in shp:
                shp[dim] = int(float(shp[dim]))     # whole numbers (checked above), also when written "512"
    spec = {
        "m_list": p["m_list"], "shapes": p["shapes"], "moe_shapes": p["moe_shapes"], "backends": p["backends"],
        "timeout_s": p["timeout"], "env_timeout_s": p["env_timeout"], "total_timeout_s": p["total_timeout"],
        "warmup": p["warmup"], "iters": p["iters"], "seed": p["seed"], "device_index": p["device_index"],
        "allowed": dict((name, values) for name, values in allowed.items() if values is not None) or None,
    }
    workdir = tempfile.mkdtemp(prefix="fp4probe-", dir=module.tmpdir)
    t0 = time.monotonic()
    try:
        result = runner.execute_probe(p["python"], spec, workdir, environ=p["environment"])
    except runner.ProbeError as exc:
        module.fail_json(msg=exc.message, output_tail=exc.output_tail, python=p["python"])
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    result.setdefault("probe", {})["module_wall_s"] = round(time.monotonic() - t0, 3)
    if not os.path.isdir(workdir):
        result["probe"]["cleaned_up"] = True
    result.update(probe_key=key, skipped=False, allowed=allowed, parser=revision, reused=False)
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
