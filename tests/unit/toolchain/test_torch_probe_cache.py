"""torch_nightly reuses the probe kept in its install stamp only while the GPUs are the same.

roles/torch_nightly/tasks/verify.yml run for real by ansible-playbook on localhost. The "venv" is this test's own
interpreter, which has the CPU torch of requirements-dev (not the pin), so the real probe reports another version and
the role's pin check fails (verify.yml only reads the venv): a passing play proves the stamped probe was used, a failure naming the real torch proves
the probe ran. The stamp check (the shared venv install's venv_stamp call) is given as its registered result,
``matched`` true: what it stands for (the torch closure, the interpreter) is tests/unit/toolchain/test_venv_stamp.py's
subject.
"""

import json
import pathlib
import sys

import pytest

import ansible_run

PIN = "2.12.0.dev20260307+cu130"
GPUS = [{"index": 0, "uuid": "GPU-40c1f441-ab03-10a2-d195-757df461a8b4", "pci_bus_id": "0000:00:06.0",
         "compute_cap": "12.0", "driver_version": "580.159.04", "mig_mode": "Disabled"}]
STAMPED_PROBE = {"version": PIN, "cuda": "13.0", "arch_list": ["sm_90", "sm_100", "sm_120"], "cuda_available": True,
                 "device_caps": ["12.0"], "extras": {}, "import_error": None}


def play(tmp_path, identity, stamp):
    try:
        import torch  # noqa: F401  pylint: disable=import-outside-toplevel,unused-import
    except ImportError:
        pytest.skip("this interpreter has no torch: the real probe would not report one")
    venv = pathlib.Path(sys.executable).parent.parent   # read only: verify.yml changes nothing
    play_vars = {"sglang_stack_torch_version": PIN, "sglang_stack_venv": str(venv), "torch_nightly_extra_packages": [],
                 "torch_nightly_python": sys.executable,
                 "sglang_stack_gpu_identity": identity, "sglang_stack_venv_install_result": stamp}
    tasks = [{"name": "validate", "ansible.builtin.include_role": {
        "name": "blackwell.sglang.torch_nightly", "tasks_from": "validate"}},
        {"name": "verify", "ansible.builtin.include_role": {
            "name": "blackwell.sglang.torch_nightly", "tasks_from": "verify"}},
        {"name": "show", "ansible.builtin.debug": {"msg": "INSTALLED={{ torch_nightly_installed | to_json }}"}}]
    return ansible_run.play(tmp_path, tasks, name="verify", vars=play_vars,
                            env={"ANSIBLE_REMOTE_TEMP": str(tmp_path / "ansible-tmp")})


def stamp(gpus):
    return {"matched": True, "reasons": [], "result": {"gpus": gpus, "probe": STAMPED_PROBE}}


def test_same_gpus_reuse_the_stamped_probe(tmp_path):
    proc = play(tmp_path, GPUS, stamp(GPUS))
    assert proc.returncode == 0, proc.stdout[-3000:]
    # the stamped probe's arch list, not this interpreter's torch's
    installed = json.loads(proc.stdout.split("INSTALLED=")[1].split('"\n')[0].replace('\\"', '"'))
    assert installed["version"] == PIN and installed["arch_list"] == STAMPED_PROBE["arch_list"]


@pytest.mark.parametrize("identity, stamped_gpus", [
    ([dict(GPUS[0], driver_version="590.10")], GPUS),           # a driver update
    ([dict(GPUS[0], uuid="GPU-other")], GPUS),                   # another board in the slot
    (GPUS + [dict(GPUS[0], index=1, uuid="GPU-2")], GPUS),       # a GPU added
    (None, GPUS),                                                # preflight did not run in this play
])
def test_changed_or_unknown_gpus_run_the_probe_again(tmp_path, identity, stamped_gpus):
    import torch  # pylint: disable=import-outside-toplevel,import-error
    proc = play(tmp_path, identity, stamp(stamped_gpus))
    # the real probe ran: the pin check names this interpreter's torch, not the stamped one
    assert proc.returncode != 0
    assert "has torch %s" % torch.__version__.split("+", maxsplit=1)[0] in proc.stdout, proc.stdout[-3000:]


def test_a_stamp_that_did_not_match_is_never_reused(tmp_path):
    proc = play(tmp_path, GPUS, dict(stamp(GPUS), matched=False))
    assert proc.returncode != 0 and "wanted %s" % PIN.split("+", maxsplit=1)[0] in proc.stdout, proc.stdout[-3000:]
