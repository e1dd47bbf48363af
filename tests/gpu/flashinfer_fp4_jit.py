"""Compile FlashInfer's NVFP4 kernels for the SM12x targets on a machine whose GPU is not SM12x (run_kernel_build.sh).

From the current pin on (d55f1c28e2), SGLang's NVFP4 linear layers no longer call kernels of its own: the activation
quantization is ``flashinfer.fp4_quantize`` (``sglang/srt/layers/quantization/fp4_utils.py``) and the GEMM is
``flashinfer.mm_fp4`` with the preset's backend (``flashinfer_cutlass``). FlashInfer builds both with nvcc on first
use, in the service's cache, unless flashinfer-jit-cache holds them. This builds FlashInfer's own JIT specs, unchanged:

* ``gen_fp4_quantization_sm120_module`` / ``_sm121_module``: the quantization kernels, one per compute capability
  (FlashInfer fixes their arch: ``compute_120a`` / ``compute_121a``);
* ``gen_gemm_sm120_module_cutlass_fp4``: the CUTLASS FP4 GEMM for SM120 and SM121, compiled for every arch of
  ``FLASHINFER_CUDA_ARCH_LIST``, set here from the kernel build's TARGETS (``sm_120a,sm_121a`` -> ``12.0a 12.1a``),
  because FlashInfer otherwise takes the local GPU's arch.

``flashinfer/__init__`` is not run (it imports the whole library and probes the driver): ``flashinfer`` is an empty
package object over the real directory, as SGLang's own JIT check does with ``sglang``. Each spec builds in its own
process, side by side, bounded by ``--timeout`` seconds; the result file is rewritten after each one ends, so a call
cut short keeps what finished. Each library's cubins are listed with cuobjdump.

usage: flashinfer_fp4_jit.py <flashinfer site dir> <result.json> [--timeout S]    (or: --one <builder> <site dir>)
"""
import json
import os
import subprocess
import sys
import time
import types

BUILDERS = [
    ("flashinfer.jit.fp4_quantization", "gen_fp4_quantization_sm120_module"),
    ("flashinfer.jit.fp4_quantization", "gen_fp4_quantization_sm121_module"),
    ("flashinfer.jit.gemm.core", "gen_gemm_sm120_module_cutlass_fp4"),
]


def _arch_list():
    """'12.0a 12.1a' from TARGETS='sm_120a,sm_121a' (default sm_120a,sm_121a: the SM12x family)."""
    targets = [t.strip() for t in os.environ.get("TARGETS", "sm_120a,sm_121a").split(",") if t.strip()]
    out = []
    for t in targets:
        digits = t[3:].rstrip("af")
        out.append("%s.%s%s" % (digits[:-1], digits[-1], t[-1] if t[-1] in "af" else ""))
    return " ".join(out)


def one(builder, site):
    module, name = builder.split(":")
    pkg = types.ModuleType("flashinfer")
    pkg.__path__ = [os.path.join(site, "flashinfer")]
    sys.modules["flashinfer"] = pkg
    import importlib
    spec = getattr(importlib.import_module(module), name)()
    t0 = time.monotonic()
    spec.build(verbose=False)
    lib = str(spec.get_library_path())
    elf = subprocess.run(["cuobjdump", "--list-elf", lib], capture_output=True, text=True, check=False)
    print(json.dumps({"builder": name, "ok": os.path.exists(lib), "seconds": round(time.monotonic() - t0, 1),
                      "library": lib, "cubins": [l.split(":", 1)[-1].strip() for l in elf.stdout.splitlines() if l.strip()],
                      "arch_list": os.environ.get("FLASHINFER_CUDA_ARCH_LIST")}))


def main(site, result_path, timeout):
    os.environ.setdefault("FLASHINFER_CUDA_ARCH_LIST", _arch_list())
    env = dict(os.environ, PYTHONPATH=site + os.pathsep + os.environ.get("PYTHONPATH", ""))
    procs = {}
    for module, name in BUILDERS:
        procs[name] = (time.monotonic(), subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "--one", "%s:%s" % (module, name), site],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    print("builders:", [name for _module, name in BUILDERS], "FLASHINFER_CUDA_ARCH_LIST:", os.environ["FLASHINFER_CUDA_ARCH_LIST"],
          flush=True)
    results = {}
    while procs:
        for name, (t0, p) in list(procs.items()):
            if p.poll() is None and time.monotonic() - t0 < timeout:
                continue
            if p.poll() is None:
                p.kill()
            out = p.communicate()[0]
            last = [l for l in out.splitlines() if l.startswith("{")]
            results[name] = json.loads(last[-1]) if p.returncode == 0 and last else {
                "builder": name, "ok": False, "seconds": round(time.monotonic() - t0, 1),
                "error": "timed out after %d s" % timeout if p.returncode and p.returncode < 0 else out[-3000:]}
            r = results[name]
            print("%-40s %s in %ss %s" % (name, "ok" if r["ok"] else "FAILED", r["seconds"], r.get("cubins", "")),
                  flush=True)
            if not r["ok"]:
                print(r.get("error", ""), flush=True)
            del procs[name]
            with open(result_path, "w") as f:
                json.dump(results, f, indent=2, sort_keys=True)
        time.sleep(2)
    return 0 if all(r["ok"] for r in results.values()) else 1


if __name__ == "__main__":
    if sys.argv[1] == "--one":
        one(sys.argv[2], sys.argv[3])
    else:
        t = int(sys.argv[sys.argv.index("--timeout") + 1]) if "--timeout" in sys.argv else 400
        sys.exit(main(sys.argv[1], sys.argv[2], t))
