# Copyright: blackwell.sglang contributors
# Apache-2.0 (see LICENSE)
"""Benchmark: the whole FP4 probe on one GPU must finish in < 30 s excluding JIT.

Runs the probe exactly the way ``blackwell.sglang.fp4_kernel_probe`` does on a
target -- the runner and the two modules it needs copied into a fresh temporary
directory and executed with the venv's python -- and reports::

    wall_s          whole probe, process start to result (includes imports)
    setup_s         sum over backends of the first call (FlashInfer JIT compile,
                    cubin load, autotune land here)
    wall_excl_jit_s wall_s - setup_s, compared with --budget-s (default 30)

This is a benchmark, not a timed test: it never runs under pytest.  Usage::

    python tests/bench/fp4_probe_bench.py --python /opt/sglang/venv/bin/python \
        --out /tmp/probe.json [--budget-s 30] [--spec-json '{"m_list": [1, 128]}']

Exit status 0 when the budget holds, 1 when it does not, 2 when the probe failed.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
MODULE_UTILS = os.path.normpath(os.path.join(HERE, "..", "..", "plugins", "module_utils"))
SHIPPED = ("_fp4_probe_runner.py", "fp4_numerics.py", "nvfp4_reference.py")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--python", default=sys.executable, help="interpreter of the venv under test")
    ap.add_argument("--out", required=True, help="where to write the probe result JSON")
    ap.add_argument("--budget-s", type=float, default=30.0)
    ap.add_argument("--spec-json", default="{}", help="probe spec overrides (JSON object)")
    ap.add_argument("--timeout-s", type=float, default=1800.0, help="hard limit for the whole run")
    args = ap.parse_args(argv)

    tmp = tempfile.mkdtemp(prefix="fp4bench-")
    try:
        for name in SHIPPED:
            shutil.copy(os.path.join(MODULE_UTILS, name), os.path.join(tmp, name))
        spec_path = os.path.join(tmp, "spec.json")
        with open(spec_path, "w") as fh:
            json.dump(json.loads(args.spec_json), fh)
        t0 = time.monotonic()
        try:
            proc = subprocess.run([args.python, os.path.join(tmp, SHIPPED[0]), "--spec", spec_path, "--out", args.out],
                                  timeout=args.timeout_s, check=False)
        except subprocess.TimeoutExpired:
            print("FAIL: probe gave no result within %.0f s" % args.timeout_s)
            return 2
        wall = time.monotonic() - t0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if proc.returncode != 0 or not os.path.exists(args.out):
        print("FAIL: probe runner exited with %s" % proc.returncode)
        return 2
    with open(args.out) as fh:
        result = json.load(fh)
    setup = float(result.get("probe", {}).get("setup_s") or 0.0)
    summary = {
        "device": result.get("device"),
        "wall_s": round(wall, 3),
        "runner_wall_s": result.get("probe", {}).get("wall_s"),
        "setup_s": setup,
        "wall_excl_jit_s": round(wall - setup, 3),
        "budget_s": args.budget_s,
        "verdicts": {k: v.get("verdict") for k, v in sorted(result.get("backends", {}).items())},
        "backend_wall_s": {k: v.get("wall_s") for k, v in sorted(result.get("backends", {}).items())},
        "reference": {"ok": (result.get("reference") or {}).get("ok"),
                      "device": (result.get("reference") or {}).get("device"),
                      "wall_s": (result.get("reference") or {}).get("wall_s"),
                      "time_us": {"m%(m)s_n%(n)s_k%(k)s" % c: c.get("time_us")
                                  for c in (result.get("reference") or {}).get("cases", [])}},
        "recommended": result.get("recommended"),
    }
    summary["within_budget"] = summary["wall_excl_jit_s"] < args.budget_s
    print(json.dumps(summary, indent=1, sort_keys=True))
    return 0 if summary["within_budget"] else 1


if __name__ == "__main__":
    sys.exit(main())
