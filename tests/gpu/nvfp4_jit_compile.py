"""Compile SGLang's NVFP4 JIT kernels for sm_120a on a machine whose GPU is not SM120 (tests/gpu/run_kernel_build.sh).

At the original pin (d28f35240a) sgl_kernel.cutlass_scaled_fp4_mm / scaled_fp4_quant call SGLang's JIT kernels
(python/sglang/jit_kernel/nvfp4.py, sources under jit_kernel/csrc/gemm/nvfp4/), which tvm-ffi compiles with nvcc on
first use. This runs SGLang's own functions that build them (_jit_nvfp4_*_module, load_jit, tvm_ffi.cpp.load_inline),
unchanged, with two stand-ins, both stated in the output:

* torch.cuda.get_device_capability answers (12, 0): nvfp4.py picks the arch list from the local GPU
  ("12.0a" plus "10.3a" on CUDA 13), and this machine's GPU is not an SM120 one. Compiling needs no SM120 GPU.
* the parent packages sglang, sglang.srt, sglang.srt.utils and sglang.jit_kernel are empty package objects over the
  real directories, so their __init__ files (which import the whole server and its dependencies) do not run; the
  modules used (jit_kernel/utils.py, jit_kernel/nvfp4.py, srt/utils/custom_op.py) are the real files.

usage: nvfp4_jit_compile.py <sglang python dir> <result.json>
Writes per module: ok, seconds, the built .so and the arches in it (cuobjdump --list-elf).
"""
import json
import os
import subprocess
import sys
import time
import traceback
import types


def main(root, result_path):
    for name in ("sglang", "sglang.srt", "sglang.srt.utils", "sglang.jit_kernel"):
        mod = types.ModuleType(name)
        mod.__path__ = [os.path.join(root, *name.split("."))]
        sys.modules[name] = mod
    import torch

    real_cap = torch.cuda.get_device_capability() if torch.cuda.is_available() else None
    torch.cuda.get_device_capability = lambda *a, **k: (12, 0)
    from sglang.jit_kernel import nvfp4

    results = {"stand_ins": ["torch.cuda.get_device_capability -> (12, 0) (this GPU: %s)" % (real_cap,),
                             "sglang package __init__ files not run (empty parent packages over the real dirs)"],
               "arch_list": nvfp4._get_nvfp4_cuda_arch_list(), "torch": torch.__version__,
               "torch_cuda": torch.version.cuda, "cutlass_include_paths": nvfp4._resolve_cutlass_include_paths(),
               "tvm_ffi_cache": os.environ.get("TVM_FFI_CACHE_DIR"), "user": os.getuid(), "modules": {}}
    print("arch list:", results["arch_list"], "cutlass includes:", results["cutlass_include_paths"], flush=True)
    builders = sorted(n for n in dir(nvfp4) if n.startswith("_jit_nvfp4_") and n.endswith("_module"))
    for name in builders:
        t0 = time.time()
        entry = {}
        try:
            module = getattr(nvfp4, name)()
            entry["ok"] = True
            lib = getattr(module, "path", None) or getattr(module, "__file__", None)
            if not lib:
                cache = os.environ.get("TVM_FFI_CACHE_DIR", "")
                libs = []
                for dirpath, _dirs, files in os.walk(cache):
                    libs += [os.path.join(dirpath, f) for f in files if f.endswith(".so")]
                lib = max(libs, key=os.path.getmtime) if libs else None
            entry["library"] = lib
            if lib:
                elf = subprocess.run(["cuobjdump", "--list-elf", lib], capture_output=True, text=True, check=False)
                entry["cuobjdump"] = elf.stdout.strip().splitlines()
        except Exception as exc:  # record and go on: every module is tried
            entry["ok"] = False
            entry["error"] = "%s: %s" % (type(exc).__name__, exc)
            entry["traceback"] = traceback.format_exc()[-4000:]
        entry["seconds"] = round(time.time() - t0, 1)
        results["modules"][name] = entry
        print("%-40s %s in %.1f s %s" % (name, "ok" if entry["ok"] else "FAILED", entry["seconds"],
                                         entry.get("error", "")), flush=True)
    with open(result_path, "w") as f:
        json.dump(results, f, indent=1, sort_keys=True)
    return 0 if all(e["ok"] for e in results["modules"].values()) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
