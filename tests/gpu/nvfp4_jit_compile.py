"""Compile SGLang's NVFP4 JIT kernels for sm_120a on a machine whose GPU is not SM120 (tests/gpu/run_kernel_build.sh).

At the original pin (d28f35240a) sgl_kernel.cutlass_scaled_fp4_mm / scaled_fp4_quant call SGLang's JIT kernels
(python/sglang/jit_kernel/nvfp4.py, sources under jit_kernel/csrc/gemm/nvfp4/), which tvm-ffi compiles with nvcc on
first use. This runs SGLang's own code that builds them, read from the real files:

* jit_kernel/utils.py (load_jit -> tvm_ffi.cpp.load_inline) is imported as it is;
* from jit_kernel/nvfp4.py, the functions that pick the arch list, the CUTLASS include paths and the flags and the
  ``_jit_nvfp4_*_module`` builders are taken from its syntax tree and run unchanged. The module itself is not
  imported: its top-level ``@register_custom_op`` decorators import sglang.srt.utils.common, i.e. the whole server's
  dependency set (orjson, zmq, starlette, ...), which a build machine does not need;
* torch.cuda.get_device_capability answers the hardware profile's first capability (NVFP4_CAPABILITIES, else the
  kernel build's TARGETS, else 12.0), and the arch list is SGLang's own list for every capability of the profile
  merged ("12.1a 10.3a" for sm_121a): nvfp4.py picks the arch list from the local GPU ("12.0a" plus "10.3a" on
  CUDA 13), and this machine's GPU is not an SM12x one. Compiling needs no SM12x GPU.
The parent packages sglang and sglang.jit_kernel are empty package objects over the real directories, so their
__init__ files (which import the server) do not run. Every builder runs in its own process, side by side.

usage: nvfp4_jit_compile.py <sglang python dir> <result.json>      (or: --one <builder> <sglang python dir>)
"""
import __future__
import ast
import contextlib
import importlib
import json
import os
import pathlib
import subprocess
import sys
import time
import traceback
import types
import typing


