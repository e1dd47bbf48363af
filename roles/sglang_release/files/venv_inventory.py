"""Print the venv's Python, every installed distribution and torch's build as JSON (sglang_release manifest).

Run with the venv's interpreter. Reads metadata only (importlib.metadata); torch is imported for its CUDA
build only when it is installed, and an import failure is reported, not raised.
"""
import json
import platform
import sys
from importlib import metadata


def main():
    dists = {}
    for dist in metadata.distributions():
        name = dist.metadata.get("Name")
        if name:
            dists[name.lower().replace("_", "-")] = dist.version
    torch = {}
    if "torch" in dists:
        try:
            import torch as _torch  # noqa: E402 -- only when installed

            torch = {"version": _torch.__version__, "cuda": _torch.version.cuda}
        except Exception as exc:  # report, do not fail the manifest
            torch = {"import_error": "%s: %s" % (type(exc).__name__, exc)}
    json.dump({"python": platform.python_version(), "executable": sys.executable,
               "distributions": dict(sorted(dists.items())), "torch": torch}, sys.stdout, sort_keys=True)


if __name__ == "__main__":
    main()
