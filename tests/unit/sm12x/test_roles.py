"""The hardware profile through the roles, as a play runs them (ansible-playbook, local connection):

* preflight over a mixed inventory: spark-01 answers as a DGX Spark GB10 (cc 12.1, memory [N/A]; the CONSTRUCTED
  tests/fixtures/nvidia_smi/gb10_dgx_spark_constructed) and rtx-01 as the recorded RTX PRO 6000 pair (cc 12.0).
  Each host's capabilities come from its GPUs; the fleet's profile, and so sglang_stack_target_archs, holds both;
  the GB10 host alone gets the unified-memory sizing and the profile's service environment;
* the same inventory with only one kind of host: 12.0 -> [sm_120a], 12.1 -> [sm_121a];
* sgl_kernel_sm120 `tasks_from: plan` right after it, on a copy of the sgl-kernel-shaped fixture project: the
  patched tree compiles every CUDA unit for the fleet's targets on this x86_64 machine, and they are in the build key;
* fp4_probe: a recorded result measured on 12.0 is reused on a 12.0 host and measured again on a GB10 (the verdict
  cache is keyed by compute capability).

Stand-ins: the nvidia-smi double answering from the fixtures; a CUDA home whose nvcc prints the recorded
`nvcc --version` of CUDA 13.0.88; this Python as the release venv's interpreter.
"""

import json
import os
import shutil
import sys

import pytest
import yaml

import ansible_run

# paths from this file (the module name conftest depends on the collection order)
ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
FIXTURES = os.path.join(ROOT, "tests", "fixtures")

SMI = os.path.join(FIXTURES, "nvidia_smi")
HOSTS = {
    "spark-01": os.path.join(SMI, "gb10_dgx_spark_constructed", "nvidia-smi"),
    "rtx-01": os.path.join(SMI, "rtx_pro_6000_x2_pcie_b28", "nvidia-smi"),
}
CC = {"spark-01": "12.1", "rtx-01": "12.0"}

PLAY = """
- name: Preflight, then the kernel plan
  hosts: all
  gather_facts: false
  roles:
    - role: blackwell.sglang.preflight
  tasks:
    - name: Plan the kernel build
      ansible.builtin.include_role:
        name: blackwell.sglang.sgl_kernel_sm120
        tasks_from: plan
      when: plan_kernel | bool
    - name: Dump what the test reads
      ansible.builtin.copy:
        content: "{{ {'caps': preflight_compute_capabilities, 'profile': sglang_stack_hardware_profile,
                      'targets': sglang_stack_target_archs, 'checks': preflight_checks,
                      'env': sglang_stack_service_env, 'args': sglang_stack_service_args,
                      'key_inputs': __sgl_kernel_sm120_plan.key_inputs | default(none),
                      'cost': (__sgl_kernel_sm120_patch.build_cost.after.extensions | default(none))} | to_json }}"
        dest: "{{ dump_dir }}/{{ inventory_hostname }}.json"
        mode: "0600"
"""


def _cuda_home(tmp_path):
    home = tmp_path / "cuda"
    (home / "bin").mkdir(parents=True)
    nvcc = home / "bin" / "nvcc"
    nvcc.write_text("#!/bin/sh\ncat '%s'\n" % os.path.join(FIXTURES, "preflight", "nvcc_13.0.88_version.txt"))
    nvcc.chmod(0o755)
    return str(home)


def _venv(tmp_path):
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    os.symlink(sys.executable, str(venv / "bin" / "python"))
    return str(venv)


def run(tmp_path, hosts, plan_kernel=False):
    dump = tmp_path / "dump"
    dump.mkdir()
    inv = {"all": {"hosts": {}, "vars": {
        "ansible_connection": "local", "ansible_python_interpreter": sys.executable, "preflight_fatal": False,
        "preflight_require_gpu": True, "preflight_disk_paths": {"tmp": str(tmp_path)},
        "preflight_lspci": "/bin/false", "sglang_stack_model_path": str(tmp_path / "model"),
        "preflight_model_path_required": False, "dump_dir": str(dump), "plan_kernel": plan_kernel,
        "sglang_stack_venv": _venv(tmp_path), "sglang_stack_cuda_home": _cuda_home(tmp_path),
        "sgl_kernel_sm120_system_packages": [], "sglang_stack_root": str(tmp_path / "opt"),
        "sglang_stack_kernel_patches": ["cmake_policy_guards", "cccl_include", "fa3_soft_fallback",
                                        "skip_fa3_build", "sm120_only"]}}}
    for name in hosts:
        src = tmp_path / name / "sglang"
        if plan_kernel:
            shutil.copytree(os.path.join(FIXTURES, "sgl_kernel_project"), str(src / "sgl-kernel"))
        inv["all"]["hosts"][name] = {"preflight_nvidia_smi": HOSTS[name], "sglang_stack_compute_capability": CC[name],
                                     "sglang_stack_source_dir": str(src)}
    (tmp_path / "hosts.yml").write_text(yaml.safe_dump(inv))
    (tmp_path / "play.yml").write_text(PLAY)
    res = ansible_run.playbook(tmp_path / "play.yml", tmp_path, inventory=tmp_path / "hosts.yml", timeout=600)
    assert res.rc == 0, res.stdout[-6000:] + res.stderr[-3000:]
    return dict((name, json.loads((dump / ("%s.json" % name)).read_text())) for name in hosts), res.stdout


