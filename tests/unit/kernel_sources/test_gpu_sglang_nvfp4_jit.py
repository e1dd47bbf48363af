"""SGLang's own NVFP4 JIT kernels (the original pin's NVFP4 path) compile for sm_121a (DGX Spark, GB10).

Evidence: ``tests/fixtures/gpu/sglang_nvfp4_jit_sm121a_h200/``, written on the H200 (compute capability 9.0, CUDA
13.0, nvcc 13.0.88, torch 2.11+cu130) by ``TARGETS=sm_121a NVFP4_CAPABILITIES=12.1 tests/gpu/run_kernel_build.sh jit
original``: SGLang's four ``_jit_nvfp4_*_module`` builders of d28f35240a (``python/sglang/jit_kernel/nvfp4.py``),
run unchanged by tvm-ffi and nvcc as an unprivileged user in the service's environment, each library's cubins listed
by ``cuobjdump --list-elf``. The stand-in: ``torch.cuda.get_device_capability`` answers (12, 1), because nvfp4.py
picks its arch list from the local GPU (the result's ``stand_ins``). Compiling needs no SM12x GPU; running these
kernels on a GB10 has not been done here.
"""
import collections
import json
import os
import re

from ansible_collections.blackwell.sglang.plugins.module_utils import _hardware_profile as hp

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
EVIDENCE = os.path.join(ROOT, "tests", "fixtures", "gpu", "sglang_nvfp4_jit_sm121a_h200")
BUILDERS = {"_jit_nvfp4_blockwise_moe_module", "_jit_nvfp4_expert_quant_module", "_jit_nvfp4_quant_module",
            "_jit_nvfp4_scaled_mm_module"}


def _result():
    with open(os.path.join(EVIDENCE, "nvfp4-jit.json"), encoding="utf-8") as f:
        return json.load(f)


def test_every_builder_compiled_with_the_profiles_arch_list():
    """nvfp4.py's list for the local GPU is ``<cc>a`` plus ``10.3a`` on CUDA 13; the SM12x part is the profile's."""
    modules = _result()["modules"]
    assert set(modules) == BUILDERS
    want = hp.profile(["12.1"])["nvfp4_jit_arch_lists"]["12.1"]
    assert want == "12.1a"
    for name, m in modules.items():
        assert m["ok"], (name, m.get("error"))
        assert m["arch_list"].split() == [want, "10.3a"], name
        assert m["user"] != 0, name  # as the service's user, not root


def test_every_library_holds_an_sm_121a_cubin_and_no_sm_120a():
    """``sm_120a`` code does not run on 12.1 ("no kernel image is available"): each library needs its own."""
    libraries = _result()["libraries"]
    assert {re.sub(r"_[0-9a-f]{16}/.*", "", k) for k in libraries} == {
        "sgl_kernel_jit_nvfp4_blockwise_moe", "sgl_kernel_jit_nvfp4_expert_quant", "sgl_kernel_jit_nvfp4_quant",
        "sgl_kernel_jit_nvfp4_scaled_mm"}
    for lib, elf in libraries.items():
        archs = collections.Counter(re.search(r"\.(sm_\d+[af]?)\.cubin$", line).group(1) for line in elf)
        assert archs == {"sm_121a": 1, "sm_103a": 1}, lib


def test_compiled_on_a_gpu_outside_the_family_with_cuda_13_0():
    result = _result()
    assert any("(12, 1)" in s for s in result["stand_ins"])
    assert all(m["real_capability"] == [9, 0] for m in result["modules"].values())
    with open(os.path.join(EVIDENCE, "gpu.txt"), encoding="utf-8") as f:
        assert f.read().split(",")[1].strip() == "9.0"
    with open(os.path.join(EVIDENCE, "nvcc.txt"), encoding="utf-8") as f:
        assert "release 13.0" in f.read()
