"""What flashinfer promises on the sandbox: flashinfer-python 0.6.3 in the torch venv, torch unchanged."""

import json

import pytest


@pytest.fixture(scope="module")
def venv(host_vars):
    return host_vars.get("sglang_stack_venv") or "/opt/sglang/venv"


def dist_versions(host, venv, *names):
    script = ("import importlib.metadata as m, json, sys\n"
              "def v(n):\n"
              "    try:\n        return m.version(n)\n"
              "    except m.PackageNotFoundError:\n        return None\n"
              "print(json.dumps({n: v(n) for n in sys.argv[1:]}))\n")
    return json.loads(host.check_output("%s/bin/python -c %s %s" % (venv, _quote(script), " ".join(names))))


def _quote(text):
    return "'" + text.replace("'", "'\"'\"'") + "'"


def test_flashinfer_installed_and_torch_unchanged(host, venv):
    versions = dist_versions(host, venv, "flashinfer-python", "torch", "flashinfer-cubin", "flashinfer-jit-cache")
    assert versions == {"flashinfer-python": "0.6.3", "torch": "2.13.0+cpu",
                        "flashinfer-cubin": None, "flashinfer-jit-cache": None}


def test_constraints_pin_the_installed_torch(host, venv):
    lines = [line for line in host.file(venv + "/blackwell-sglang-flashinfer-constraints.txt").content_string.splitlines()
             if line and not line.startswith("#")]
    assert lines == ["torch==2.13.0+cpu"]


def test_flashinfer_imports_without_gpu(host, venv):
    out = host.check_output(venv + "/bin/python -c 'import flashinfer, torch; print(flashinfer.__version__, torch.cuda.is_available())'")
    assert out == "0.6.3 False"


def test_pip_cannot_swap_torch_through_the_constraints(host, venv):
    # a request that needs another torch must fail against the role's constraints file, not replace torch (B19)
    res = host.run("%s/bin/pip install --dry-run --no-deps --quiet -c %s/blackwell-sglang-flashinfer-constraints.txt "
                   "'torch==2.12.0'" % (venv, venv))
    assert res.rc != 0
    assert dist_versions(host, venv, "torch") == {"torch": "2.13.0+cpu"}
