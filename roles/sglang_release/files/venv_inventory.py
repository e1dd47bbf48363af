"""Print the venv's Python, every installed distribution and torch's build as JSON (sglang_release manifest).

Run with the venv's interpreter. Reads metadata only (importlib.metadata); torch is imported for its CUDA
build only when it is installed, and an import failure is reported, not raised.

Kept only for playbooks/audit.yml: the release manifest reads the venv with blackwell.sglang.venv_facts
(module_utils/_venv_metadata.py, the one venv metadata reader) and the audit compares against it, so the names here
are normalised by the same PEP 503 rule. When the audit calls venv_facts too, this file goes.
"""
import json
import platform
import re
import sys
from importlib import metadata


def canonicalize_name(name):
    """PEP 503, as module_utils/_venv_metadata.canonicalize_name (packaging's rule)."""
    try:
        from packaging.utils import canonicalize_name as canonical  # pylint: disable=import-outside-toplevel
    except ImportError:
        return re.sub(r"[-_.]+", "-", name.strip()).lower()
    return str(canonical(name.strip()))


def main():
    dists = {}
    for dist in metadata.distributions():
        name = dist.metadata.get("Name")
        if name:
            dists.setdefault(canonicalize_name(name), dist.version)
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
