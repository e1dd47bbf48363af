#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang contributors
# Apache-2.0 (see LICENSE)

from __future__ import annotations

DOCUMENTATION = r"""
module: sgl_kernel_patch
short_description: Apply the SM120 source patches to an SGLang kernel (sgl-kernel) tree
version_added: 0.1.0
description:
  - Finds the kernel tree in an SGLang checkout (C(sgl-kernel/) until 2026-07-29, then
    C(python/sglang/kernels/aot/)) or takes the kernel directory itself, and applies the patches an SM120
    (RTX PRO 6000 / RTX 5090, sm_120a) build with CUDA 13 needs.
  - Patches are found by content anchors, never by line numbers, and are idempotent; a second run reports
    C(changed=false). Line endings (LF or CRLF) and file modes are kept.
  - All-or-nothing; if any requested patch cannot find its anchor, no file is written and the error names the patch,
    the file and what was looked for.
  - Also reports what the tree fetches at configure time (mscclpp as a sub-project pulls dlpack, whose
    C(cmake_minimum_required) below 3.5 CMake 4 rejects; the fix is C(CMAKE_POLICY_VERSION_MINIMUM=3.5) in the build
    environment) and a build-cost estimate (translation units x gencodes per extension) before and after the patches.
  - "Facts behind each patch: sglang-sm120.md sections 1.2 (policies), 1.4 (dlpack), 1.5 (CCCL), 1.6 (gencodes),
    1.7 and 2 (FA3); field reports B01-B03, B06."
author:
  - blackwell.sglang maintainers (@blackwell-sglang)
options:
  src:
    description:
      - An SGLang checkout root or a kernel directory (one that has C(CMakeLists.txt) and C(python/sgl_kernel/)).
    type: path
    required: true
  patches:
    description:
      - C(cmake_policy_guards) wraps every C(cmake_policy(SET CMPxxxx ...)) in C(if(POLICY CMPxxxx)) so that
        CMake older than 3.31 configures (upstream sets CMP0169 and CMP0177 unconditionally).
      - C(cccl_include) puts C(<CUDA toolkit>/include/cccl) on the include path of host-compiled C/C++ units in
        CMake itself when CUDA >= 13 (CUDA 13 moved the CCCL headers there); harmless on CUDA 12 and reported
        C(not_needed) on trees that already handle CCCL.
      - C(fa3_soft_fallback) makes C(sgl_kernel/flash_attn.py) import without the FA3 extension C(flash_ops)
        (logs the error, C(is_fa3_supported()) returns False, entry points raise at call time); trees that load
        FA3 lazily report it C(not_needed).
      - C(drop_sparse_attn) (optional) takes sgl-attn's sparse FlashAttention out of C(common_ops); its sources
        leave the build and the C(fwd_sparse)/C(varlen_fwd_sparse) registrations in C(csrc/common_extension.cc) go
        under a disabled preprocessor block. Needed whenever the sgl-attn tree (FetchContent
        C(repo-flash-attention)) is a placeholder, since otherwise the registrations leave two symbols undefined and
        C(import sgl_kernel) fails. Only SGLang's
        C(dual_chunk_flash_attn) attention backend calls these ops.
      - C(skip_fa3_build) (optional) stops compiling FA3 (sm_90a-only cubins, useless on SM120); removes the
        forced C(set(SGL_KERNEL_ENABLE_FA3 ON)) of revisions before 2026-06-17 and makes the option default OFF.
      - C(sm120_only) (optional) keeps only O(target_archs) in C(SGL_KERNEL_CUDA_FLAGS) and puts the sm90
        C(common_ops) build behind an option that defaults OFF (SM120 loads the sm100 variant).
    type: list
    elements: str
    choices: [cmake_policy_guards, cccl_include, fa3_soft_fallback, drop_sparse_attn, skip_fa3_build, sm120_only]
    default: [cmake_policy_guards, cccl_include, fa3_soft_fallback]
  target_archs:
    description:
      - Gencode targets C(sm120_only) keeps. Must be arch-specific (C(sm_120a)); plain C(sm_120) lacks the FP4
        MMA instructions and is rejected.
    type: list
    elements: str
    default: [sm_120a]
  cuda_version:
    description:
      - CUDA major.minor assumed by the build-cost estimate (the CMake file gates gencodes on it). Does not change
        any patch.
    type: str
    default: "13.0"
  backup:
    description:
      - Keep a timestamped copy of every file before it is changed.
    type: bool
    default: false
attributes:
  check_mode:
    support: full
    description: Nothing is written; C(changed) and the diff say what would change.
  diff_mode:
    support: full
    description: Returns the before/after text of every file that changes.
  platform:
    support: full
    platforms: posix
    description: Any POSIX host with Python; no CUDA or CMake is needed to patch.
notes:
  - The dlpack problem is not patched here; the C(blackwell.sglang.sgl_kernel_sm120) role exports
    C(CMAKE_POLICY_VERSION_MINIMUM=3.5) and builds in a fresh directory (C(dependencies.needs_policy_version_minimum) in the result).
  - The build-cost estimate models C(set), C(list(APPEND)), C(option), C(if) and the library targets of the CMake file
    on x86_64 with C(ENABLE_BELOW_SM90=OFF); C(file(GLOB)) patterns over fetched sources cannot be counted before
    configure and are listed in C(unresolved_globs).
  - The SGLang kernel build facts are in C(docs/sgl-kernel.md), shipped with this collection.
"""

