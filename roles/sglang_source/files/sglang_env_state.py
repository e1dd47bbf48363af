"""Report what the venv holds, as JSON, for the sglang_source role.

Usage: python sglang_env_state.py STAMP_FILE [requires]

Prints every installed distribution (PEP 503 names -> versions), sglang's version and, with ``requires``, its
Requires-Dist list, plus the stamp file's JSON (null when absent or unreadable). Metadata only: nothing is
imported, so it works before the dependencies are installed.
"""
import json
import re
import sys
from importlib import metadata


def _norm(name):
    return re.sub(r"[-_.]+", "-", name).lower()


def main(argv):
    stamp_path = argv[1] if len(argv) > 1 else ""
    dists = {}
    for dist in metadata.distributions():
        name = dist.metadata.get("Name")
        if name:
            dists[_norm(name)] = dist.version
    out = {"distributions": dict(sorted(dists.items())), "sglang": dists.get("sglang"), "stamp": None}
    if len(argv) > 2 and argv[2] == "requires" and "sglang" in dists:
        out["requires"] = metadata.requires("sglang") or []
    if stamp_path:
        try:
            with open(stamp_path) as handle:
                out["stamp"] = json.load(handle)
        except (OSError, ValueError):
            out["stamp"] = None
    json.dump(out, sys.stdout, sort_keys=True)


if __name__ == "__main__":
    main(sys.argv)
