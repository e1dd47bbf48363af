"""The smaller findings of a new user's first run, each through the entry point that showed it (real
ansible-playbook runs against localhost; Molecule's first_run scenario repeats them on a bare container).

* sglang_service warned ``TRITON_PTXAS_PATH is not set`` on every SM120 run although the rendered environment set it
  (the warning looked at the inventory's env only, not at the preflight's computed env that the unit gets).
* playbooks/health.yml called a GPU server without a driver "healthy": the expected GPU count is now the host's share
  of the service's TP size.
* site.yml's first play demanded sglang_service_api_key for the default loopback bind, which the service role
  allows; a key the inventory sets must still resolve.
* site.yml warned that the pattern ``sglang_gateways`` matched nothing on every one-box run.
"""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import pytest
import yaml

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[2]
for path in (HERE.parent, HERE.parent / "bad_input"):       # the shared harnesses, imported by module name
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

import ansible_run  # noqa: E402
from _playbook_standins import PLAYBOOK, standin_playbook  # noqa: E402
from harness import run_role  # noqa: E402

SERVICE = {"sglang_service_model_path": "/srv/models/none", "sglang_service_python": "/nonexistent/venv/bin/python",
           "sglang_service_start": "never", "sglang_service_inspect_checkpoint": False,
           "sglang_service_fp4_gemm_backend": "flashinfer_cudnn", "sglang_service_moe_runner_backend": "flashinfer_cutlass",
           "sglang_service_kv_cache_dtype": "bf16", "sglang_service_compute_capability": "12.0"}
WARNING = "TRITON_PTXAS_PATH is not set"


def _playbook(tmp_path, playbook, inventory, extra=None, check=False):
    (tmp_path / "hosts.yml").write_text(yaml.safe_dump(inventory))
    argv = [PLAYBOOK, "-i", str(tmp_path / "hosts.yml"), str(playbook)] + (["--check"] if check else [])
    if extra:
        argv += ["-e", json.dumps(extra)]
    return subprocess.run(argv, cwd=str(tmp_path), env=ansible_run.env(tmp_path), capture_output=True,
                          text=True, timeout=300, check=False)


def _local(**host_vars):
    return dict(ansible_connection="local", ansible_python_interpreter=sys.executable, **host_vars)


@pytest.mark.slow
@pytest.mark.parametrize("computed_env, extra_env, warned", [
    ({"TRITON_PTXAS_PATH": "/usr/local/cuda-13.0/bin/ptxas"}, {}, False),   # the preflight's, as on every SM120 run
    ({}, {"TRITON_PTXAS_PATH": "/opt/cuda/bin/ptxas"}, False),               # the inventory's own
    ({"NCCL_P2P_DISABLE": "1"}, {}, True),                                   # nobody sets it: the warning stays
])
def test_the_ptxas_warning_reads_the_environment_the_unit_gets(tmp_path, computed_env, extra_env, warned):
    overrides = dict(SERVICE, sglang_stack_service_env=computed_env, sglang_service_extra_env=extra_env)
    run = run_role(tmp_path, "sglang_service", overrides)
    # the check (where sglang_server_args warns) ran to its end: the run stops at the install's first host change
    assert run.rc == 97 and "Create the service group" in (run.blocked or ""), run
    assert (WARNING in run.out) == warned, run


@pytest.mark.slow
def test_health_expects_the_gpus_of_the_tp_size(tmp_path):
    """A server without nvidia-smi is unhealthy by default (TP 1 = one GPU expected); a host that says it has no GPU
    (expected 0) stays healthy."""
    inventory = {"all": {"children": {"sglang_servers": {"hosts": {
        "gpu-box": _local(sglang_stack_service_tp_size=2),
        "cpu-box": _local(sglang_monitoring_health_expected_gpu_count=0)}}}}}
    proc = _playbook(tmp_path, ROOT / "playbooks" / "health.yml", inventory,
                     {"sglang_monitoring_nvidia_smi": str(tmp_path / "no-nvidia-smi"),
                      "sglang_monitoring_health_kernel_log_source": "none"})
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2, out[-4000:]
    assert "unhealthy: gpu-box (see the table above" in out, out[-4000:]
    assert "no nvidia-smi on the host but 2 GPU(s) expected" in out, out[-4000:]
    assert "cpu-box: healthy" in out, out[-4000:]


@pytest.fixture(scope="module")
def site_without_stages(tmp_path_factory):
    """site.yml's inventory play and its gateway play, as shipped (the converge play is left out)."""
    dest = tmp_path_factory.mktemp("site")
    return standin_playbook("site.yml", dest, lambda task: task,
                            select=lambda play: play["name"] != "Converge the SGLang stack")


@pytest.mark.slow
def test_site_accepts_a_one_box_inventory_without_key_or_gateways(tmp_path, site_without_stages):
    inventory = {"all": {"children": {"sglang_servers": {"hosts": {"box-01": _local(ansible_host="10.0.0.5")}}}}}
    proc = _playbook(tmp_path, site_without_stages, inventory)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    assert "Check the service's API key resolves" in out and "ok: [box-01]" in out, out[-4000:]
    assert "Could not match supplied host pattern" not in out, out[-4000:]
    assert "PLAY [SGLang gateway in front of the fleet]" in out and "skipping: no hosts matched" in out, out[-4000:]


@pytest.mark.slow
def test_site_still_refuses_a_key_that_does_not_resolve(tmp_path, site_without_stages):
    inventory = {"all": {"children": {"sglang_servers": {
        "hosts": {"box-01": _local(ansible_host="10.0.0.5")},
        "vars": {"sglang_service_api_key": "{{ vault_sglang_api_key }}"}}}}}
    proc = _playbook(tmp_path, site_without_stages, inventory)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 2, out[-4000:]
    assert "box-01: sglang_service_api_key does not resolve" in out, out[-4000:]


@pytest.mark.slow
def test_site_runs_the_gateway_play_where_the_group_exists(tmp_path, site_without_stages):
    inventory = {"all": {"children": {"sglang_servers": {"hosts": {"box-01": _local(ansible_host="10.0.0.5")}},
                                      "sglang_gateways": {"hosts": {"box-01": {}}}}}}
    proc = _playbook(tmp_path, site_without_stages, inventory)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    gateway_play = out.split("PLAY [SGLang gateway in front of the fleet]", 1)[1]
    assert "skipping: [box-01]" in gateway_play, out[-4000:]          # the host is in the play (gateway not enabled)
