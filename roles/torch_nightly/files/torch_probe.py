"""Describe the torch in this interpreter's environment (blackwell.sglang.torch_nightly).

Run with the venv's python. Prints JSON: version (from the installed distribution's metadata), cuda
(torch.version.cuda, null for CPU builds), arch_list (torch.cuda.get_arch_list(), [] for CPU builds),
cuda_available, device_caps (["12.0", ...] of the devices torch sees), extras ({name: version} for argv),
import_error (null, or why `import torch` failed).
"""
import importlib
from importlib import metadata
import json
import sys


def dist_version(name):
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def main(extra_names):
    out = {"version": dist_version("torch"), "cuda": None, "arch_list": [], "cuda_available": False,
           "device_caps": [], "import_error": None,
           "extras": {name: dist_version(name) for name in extra_names}}
    if out["version"] is not None:
        try:
            torch = importlib.import_module("torch")
            out["cuda"] = torch.version.cuda
            out["arch_list"] = list(torch.cuda.get_arch_list())
            out["cuda_available"] = bool(torch.cuda.is_available())
            if out["cuda_available"]:
                out["device_caps"] = ["%d.%d" % torch.cuda.get_device_capability(i)
                                      for i in range(torch.cuda.device_count())]
        except Exception as exc:  # report, the role turns it into a failure with this text
            out["import_error"] = "%s: %s" % (type(exc).__name__, exc)
    print(json.dumps(out, sort_keys=True))


if __name__ == "__main__":
    main(sys.argv[1:])