EXAMPLES = r"""
- name: Patch the kernel tree of the checkout (default patches)
  blackwell.sglang.sgl_kernel_patch:
    src: /opt/sglang/releases/abc123/src/sglang
  register: kernel_patch

- name: SM120-only build without FA3, keeping backups
  blackwell.sglang.sgl_kernel_patch:
    src: /opt/sglang/releases/abc123/src/sglang/sgl-kernel
    patches: [cmake_policy_guards, cccl_include, fa3_soft_fallback, skip_fa3_build, sm120_only]
    backup: true

- name: Show what sm120_only would buy
  ansible.builtin.debug:
    var: kernel_patch.build_cost_lines
"""

RETURN = r"""
kernel_dir:
  description: Absolute path of the kernel tree that was patched.
  returned: success
  type: str
  sample: /opt/sglang/releases/abc123/src/sglang/sgl-kernel
layout:
  description: Which layout was found, C(sgl-kernel) or C(python/sglang/kernels/aot).
  returned: success
  type: str
  sample: sgl-kernel
applied:
  description: Patches that changed (in check mode, would change) a file in this run.
  returned: success
  type: list
  elements: str
  sample: [cmake_policy_guards, cccl_include, fa3_soft_fallback]
already_applied:
  description: Patches whose result was already in the tree.
  returned: success
  type: list
  elements: str
  sample: []
not_needed:
  description: Patches this revision does not need (no policies set, CCCL handled, FA3 loaded lazily, ...).
  returned: success
  type: list
  elements: str
  sample: []
details:
  description: One message per requested patch.
  returned: success
  type: dict
  sample: {cmake_policy_guards: "guarded CMP0169, CMP0177"}
files:
  description: Files changed (or that would change in check mode).
  returned: success
  type: list
  elements: str
backup_files:
  description: Backup copies written when O(backup=true), keyed by file.
  returned: changed and backup
  type: dict
dependencies:
  description:
    - C(fetched) (FetchContent names), C(mscclpp_subproject), C(dlpack_via_mscclpp),
      C(needs_policy_version_minimum) and a C(remedy) text.
  returned: success
  type: dict
  sample: {fetched: [repo-cutlass, repo-mscclpp], mscclpp_subproject: true, dlpack_via_mscclpp: true,
           needs_policy_version_minimum: true}
build_cost:
  description:
    - C(before) (the tree as found), C(after) (with the requested patches) and C(with_all_optional) (adding
      skip_fa3_build and sm120_only), each with C(total_units_x_gencodes) and per-extension C(cuda_units),
      C(host_units), C(gencodes), C(units_x_gencodes), C(unresolved_globs); plus C(saved_percent) and C(assumptions).
  returned: success
  type: dict
build_cost_lines:
  description: The estimate as readable lines, one per extension and a total.
  returned: success
  type: list
  elements: str
  sample: ["common_ops_sm90_build: 2 CUDA units x 5 gencodes (sm_90,sm_100a,sm_120a,sm_103a,sm_90a) + 1 host units = 11 -> not built"]
diff:
  description: Before/after text of every changed file (with C(--diff)).
  returned: changed and diff mode
  type: list
  elements: dict
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.text.converters import to_native

from ansible_collections.blackwell.sglang.plugins.module_utils import _sgl_kernel_tree as tree


def main():
    module = AnsibleModule(
        argument_spec=dict(
            src=dict(type="path", required=True),
            patches=dict(type="list", elements="str", choices=list(tree.PATCHES), default=list(tree.DEFAULT_PATCHES)),
            target_archs=dict(type="list", elements="str", default=["sm_120a"]),
            cuda_version=dict(type="str", default="13.0"),
            backup=dict(type="bool", default=False),
        ),
        supports_check_mode=True,
    )
    p = module.params
    try:
        result = tree.plan(p["src"], patches=p["patches"], target_archs=p["target_archs"],
                           cuda_version=p["cuda_version"])
    except tree.PatchError as exc:
        module.fail_json(msg="nothing written: %s" % to_native(exc), patch=exc.patch, file=exc.path,
                         looked_for=exc.looked_for)
    except (tree.LayoutError, ValueError, UnicodeDecodeError, OSError) as exc:
        module.fail_json(msg=to_native(exc))

    out = dict(
        changed=result["changed"],
        kernel_dir=result["kernel_dir"],
        layout=result["layout"],
        applied=result["applied"],
        already_applied=result["already_applied"],
        not_needed=result["not_needed"],
        details=result["details"],
        files=[f.path for f in result["files"].values() if f.changed],
        dependencies=result.get("dependencies", {}),
        build_cost=result.get("build_cost", {}),
        build_cost_lines=tree.format_build_cost(result["build_cost"]) if result.get("build_cost") else [],
    )
    if module._diff and result["changed"]:
        out["diff"] = tree.diffs(result)
    if result["changed"] and not module.check_mode:
        try:
            backups = tree.commit(result, backup=p["backup"])
        except (OSError, IOError) as exc:
            module.fail_json(msg="writing the patched files failed: %s" % to_native(exc), **out)
        if backups:
            out["backup_files"] = backups
    module.exit_json(**out)


if __name__ == "__main__":
    main()
