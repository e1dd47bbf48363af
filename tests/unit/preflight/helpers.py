"""Helpers for the preflight tests: a subprocess runner and fake executables built from recorded output."""

import json
import os
import stat
import subprocess

FIXTURES = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "fixtures")

NVSMI = os.path.join(FIXTURES, "nvidia_smi")
PRE = os.path.join(FIXTURES, "preflight")


def fixture(name):
    return os.path.join(PRE, name)


def read(path):
    with open(path) as handle:
        return handle.read()


def run(argv):
    """Runner with AnsibleModule.run_command semantics: (rc, stdout, stderr), no shell."""
    proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    return proc.returncode, proc.stdout, proc.stderr


def write_exe(path, body):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as handle:
        handle.write("#!/bin/sh\n" + body)
    os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def fake_nvcc(path, version_file, arch_file):
    """An nvcc double that prints recorded --version / --list-gpu-arch output."""
    return write_exe(path, 'case "$1" in\n  --version) cat "%s" ;;\n  --list-gpu-arch) cat "%s" ;;\n'
                           '  *) echo "fake nvcc: $*" >&2; exit 99 ;;\nesac\n' % (version_file, arch_file))


def fake_toolkit(root, version_file, arch_file, cudart, layout="cccl"):
    """A CUDA_HOME tree: bin/nvcc double, include/cuda_runtime_api.h with CUDART_VERSION, CCCL headers.

    :param layout: "cccl" (CUDA 13: include/cccl/cuda/std/utility only), "legacy" (include/cuda/std/utility) or
        "none".
    """
    fake_nvcc(os.path.join(root, "bin", "nvcc"), version_file, arch_file)
    inc = os.path.join(root, "targets", "x86_64-linux", "include")
    os.makedirs(inc, exist_ok=True)
    with open(os.path.join(inc, "cuda_runtime_api.h"), "w") as handle:
        handle.write("/* excerpt */\n#define CUDART_VERSION %d\n" % cudart)
    if layout != "none":
        sub = os.path.join(inc, "cccl", "cuda", "std") if layout == "cccl" else os.path.join(inc, "cuda", "std")
        os.makedirs(sub, exist_ok=True)
        open(os.path.join(sub, "utility"), "w").close()
    if not os.path.exists(os.path.join(root, "include")):
        os.symlink(os.path.join("targets", "x86_64-linux", "include"), os.path.join(root, "include"))
    return root


def fake_cmake(path, version_file):
    return write_exe(path, 'cat "%s"\n' % version_file)


def fake_python(path, probe_file):
    """A python double that answers the torch probe with a recorded line."""
    return write_exe(path, 'cat "%s"\n' % probe_file)


def load_json(path):
    with open(path) as handle:
        return json.load(handle)
