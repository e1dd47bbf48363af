"""cuda_toolchain's verification (roles/cuda_toolchain/tasks/verify.yml) run for real by ansible-playbook on localhost,
against fake toolkits (an nvcc double answering with recorded output, CUDART_VERSION in the runtime header): one check
names whatever falls short of the request, and in check mode a toolkit not installed yet is no failure."""

import importlib.util
import json
import os

import ansible_run
from conftest import ROOT

_SPEC = importlib.util.spec_from_file_location("preflight_helpers", os.path.join(ROOT, "tests", "unit", "preflight", "helpers.py"))
helpers = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(helpers)


def verify(tmp_path, home, check=False, args=()):
    tasks = [{"name": "verify",
              "ansible.builtin.include_role": {"name": "blackwell.sglang.cuda_toolchain", "tasks_from": "verify"}},
             {"name": "show", "ansible.builtin.debug": {
                 "msg": "FACTS={{ [cuda_toolchain_home, sglang_stack_nvcc_version] | to_json }}"}}]
    return ansible_run.play(tmp_path, tasks, name="verify", check=check, args=args, vars={
        "sglang_stack_cuda_install_method": "existing", "cuda_toolchain_existing_home": str(home),
        "sglang_stack_cuda_version": "13.0"})


def test_an_older_toolkit_is_named_with_what_it_lacks(tmp_path):
    home = helpers.fake_toolkit(str(tmp_path / "cuda-12.6"), helpers.fixture("nvcc_12.6.68_version.txt"),
                                helpers.fixture("nvcc_12.6_list_gpu_arch.txt"), 12060, layout="legacy")
    res = verify(tmp_path, home)
    assert res.returncode != 0
    assert "%s/bin/nvcc is 12.6.68 (wanted 13.0); it cannot target compute_120" % home in res.stdout, res.stdout[-3000:]
    assert "the runtime headers say CUDA 12.6 (CUDART_VERSION)" in res.stdout


def test_no_nvcc_names_the_variable_to_set(tmp_path):
    res = verify(tmp_path, tmp_path / "nowhere")
    assert res.returncode != 0
    assert "No executable nvcc at %s/bin/nvcc (method existing); set cuda_toolchain_existing_home." % (
        tmp_path / "nowhere") in res.stdout, res.stdout[-3000:]


def test_check_mode_before_the_install_is_no_failure(tmp_path):
    # the check's result says why nothing was verified (shown with -v)
    res = verify(tmp_path, tmp_path / "nowhere", check=True, args=("-v",))
    assert res.returncode == 0, res.stdout[-3000:]
    assert "nvcc verification and the compile proof run on the real converge" in res.stdout
    facts = json.loads(res.stdout.split("FACTS=")[1].split("\n")[0].rstrip('"').replace('\\"', '"'))
    assert facts == [str(tmp_path / "nowhere"), ""]
