#!/usr/bin/env python3
"""Run gpu_health's logic directly on a GPU machine (no Ansible) and save the verdict plus the raw outputs.

Used by tests/gpu/record_gpu_health.sh. plugins/module_utils/_gpu.py and _gpu_health.py are copied into a
temporary package (they import each other relatively, as Ansible loads them), so only Python 3 is needed.

Writes into --out:
  fields.txt, query.csv       the nvidia-smi --query-gpu fields that were asked (after dropping unknown ones) and its
                              raw stdout: together with tests/fixtures/gpu_health/fake_nvidia_smi.py the recorded
                              answer replays as a fixture (tests/unit/monitoring/test_gpu_health.py)
  query.stderr                its stderr
  kernel.log                  the kernel log that was read (journalctl -k -b 0 / dmesg), NVRM lines only
  kernel_log_info.json        how it was read (source, argv, rc, error)
  verdict.json                the verdict (gpu_health's return value)
  nvidia-smi.txt, nvidia-smi-q.txt   plain `nvidia-smi` and `nvidia-smi -q` for the record
  env.json                    python, platform, time, the command lines
"""
import argparse
import datetime
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def load():
    pkg_root = tempfile.mkdtemp(prefix="gpu_health_")
    pkg = os.path.join(pkg_root, "blackwell_gpu")
    os.mkdir(pkg)
    open(os.path.join(pkg, "__init__.py"), "w").close()
    for name in ("_journal.py", "_gpu.py", "_gpu_health.py"):
        shutil.copy(os.path.join(ROOT, "plugins", "module_utils", name), pkg)
    sys.path.insert(0, pkg_root)
    from blackwell_gpu import _gpu_health  # pylint: disable=import-outside-toplevel
    return _gpu_health


def save(out, name, text):
    with open(os.path.join(out, name), "w") as handle:
        handle.write(text or "")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--expected-gpu-count", default="auto", help="a number, or auto (= nvidia-smi -L lines)")
    parser.add_argument("--timeout", type=int, default=30)
    parser.add_argument("--since", default="boot")
    opts = parser.parse_args()
    gh = load()
    os.makedirs(opts.out, exist_ok=True)
    nvidia_smi = shutil.which("nvidia-smi")
    listing = gh.run_bounded([nvidia_smi, "-L"], opts.timeout) if nvidia_smi else None
    if opts.expected_gpu_count == "auto":
        expected = len([ln for ln in (listing.stdout if listing else "").splitlines() if ln.startswith("GPU ")])
    else:
        expected = int(opts.expected_gpu_count)
    calls = []

    def run(argv, timeout):
        res = gh.run_bounded(argv, timeout)
        calls.append(res.as_dict())
        return res

    verdict, smi = gh.collect(nvidia_smi, kernel_log_source="auto", since=opts.since, expected_gpu_count=expected,
                              timeout=opts.timeout, journalctl=shutil.which("journalctl"), dmesg=shutil.which("dmesg"),
                              run=run)
    if smi is not None:
        save(opts.out, "fields.txt", ",".join(smi["fields"]) + "\n")
        save(opts.out, "query.csv", smi["stdout"])
        save(opts.out, "query.stderr", smi["stderr"])
    info = verdict.get("kernel_log") or {}
    text = ""
    if info.get("argv") and not info.get("error"):
        res = gh.run_bounded(info["argv"], opts.timeout)
        text = "\n".join(ln for ln in res.stdout.splitlines() if "NVRM" in ln)
        text += "\n" if text else ""
    save(opts.out, "kernel.log", text)
    save(opts.out, "kernel_log_info.json", json.dumps(info, indent=2) + "\n")
    save(opts.out, "verdict.json", json.dumps(verdict, indent=2, sort_keys=True) + "\n")
    for name, argv in (("nvidia-smi.txt", [nvidia_smi]), ("nvidia-smi-q.txt", [nvidia_smi, "-q"])):
        if nvidia_smi:
            res = gh.run_bounded(argv, opts.timeout)
            save(opts.out, name, res.stdout + res.stderr)
    save(opts.out, "env.json", json.dumps({
        "python": sys.version, "platform": platform.platform(), "node": platform.node(),
        "time": datetime.datetime.now(datetime.timezone.utc).isoformat(), "nvidia_smi": nvidia_smi,
        "expected_gpu_count": expected, "calls": calls,
        "git": subprocess.run(["git", "-C", ROOT, "rev-parse", "HEAD"], stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, universal_newlines=True, check=False).stdout.strip(),
    }, indent=2) + "\n")
    print(verdict["summary"])
    for gpu in verdict["gpus"]:
        kinds = "; ".join(f["kind"] for f in gpu["findings"])
        print("  GPU %s %s %s: %s %s" % (gpu["index"], gpu["bus_id"], gpu["name"], gpu["status"], kinds))
    for finding in verdict["host_findings"]:
        print("  host: %s %s: %s" % (finding["severity"], finding["kind"], finding["message"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
