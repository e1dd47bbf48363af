"""Role blackwell.sglang.fp4_probe on this (GPU-less) machine through ansible-playbook.

Skip path: fp4_probe_result says `skipped: no NVIDIA GPU on <host>`, probe.json is written, a second run changes
nothing.  Forced path: the module really runs with this venv's python and reports the missing device.
"""

import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
PLAYBOOK = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")

PLAY = """
- name: Run the fp4_probe role
  hosts: localhost
  gather_facts: false
  roles:
    - role: blackwell.sglang.fp4_probe
  post_tasks:
    - name: Dump the facts for the test
      ansible.builtin.copy:
        content: "{{ {'result': fp4_probe_result, 'passed': fp4_probe_passed} | to_json(sort_keys=true) }}"
        dest: "{{ dump }}"
        mode: "0600"
"""


def _play(tmp_path, extra):
    if not os.path.exists(PLAYBOOK):
        pytest.skip("ansible-playbook not installed next to this python")
    pb = tmp_path / "play.yml"
    pb.write_text(PLAY)
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), LC_ALL="C.UTF-8",
               ANSIBLE_STDOUT_CALLBACK="ansible.builtin.default")
    vars_ = dict(extra, dump=str(tmp_path / "dump.json"), ansible_python_interpreter=sys.executable,
                 fp4_probe_release_dir=str(tmp_path / "release"))
    proc = subprocess.run([PLAYBOOK, "-i", "localhost,", "-c", "local", str(pb), "-e", json.dumps(vars_)],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    recap = [line for line in proc.stdout.splitlines() if line.startswith("localhost")][-1]
    changed = int(recap.split("changed=")[1].split()[0])
    return json.loads((tmp_path / "dump.json").read_text()), changed, proc.stdout


@pytest.mark.slow
def test_skip_without_gpu_writes_result_and_is_idempotent(tmp_path):
    facts, changed, out = _play(tmp_path, {"preflight_has_target_gpu": False})
    assert facts["result"]["skipped"] is True
    assert facts["result"]["reason"] == "skipped: no NVIDIA GPU on localhost"
    assert facts["passed"] is True
    on_disk = json.loads((tmp_path / "release" / "probe.json").read_text())
    assert on_disk["reason"] == "skipped: no NVIDIA GPU on localhost"
    assert "skipped: no NVIDIA GPU on localhost" in out
    dummy_facts, changed2, dummy_out = _play(tmp_path, {"preflight_has_target_gpu": False})
    assert changed2 == 0  # second run: nothing changed (the test's dump has the same content too)


@pytest.mark.slow
def test_forced_probe_runs_the_module_and_reports_no_device(tmp_path):
    forced = {"preflight_has_target_gpu": False, "fp4_probe_force": True, "fp4_probe_python": sys.executable,
              "fp4_probe_m_list": [1, 9]}
    facts, dummy_changed, dummy_out = _play(tmp_path, forced)
    res = facts["result"]
    assert res["skipped"] is False and res["device"]["present"] is False
    assert "torch.cuda.is_available() is False" in res["device"]["reason"]
    assert res["reference"]["ok"] is True and len(res["probe_key"]) == 64
    assert facts["passed"] is False  # fp4_probe_require_gemm_backend and nothing was recommended
    assert json.loads((tmp_path / "release" / "probe.json").read_text())["probe_key"] == res["probe_key"]


@pytest.mark.slow
def test_gpu_result_of_this_release_is_reused_idempotently(tmp_path):
    # A GPU result cannot be produced here, so take a real module result and mark its device present: the
    # role must then reuse it (module task skipped) and a further run must change nothing.
    forced = {"preflight_has_target_gpu": False, "fp4_probe_force": True, "fp4_probe_python": sys.executable,
              "fp4_probe_m_list": [1]}
    _play(tmp_path, forced)
    path = tmp_path / "release" / "probe.json"
    data = json.loads(path.read_text())
    data["device"] = {"present": True, "name": "recorded GPU", "compute_capability": "12.0", "cc": 120}
    data["recommended"]["fp4_gemm_backend"] = "flashinfer_cudnn"
    path.write_text(json.dumps(data))
    facts, dummy_changed, out = _play(tmp_path, forced)
    assert facts["result"]["device"]["name"] == "recorded GPU" and facts["passed"] is True
    assert "reused " in out
    facts, changed, out = _play(tmp_path, forced)
    assert changed == 0 and "reused " in out
    # a different probe input is a different measurement: not reused
    facts, dummy_changed, out = _play(tmp_path, dict(forced, fp4_probe_m_list=[1, 9]))
    assert facts["result"]["device"]["present"] is False and "measured on" in out
