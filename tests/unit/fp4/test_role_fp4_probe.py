"""Role blackwell.sglang.fp4_probe on this (GPU-less) machine through ansible-playbook.

Skip path: sglang_stack_probe_result says `skipped: no NVIDIA GPU on <host>`, probe.json is written, a second run changes
nothing.  Forced path: the module really runs with this venv's python and reports the missing device.
"""

import json
import os
import sys

import pytest

import ansible_run
from ansible_run import ROOT

PLAY = """
- name: Run the fp4_probe role
  hosts: localhost
  gather_facts: false
  roles:
    - role: blackwell.sglang.fp4_probe
  post_tasks:
    - name: Dump the facts for the test
      ansible.builtin.copy:
        content: "{{ {'result': sglang_stack_probe_result, 'passed': fp4_probe_passed} | to_json(sort_keys=true) }}"
        dest: "{{ dump }}"
        mode: "0600"
"""


def _play(tmp_path, extra, expect_rc=0):
    pb = tmp_path / "play.yml"
    pb.write_text(PLAY)
    vars_ = dict(extra, dump=str(tmp_path / "dump.json"), sglang_stack_release_dir=str(tmp_path / "release"))
    proc = ansible_run.playbook(pb, tmp_path, extra_vars=vars_)
    assert proc.returncode == expect_rc, proc
    if expect_rc:
        return None, None, proc.stdout
    return json.loads((tmp_path / "dump.json").read_text()), proc.recap()["changed"], proc.stdout


@pytest.mark.slow
def test_skip_without_gpu_writes_result_and_is_idempotent(tmp_path):
    facts, changed, out = _play(tmp_path, {"sglang_stack_has_target_gpu": False})
    assert facts["result"]["skipped"] is True
    assert facts["result"]["reason"] == "skipped: no NVIDIA GPU on localhost"
    assert facts["passed"] is True
    on_disk = json.loads((tmp_path / "release" / "probe.json").read_text())
    assert on_disk["reason"] == "skipped: no NVIDIA GPU on localhost"
    assert "skipped: no NVIDIA GPU on localhost" in out
    dummy_facts, changed2, dummy_out = _play(tmp_path, {"sglang_stack_has_target_gpu": False})
    assert changed2 == 0  # second run: nothing changed (the test's dump has the same content too)


@pytest.mark.slow
def test_forced_probe_runs_the_module_and_reports_no_device(tmp_path):
    # this venv has no SGLang: no parser to read (test_forced_probe_limits_... reads a recorded one)
    forced = {"sglang_stack_has_target_gpu": False, "fp4_probe_force": True, "fp4_probe_python": sys.executable,
              "fp4_probe_m_list": [1, 9], "fp4_probe_read_parser": False}
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
    forced = {"sglang_stack_has_target_gpu": False, "fp4_probe_force": True, "fp4_probe_python": sys.executable,
              "fp4_probe_m_list": [1], "fp4_probe_read_parser": False}
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


PARSER = os.path.join(ROOT, "tests", "fixtures", "service", "parsers", "sglang-d28f35240a.json")


def _python_with_recorded_parser(tmp_path):
    """This venv's python, except that the parser introspection prints the REAL parser of SGLang d28f35240a
    (recorded from the upstream tree, tests/fixtures/service/parsers/README.md): this venv has no SGLang."""
    script = tmp_path / "python-d28f35240a"
    script.write_text('#!/bin/sh\nif [ "$1" = "-c" ] && printf %%s "$2" | grep -q add_cli_args; then\n'
                      "  tr -d '\\n' < '%s'; echo; exit 0\nfi\nexec '%s' \"$@\"\n" % (PARSER, sys.executable))
    script.chmod(0o755)
    return str(script)


@pytest.mark.slow
def test_forced_probe_limits_the_recommendation_to_the_parser_choices(tmp_path):
    with open(PARSER, encoding="utf-8") as handle:
        actions = {o: a for a in json.load(handle)["actions"] for o in a["option_strings"]}
    forced = {"sglang_stack_has_target_gpu": False, "fp4_probe_force": True, "fp4_probe_m_list": [1],
              "fp4_probe_python": _python_with_recorded_parser(tmp_path)}
    facts, dummy_changed, dummy_out = _play(tmp_path, forced)
    res = facts["result"]
    assert res["parser"].startswith("sglang 0.0.0.dev0+gd28f35240a")
    assert res["allowed"] == {"fp4_gemm_backend": actions["--fp4-gemm-backend"]["choices"],
                              "moe_runner_backend": actions["--moe-runner-backend"]["choices"]}
    # at this pin SGLang has no `cutlass` FP4 GEMM choice: sgl_kernel's NVFP4 GEMM can never be recommended
    assert "cutlass" not in res["allowed"]["fp4_gemm_backend"]


@pytest.mark.slow
def test_a_requested_backend_the_parser_refuses_fails_before_probing(tmp_path):
    forced = {"sglang_stack_has_target_gpu": False, "fp4_probe_force": True, "fp4_probe_m_list": [1],
              "fp4_probe_python": _python_with_recorded_parser(tmp_path),
              "fp4_probe_allowed_fp4_gemm_backends": ["flashinfer_cudnn", "marlin"]}
    dummy_facts, dummy_changed, out = _play(tmp_path, forced, expect_rc=2)
    assert "fp4_probe_allowed_fp4_gemm_backends=" in out and "sglang 0.0.0.dev0+gd28f35240a" in out
    assert "accepts --fp4-gemm-backend" in out
    assert not (tmp_path / "release" / "probe.json").exists()
