"""What sglang_source promises on the sandbox: the pinned checkout, SGLang importable, torch untouched."""

import json

import pytest

VENV = "/opt/sglang/venv"
DEST = "/opt/sglang/src/sglang"
STATE = VENV + "/blackwell-sglang/sglang_source"


@pytest.fixture(scope="module")
def mirror_commit(host, host_vars):
    mirror = host_vars.get("sandbox_sglang_mirror", "/srv/mirror/sglang.git")
    ref = host_vars.get("sandbox_sglang_mirror_ref", "original-20260307-fixture-kernel")
    return host.check_output("git --git-dir %s rev-parse %s^{commit}", mirror, ref)


def test_checkout_is_at_the_pinned_commit(host, mirror_commit):
    assert host.check_output("git -C %s rev-parse HEAD", DEST) == mirror_commit
    assert host.file(DEST + "/python/pyproject.toml").exists
    assert host.file(DEST + "/sgl-kernel").is_directory


def test_checkout_is_the_real_tree_of_the_original_pin(host):
    # python/ is upstream d28f35240a (the commit message names it); sgl-kernel/ is the fixture, and says so
    message = host.check_output("git -C %s log -2 --format=%%B", DEST)
    assert "d28f35240a28de1e09967975e258b3dd7e74924f" in message
    assert "fixture" in host.file(DEST + "/sgl-kernel/README.md").content_string.lower()
    pyproject = host.file(DEST + "/python/pyproject.toml").content_string
    assert '"sgl-kernel==0.3.21"' in pyproject and '"flashinfer_python==0.6.4"' in pyproject


def test_stamp_is_keyed_on_the_commit_and_torch(host, mirror_commit):
    stamp = json.loads(host.file(STATE + "/stamp.json").content_string)
    assert stamp["commit"] == mirror_commit
    assert stamp["torch"] == "2.13.0+cpu"


def test_torch_is_exactly_the_wheelhouse_build(host):
    out = host.check_output(VENV + "/bin/python -c 'import torch; print(torch.__version__)'")
    assert out.strip().splitlines()[-1] == "2.13.0+cpu"
    # pip was told to keep it: the constraints file pins the installed build.
    assert "torch==2.13.0+cpu" in host.file(STATE + "/constraints.txt").content_string.splitlines()


def test_no_protected_package_came_from_the_index(host):
    dists = json.loads(host.check_output(
        VENV + "/bin/python -c 'import json, importlib.metadata as m; "
        "print(json.dumps(sorted(d.metadata[\"Name\"].lower() for d in m.distributions())))'"))
    for name in ("torchvision", "torchaudio", "sgl-kernel", "sglang-kernel", "flashinfer-python", "pytorch-triton"):
        assert name not in dists


def test_sglang_installed_from_the_checkout_and_importable(host, host_vars):
    out = host.check_output(
        VENV + "/bin/python -c 'import json, sglang, importlib.metadata as m; "
        "d = m.distribution(\"sglang\"); print(json.dumps([sglang.__version__, json.loads(d.read_text(\"direct_url.json\"))]))'")
    version, direct_url = json.loads(out.strip().splitlines()[-1])
    assert version == host_vars["sglang_source_pretend_version"] == "0.0.0.dev0+gd28f35240a"
    assert direct_url["url"] == "file://" + DEST + "/python"


def test_requirements_are_filtered(host):
    reqs = [line for line in host.file(STATE + "/requirements.txt").content_string.splitlines()
            if line and not line.startswith("#")]
    assert "numpy" in reqs
    assert "transformers==4.57.1" in reqs          # SGLang's own pin kept
    assert reqs[-2:] == ["dill", "triton"]         # sglang_source_extra_requirements, appended
    for line in reqs:
        assert not line.lower().startswith(("torch", "sgl-kernel", "flashinfer"))
