"""What the no-op converge's cached import checks rely on, on a real GPU machine.

Run on the H200 device (no Ansible; its Python 3.12 with torch 2.11+cu130):

    python3 tests/gpu/record_cached_checks.py --out "$OUT/cached_checks"

1. The GPU identity. preflight publishes ``sglang_stack_gpu_identity``: of each GPU that ``gpu_facts`` reports, the
   keys index, uuid, pci_bus_id, compute_cap, driver_version and mig_mode. torch_nightly's probe and
   sgl_kernel_sm120's import check reuse their stamped result only while it is unchanged, so every key must be
   there with a value on a real GPU, and it must stay the same across reads while the memory in use may change.
2. torch's build without importing torch. ``venv_facts`` (module_utils/_venv_metadata.py, ``torch_build``) parses
   ``torch/version.py``; it must give exactly ``torch.__version__`` and ``torch.version.cuda`` of the import.
3. roles/torch_nightly/files/torch_probe.py, whose output the install stamp keeps: its result on this GPU.

Writes result.json; exits 1 when a check fails.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
IDENTITY_KEYS = ("index", "uuid", "pci_bus_id", "compute_cap", "driver_version", "mig_mode")   # preflight/tasks/main.yml


def load(*names):
    """The named module_utils files as a plain package (no Ansible on the device)."""
    pkg_root = tempfile.mkdtemp(prefix="cached_checks_")
    pkg = os.path.join(pkg_root, "blackwell_mu")
    os.mkdir(pkg)
    open(os.path.join(pkg, "__init__.py"), "w").close()
    for name in names:   # copied first, imported in order (_gpu imports _journal relatively)
        shutil.copy(os.path.join(ROOT, "plugins", "module_utils", name + ".py"), pkg)
    sys.path.insert(0, pkg_root)
    return [__import__("blackwell_mu." + name, fromlist=[name]) for name in names]


def run(argv):
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    return proc.returncode, proc.stdout, proc.stderr


def identity(gpus):
    return [{k: v for k, v in gpu.items() if k in IDENTITY_KEYS} for gpu in gpus]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--python", default=sys.executable)
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    gpu, venv_metadata = load("_journal", "_gpu", "_venv_metadata")[1:]
    checks = {}

    smi = shutil.which("nvidia-smi")
    first = gpu.collect(run, smi, topology=False, pcie=False)
    time.sleep(2)
    second = gpu.collect(run, smi, topology=False, pcie=False)
    ident = identity(first["gpus"])
    checks["identity_has_every_key"] = bool(ident) and all(
        set(IDENTITY_KEYS) <= set(entry) and all(entry[k] is not None for k in IDENTITY_KEYS) for entry in ident)
    checks["identity_stable_across_reads"] = ident == identity(second["gpus"])

    # the reader runs in the venv's interpreter as the modules run it (its own source handed over)
    state = venv_metadata.read_venv(run, args.python, {"torch_build": True, "closure": False, "versions": ["torch"]})
    imported = json.loads(subprocess.run(
        [args.python, "-c", "import json, torch; print(json.dumps({'version': torch.__version__, 'cuda': torch.version.cuda}))"],
        capture_output=True, text=True, timeout=300, check=True).stdout)
    checks["version_py_equals_import"] = state["torch"] == imported

    probe = subprocess.run([args.python, os.path.join(ROOT, "roles", "torch_nightly", "files", "torch_probe.py")],
                           capture_output=True, text=True, timeout=300, check=False)
    probe_out = json.loads(probe.stdout) if probe.returncode == 0 else {"rc": probe.returncode, "stderr": probe.stderr}
    checks["probe_sees_the_gpus"] = probe_out.get("device_caps") == [g["compute_cap"] for g in first["gpus"]]

    result = {"checks": checks, "identity": ident, "memory_used_mib": [g.get("memory_used_mib") for g in first["gpus"]],
              "driver_version": first["driver_version"], "venv_facts_torch": state["torch"], "import_torch": imported,
              "torch_probe": probe_out}
    with open(os.path.join(args.out, "result.json"), "w") as handle:
        json.dump(result, handle, indent=2, sort_keys=True)
    print(json.dumps(result, indent=2, sort_keys=True))
    return 0 if all(checks.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
