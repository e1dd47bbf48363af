"""Report which SGLang serving-benchmark module this Python has, and which of its flags matter to us.

Prints one JSON object: {"modules": {name: origin-or-null}, "sglang": version-or-null, "python": "3.x.y",
"ready_check_timeout": bool}.

Nothing of SGLang is imported: ``importlib.util.find_spec("sglang")`` locates the package without running it, and
the two candidate modules are looked up as files in its search locations (``find_spec`` of a submodule would
import ``sglang/__init__.py`` and, through it, torch: seconds). Only when that finds nothing (an unusual install,
e.g. zipped) does it fall back to ``find_spec`` of the submodule itself.
"""
import importlib.util
import json
import os
import sys

CANDIDATES = {"sglang.benchmark.serving": ("benchmark", "serving.py"), "sglang.bench_serving": ("bench_serving.py",)}
out = {"modules": dict((name, None) for name in CANDIDATES), "sglang": None,
       "python": "%d.%d.%d" % sys.version_info[:3], "ready_check_timeout": False}
try:
    top = importlib.util.find_spec("sglang")
except (ImportError, ValueError):
    top = None
if top is not None:
    for name, parts in CANDIDATES.items():
        for location in top.submodule_search_locations or []:
            path = os.path.join(location, *parts)
            if os.path.isfile(path):
                out["modules"][name] = path
                break
        if out["modules"][name] is None:
            try:
                spec = importlib.util.find_spec(name)
            except (ImportError, ValueError):
                spec = None
            out["modules"][name] = spec.origin if spec is not None else None
try:
    from importlib.metadata import PackageNotFoundError, version
    try:
        out["sglang"] = version("sglang")
    except PackageNotFoundError:
        out["sglang"] = None
except ImportError:
    pass
# --ready-check-timeout-sec is not in every revision: look for it in the implementation's source
# (sglang.bench_serving is a thin alias of sglang.benchmark.serving on newer revisions, so check both).
for origin in out["modules"].values():
    if origin and os.path.isfile(origin):
        try:
            with open(origin, encoding="utf-8") as handle:
                if "--ready-check-timeout-sec" in handle.read():
                    out["ready_check_timeout"] = True
        except OSError:
            pass
print(json.dumps(out))
