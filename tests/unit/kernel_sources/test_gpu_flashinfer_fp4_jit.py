"""FlashInfer's NVFP4 kernels (the current pin's NVFP4 path) compile for both SM12x archs.

Evidence: ``tests/fixtures/gpu/flashinfer_fp4_jit_h200/``, written by ``tests/gpu/run_kernel_build.sh fijit`` on the
H200 (CUDA 13.0, nvcc 13.0.88, torch 2.11+cu130) with flashinfer-python 0.6.17, the current preset's FlashInfer, and
``TARGETS=sm_120a,sm_121a``: FlashInfer's own JIT specs built unchanged, each library's cubins listed by cuobjdump.
Compiling needs no SM12x GPU; running these kernels does, and that has not been done here.
"""
import collections
import json
import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
EVIDENCE = os.path.join(ROOT, "tests", "fixtures", "gpu", "flashinfer_fp4_jit_h200")


def _result():
    with open(os.path.join(EVIDENCE, "flashinfer-fp4-jit.json"), encoding="utf-8") as f:
        return json.load(f)


def _archs(cubins):
    return collections.Counter(re.search(r"\.(sm_\d+[af]?)\.cubin$", c).group(1) for c in cubins)


def test_every_builder_compiled_for_the_family():
    result = _result()
    assert set(result) == {"gen_fp4_quantization_sm120_module", "gen_fp4_quantization_sm121_module",
                           "gen_gemm_sm120_module_cutlass_fp4"}
    for name, r in result.items():
        assert r["ok"], (name, r.get("error"))
        assert r["arch_list"] == "12.0a 12.1a", name


def test_quantization_modules_hold_their_own_arch_only():
    result = _result()
    assert _archs(result["gen_fp4_quantization_sm120_module"]["cubins"]) == {"sm_120a": 1}
    assert _archs(result["gen_fp4_quantization_sm121_module"]["cubins"]) == {"sm_121a": 1}


def test_gemm_holds_every_kernel_for_both_archs():
    """17 sources (the GEMM entry and 16 tile x dtype instances of FlashInfer 0.6.17), each for 12.0a and 12.1a."""
    archs = _archs(_result()["gen_gemm_sm120_module_cutlass_fp4"]["cubins"])
    assert archs == {"sm_120a": 17, "sm_121a": 17}


def test_built_with_cuda_13_0_on_a_gpu_outside_the_family():
    with open(os.path.join(EVIDENCE, "nvcc.txt"), encoding="utf-8") as f:
        nvcc = f.read()
    assert "release 13.0" in nvcc and "compute_121" in nvcc
    with open(os.path.join(EVIDENCE, "gpu.txt"), encoding="utf-8") as f:
        assert f.read().split(",")[1].strip() == "9.0"
