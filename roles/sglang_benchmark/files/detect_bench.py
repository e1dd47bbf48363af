"""Report which SGLang serving-benchmark module this Python has, and which of its flags matter to us.

Prints one JSON object: {"modules": {name: origin-or-null}, "sglang": version-or-null, "python": "3.x.y",
"ready_check_timeout": bool}. Only importlib.util.find_spec is used, so nothing heavy (torch) is imported.
"""
import importlib.util
import json
import sys

NAMES = ("sglang.benchmark.serving", "sglang.bench_serving")
out = {"modules": {}, "sglang": None, "python": "%d.%d.%d" % sys.version_info[:3], "ready_check_timeout": False}
for name in NAMES:
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
    if origin:
        try:
            with open(origin, encoding="utf-8") as handle:
                if "--ready-check-timeout-sec" in handle.read():
                    out["ready_check_timeout"] = True
        except OSError:
            pass
print(json.dumps(out))