def checks(dump):
    return dict((c["name"], c) for c in dump["checks"])


@pytest.mark.slow
def test_preflight_over_a_mixed_inventory_and_the_kernel_plan(tmp_path):
    dumps, out = run(tmp_path, ["spark-01", "rtx-01"], plan_kernel=True)
    spark, rtx = dumps["spark-01"], dumps["rtx-01"]
    assert spark["caps"] == ["12.1"] and rtx["caps"] == ["12.0"]
    for d in (spark, rtx):
        assert d["profile"]["capabilities"] == ["12.0", "12.1"]
        assert d["targets"] == ["sm_120a", "sm_121a"]
        assert checks(d)["gpu_family"]["status"] == "pass"
        assert checks(d)["kernel_target_archs"]["status"] == "pass"
        # the build: the patched tree compiles every CUDA unit for both on this x86_64 machine, both are in the key
        assert d["key_inputs"]["target_archs"] == ["sm_120a", "sm_121a"]
        assert d["cost"]["common_ops_sm100_build"]["gencodes"] == ["sm_120a", "sm_121a"]
    # unified memory: the GB10 host alone gets --mem-fraction-static from MemAvailable
    assert checks(spark)["gb10_memory_budget"]["status"] in ("warn", "fail")
    assert checks(rtx)["gb10_memory_budget"]["message"] == "no GB10 (unified memory) in the serving set"
    assert "--mem-fraction-static" not in rtx["args"]
    assert spark["env"]["SGLANG_ENABLE_JIT_DEEPGEMM"] == "0" and rtx["env"]["SGLANG_ENABLE_JIT_DEEPGEMM"] == "0"
    assert "fleet 12.0, 12.1; kernel targets sm_120a, sm_121a" in out


@pytest.mark.slow
@pytest.mark.parametrize("host,targets", [("spark-01", ["sm_121a"]), ("rtx-01", ["sm_120a"])])
def test_preflight_of_one_kind_of_host(tmp_path, host, targets):
    dumps, _out = run(tmp_path, [host])
    assert dumps[host]["targets"] == targets and dumps[host]["profile"]["target_archs"] == targets


PROBE_PLAY = """
- name: Run the fp4_probe role
  hosts: localhost
  gather_facts: false
  roles:
    - role: blackwell.sglang.fp4_probe
  post_tasks:
    - name: Dump the result
      ansible.builtin.copy:
        content: "{{ sglang_stack_probe_result | to_json }}"
        dest: "{{ dump }}"
        mode: "0600"
"""


def _probe(tmp_path, extra):
    (tmp_path / "probe.yml").write_text(PROBE_PLAY)
    vars_ = dict(extra, dump=str(tmp_path / "probe-dump.json"),
                 sglang_stack_release_dir=str(tmp_path / "release"), sglang_stack_has_target_gpu=False,
                 fp4_probe_force=True, fp4_probe_python=sys.executable, fp4_probe_m_list=[1],
                 fp4_probe_read_parser=False)
    res = ansible_run.playbook(tmp_path / "probe.yml", tmp_path, extra_vars=vars_, timeout=300)
    assert res.rc == 0, res.stdout[-3000:] + res.stderr[-2000:]
    return json.loads((tmp_path / "probe-dump.json").read_text()), res.stdout


@pytest.mark.slow
def test_probe_verdicts_are_keyed_by_compute_capability(tmp_path):
    rtx_gpus = [{"index": 0, "name": "NVIDIA RTX PRO 6000 Blackwell Workstation Edition", "compute_cap": "12.0"}]
    gb10_gpus = [{"index": 0, "name": "NVIDIA GB10", "compute_cap": "12.1", "memory_total_mib": None}]
    first, _out = _probe(tmp_path, {"sglang_stack_gpus": rtx_gpus})
    # no GPU here: mark the real module result as measured on the RTX PRO 6000, as a GPU host would have written it
    path = tmp_path / "release" / "probe.json"
    data = json.loads(path.read_text())
    data["device"] = {"present": True, "name": rtx_gpus[0]["name"], "compute_capability": "12.0", "cc": 120}
    path.write_text(json.dumps(data))
    again, out = _probe(tmp_path, {"sglang_stack_gpus": rtx_gpus})
    reused = "reused %s" % path
    assert reused in out and again["device"]["compute_capability"] == "12.0"
    # the same release on a GB10: another key, measured again, never the 12.0 verdicts
    gb10, out = _probe(tmp_path, {"sglang_stack_gpus": gb10_gpus})
    assert reused not in out and "measured on" in out and gb10["device"]["present"] is False
    assert gb10["probe_key"] != first["probe_key"]
    # without a GPU list the inventory's capability keys it
    inv, _out = _probe(tmp_path, {"sglang_stack_compute_capability": "12.1"})
    assert inv["probe_key"] == gb10["probe_key"]