def _capabilities():
    """The capabilities to compile for, from the hardware profile: NVFP4_CAPABILITIES ("12.0,12.1"), else the targets
    of the kernel build (TARGETS, "sm_120a,sm_121a"), else 12.0."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "collections"))
    from ansible_collections.blackwell.sglang.plugins.module_utils._hardware_profile import profile
    values = os.environ.get("NVFP4_CAPABILITIES") or os.environ.get("TARGETS") or "12.0"
    caps = profile([v for v in values.split(",") if v.strip()])["capabilities"]
    if not caps:
        raise SystemExit("no SM12x capability in %r" % values)
    return [tuple(int(x) for x in c.split(".")) for c in caps]


def _nvfp4_namespace(root):
    for name in ("sglang", "sglang.jit_kernel"):
        mod = types.ModuleType(name)
        mod.__path__ = [os.path.join(root, *name.split("."))]
        sys.modules[name] = mod
    import torch
    real = torch.cuda.get_device_capability() if torch.cuda.is_available() else None
    caps = _capabilities()
    torch.cuda.get_device_capability = lambda *a, **k: caps[0]
    utils = importlib.import_module("sglang.jit_kernel.utils")
    path = os.path.join(root, "sglang", "jit_kernel", "nvfp4.py")
    with open(path) as f:
        tree = ast.parse(f.read(), path)
    ns = {"torch": torch, "os": os, "pathlib": pathlib, "importlib": importlib, "contextmanager": contextlib.contextmanager,
          "Optional": typing.Optional, "Tuple": typing.Tuple, "TYPE_CHECKING": False, "load_jit": utils.load_jit,
          "cache_once": lambda fn: fn, "__name__": "nvfp4_builders"}
    wanted = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and (node.name.startswith("_jit_nvfp4_") or node.name in (
                "_find_package_root", "_resolve_cutlass_include_paths", "_nvfp4_cuda_flags", "_parse_cuda_version",
                "_get_nvfp4_cuda_arch_list", "_nvfp4_arch_env")):
            wanted.append(node)
        elif isinstance(node, ast.Assign) and all(isinstance(t, ast.Name) and t.id.startswith("_FLOAT") for t in node.targets):
            wanted.append(node)
    code = compile(ast.Module(body=wanted, type_ignores=[]), path, "exec",
                   flags=__future__.annotations.compiler_flag, dont_inherit=True)  # nvfp4.py has the same future import
    exec(code, ns)  # noqa: S102 - SGLang's own functions, unchanged
    # the profile's arch list: SGLang's own list for each capability of the profile, merged in order ("12.0a 10.3a
    # 12.1a" for a mixed fleet); nvfp4.py itself picks only the local GPU's
    upstream = ns["_get_nvfp4_cuda_arch_list"]

    def profile_arch_list():
        archs = []
        for cap in caps:
            torch.cuda.get_device_capability = lambda *a, _c=cap, **k: _c
            archs += [a for a in upstream().split() if a not in archs]
        torch.cuda.get_device_capability = lambda *a, **k: caps[0]
        return " ".join(archs)

    ns["_get_nvfp4_cuda_arch_list"] = profile_arch_list
    return ns, real


def one(builder, root):
    ns, real = _nvfp4_namespace(root)
    t0 = time.time()
    entry = {"builder": builder, "arch_list": ns["_get_nvfp4_cuda_arch_list"](), "real_capability": real,
             "cutlass_include_paths": ns["_resolve_cutlass_include_paths"](), "user": os.getuid(),
             "tvm_ffi_cache": os.environ.get("TVM_FFI_CACHE_DIR")}
    try:
        module = ns[builder]()
        entry["ok"] = True
        entry["module"] = repr(module)[:300]
    except Exception as exc:  # reported
        entry["ok"] = False
        entry["error"] = "%s: %s" % (type(exc).__name__, str(exc)[-2000:])
        entry["traceback"] = traceback.format_exc()[-3000:]
    entry["seconds"] = round(time.time() - t0, 1)
    print(json.dumps(entry))
    return 0 if entry["ok"] else 1


def main(root, result_path):
    ns, real = _nvfp4_namespace(root)
    builders = sorted(n for n in ns if n.startswith("_jit_nvfp4_") and n.endswith("_module"))
    print("builders:", builders, "arch list:", ns["_get_nvfp4_cuda_arch_list"](), "GPU:", real, flush=True)
    procs = {b: subprocess.Popen([sys.executable, __file__, "--one", b, root], stdout=subprocess.PIPE,
                                 stderr=subprocess.STDOUT, text=True) for b in builders}
    results = {"stand_ins": ["torch.cuda.get_device_capability -> %s, arch list of the profile %s (this GPU: %s)"
                             % (_capabilities(), ns["_get_nvfp4_cuda_arch_list"](), real),
                             "nvfp4.py's builder functions run from its syntax tree; its custom-op registration "
                             "(sglang.srt.utils.common) is not imported"], "modules": {}}
    for b, p in procs.items():
        out, _err = p.communicate()
        last = [ln for ln in out.splitlines() if ln.startswith("{")]
        entry = json.loads(last[-1]) if last else {"ok": False, "error": out[-3000:]}
        results["modules"][b] = entry
        print("%-36s %s in %ss %s" % (b, "ok" if entry.get("ok") else "FAILED", entry.get("seconds"),
                                      (entry.get("error") or "")[:300]), flush=True)
    # the built libraries and their cubins
    cache = os.environ.get("TVM_FFI_CACHE_DIR", "")
    libs = []
    for dirpath, _dirs, files in os.walk(cache):
        libs += [os.path.join(dirpath, f) for f in files if f.endswith(".so")]
    results["libraries"] = {}
    for lib in sorted(libs):
        elf = subprocess.run(["cuobjdump", "--list-elf", lib], capture_output=True, text=True, check=False)
        results["libraries"][os.path.relpath(lib, cache)] = elf.stdout.strip().splitlines()
        print(lib, elf.stdout.strip().splitlines(), flush=True)
    with open(result_path, "w") as f:
        json.dump(results, f, indent=1, sort_keys=True)
    return 0 if all(e.get("ok") for e in results["modules"].values()) else 1


if __name__ == "__main__":
    if sys.argv[1] == "--one":
        sys.exit(one(sys.argv[2], sys.argv[3]))
    sys.exit(main(sys.argv[1], sys.argv[2]))
