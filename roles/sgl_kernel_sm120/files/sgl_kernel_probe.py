"""Report and verify the installed sgl-kernel (blackwell.sglang.sgl_kernel_sm120). Run with the venv's python.

  sgl_kernel_probe.py dists    -> {"dists": {"sgl-kernel": {"version", "direct_url"} | null, "sglang-kernel": ...}}
  sgl_kernel_probe.py verify   -> {"import_ok", "error", "package_dir", "version", "so_files", "flash_ops_files",
                                   "flash_attn_ok", "flash_attn_error", "fa3_available", "is_fa3_supported"}
Prints one JSON document; exit code 0 even when the import fails (the role decides and classifies the error).
"""
import glob
from importlib import metadata
import json
import os
import sys
import traceback

DISTS = ("sgl-kernel", "sglang-kernel")


def dists():
    out = {}
    for name in DISTS:
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            out[name] = None
            continue
        url = None
        try:
            raw = dist.read_text("direct_url.json")
            url = json.loads(raw).get("url") if raw else None
        except (OSError, ValueError):
            url = None
        out[name] = {"version": dist.version, "direct_url": url}
    return {"dists": out}


def device_capability():
    """``"9.0"``-style compute capability of GPU 0, or None (no torch CUDA / no GPU). sgl_kernel picks the
    common_ops variant by this value at import (sgl_kernel/load_utils.py), so a wheel built only for sm_120a cannot
    be imported on another GPU: the role then reports that instead of failing."""
    try:
        import torch
        if torch.cuda.is_available():
            return "%d.%d" % torch.cuda.get_device_capability(0)
    except Exception:  # noqa: BLE001 - no usable CUDA: the import check decides
        return None
    return None


def verify():
    res = {"import_ok": False, "error": None, "flash_attn_ok": False, "flash_attn_error": None,
           "device_capability": device_capability()}
    try:
        import sgl_kernel
    except Exception:  # noqa: BLE001 - reported to the role
        res["error"] = traceback.format_exc(limit=3)
        return res
    pkg = os.path.dirname(os.path.abspath(sgl_kernel.__file__))
    res.update(import_ok=True, package_dir=pkg, version=getattr(sgl_kernel, "__version__", None),
               so_files=sorted(os.path.relpath(p, pkg) for p in glob.glob(os.path.join(pkg, "**", "*.so"), recursive=True)),
               flash_ops_files=sorted(os.path.basename(p) for p in glob.glob(os.path.join(pkg, "flash_ops*"))))
    try:
        from sgl_kernel import flash_attn
    except Exception:  # noqa: BLE001
        res["flash_attn_error"] = traceback.format_exc(limit=3)
        return res
    res["flash_attn_ok"] = True
    res["fa3_available"] = getattr(flash_attn, "FA3_AVAILABLE", None)
    try:
        res["is_fa3_supported"] = bool(flash_attn.is_fa3_supported())
    except Exception as exc:  # noqa: BLE001 - e.g. no CUDA device
        res["is_fa3_supported"] = None
        res["is_fa3_supported_error"] = repr(exc)
    return res


if __name__ == "__main__":
    mode = sys.argv[1] if len(sys.argv) > 1 else "dists"
    print(json.dumps(dists() if mode == "dists" else verify(), sort_keys=True))
