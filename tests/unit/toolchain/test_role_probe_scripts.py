"""The Python probes the toolchain roles run on targets (roles/*/files/*.py), run here with this interpreter."""

import importlib.metadata
import json
import os
import pathlib
import subprocess
import sys

import pytest

from ansible_collections.blackwell.sglang.plugins.module_utils import _venv_metadata as vm

ROOT = pathlib.Path(__file__).resolve().parents[3]
WHEEL_HOME = ROOT / "roles" / "cuda_toolchain" / "files" / "cuda_wheel_home.py"
TORCH_PROBE = ROOT / "roles" / "torch_nightly" / "files" / "torch_probe.py"


def _fake_dist(site, name, version, files):
    """A minimal installed distribution (dist-info with METADATA and RECORD) plus its files."""
    info = site / ("%s-%s.dist-info" % (name.replace("-", "_"), version))
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: %s\nVersion: %s\n" % (name, version))
    record = [info.name + "/METADATA,,", info.name + "/RECORD,,"]
    for rel in files:
        path = site / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("")
        record.append(rel + ",,")
    (info / "RECORD").write_text("\n".join(record) + "\n")


def _run(script, site, *args):
    env = dict(os.environ, PYTHONPATH=str(site))
    out = subprocess.run([sys.executable, str(script)] + list(args), capture_output=True, text=True, env=env,
                         check=True, timeout=120)
    return json.loads(out.stdout)


def test_wheel_home_is_found_from_the_nvcc_record(tmp_path):
    # the layout of the real 13.0 wheels: one shared nvidia/cu13 tree
    _fake_dist(tmp_path, "nvidia-cuda-nvcc", "13.0.88", ["nvidia/cu13/bin/nvcc", "nvidia/cu13/bin/ptxas"])
    _fake_dist(tmp_path, "nvidia-nvvm", "13.0.88", ["nvidia/cu13/nvvm/bin/cicc"])
    _fake_dist(tmp_path, "nvidia-cuda-runtime", "13.0.96", ["nvidia/cu13/lib/libcudart.so.13"])
    result = _run(WHEEL_HOME, tmp_path, "nvidia-cuda-nvcc", "nvidia-nvvm", "nvidia-cuda-runtime", "nvidia-cuda-crt")
    assert result["home"] == str((tmp_path / "nvidia" / "cu13").resolve())
    assert result["dists"] == {"nvidia-cuda-nvcc": "13.0.88", "nvidia-nvvm": "13.0.88",
                               "nvidia-cuda-runtime": "13.0.96", "nvidia-cuda-crt": None}


def test_wheel_home_is_null_without_nvcc(tmp_path):
    _fake_dist(tmp_path, "nvidia-cuda-runtime", "13.0.96", ["nvidia/cu13/lib/libcudart.so.13"])
    result = _run(WHEEL_HOME, tmp_path, "nvidia-cuda-nvcc", "nvidia-cuda-runtime")
    assert result["home"] is None
    assert result["dists"]["nvidia-cuda-nvcc"] is None


def test_dist_versions_reads_metadata_only(tmp_path):
    _fake_dist(tmp_path, "flashinfer-python", "0.6.5", ["flashinfer/__init__.py"])
    (tmp_path / "flashinfer" / "__init__.py").write_text("raise RuntimeError('must not be imported')\n")
    # the one venv metadata reader (module_utils._venv_metadata, what venv_facts runs), with this interpreter
    env = dict(os.environ, PYTHONPATH=str(tmp_path))

    def run(argv):
        proc = subprocess.run(argv, capture_output=True, text=True, env=env, check=False, timeout=120)
        return proc.returncode, proc.stdout, proc.stderr
    result = vm.read_venv(run, sys.executable, {"versions": ["flashinfer-python", "flashinfer-jit-cache"]})["versions"]
    assert result == {"flashinfer-python": "0.6.5", "flashinfer-jit-cache": None}


def test_torch_probe_without_torch(tmp_path):
    # an interpreter that has no torch: isolated mode hides site-packages and PYTHONPATH
    out = subprocess.run([sys.executable, "-I", "-S", str(TORCH_PROBE), "torchvision"], capture_output=True,
                         text=True, check=True, timeout=120)
    result = json.loads(out.stdout)
    assert result["version"] is None
    assert result["import_error"] is None
    assert result["extras"] == {"torchvision": None}


def test_torch_probe_with_this_interpreters_torch():
    try:
        version = importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("no torch in this interpreter")
    out = subprocess.run([sys.executable, str(TORCH_PROBE)], capture_output=True, text=True, check=True, timeout=300)
    result = json.loads(out.stdout)
    assert result["version"] == version
    assert result["import_error"] is None
    import torch  # noqa: E402 (only when present)
    assert result["cuda"] == torch.version.cuda
    assert result["arch_list"] == list(torch.cuda.get_arch_list())
