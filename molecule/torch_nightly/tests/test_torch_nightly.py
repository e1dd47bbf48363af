"""What torch_nightly promises on the sandbox: the pinned torch (the CPU wheel from the wheelhouse) in the venv."""

import json

import pytest


@pytest.fixture(scope="module")
def venv(host_vars):
    return host_vars.get("sglang_stack_venv") or "/opt/sglang/venv"


def test_torch_is_the_pinned_wheelhouse_build(host, venv):
    out = host.check_output(
        venv + "/bin/python -c 'import json, torch; "
        "print(json.dumps([torch.__version__, torch.version.cuda, torch.cuda.get_arch_list()]))'")
    version, cuda, arch_list = json.loads(out)
    assert version == "2.13.0+cpu"
    assert cuda is None
    assert arch_list == []


def test_torch_came_from_the_wheelhouse(host, venv):
    # pip records the local file URL in direct_url.json only for direct installs; for --find-links it writes
    # INSTALLER and the wheel's own tag: the +cpu local version exists only in the wheelhouse, not on PyPI
    out = host.check_output(venv + "/bin/python -m pip show torch")
    assert "Version: 2.13.0+cpu" in out


def test_torch_computes(host, venv):
    out = host.check_output(venv + "/bin/python -c 'import torch; print(int((torch.ones(3, 3) @ torch.ones(3, 3)).sum()))'")
    assert out == "27"
