"""A rollback across a model change restores the old release's model: playbooks/rollout.yml, rollback.yml and
audit.yml themselves, run by real ansible-playbook on one local-connection host.

Real: the three plays of rollout.yml as written (stage, build, upgrade with its block/rescue, the operator's health
checks), rollback.yml's play, audit.yml's plays; sglang_release (stage the release directory from its key, switch,
rollback, manifest) on a release tree under tmp_path; the model wiring of the staging play (sglang_converge's
``model_env``: sglang_model's ``service_env`` and the set_fact that hands the verified model to the service and the
manifest); the gateway role (no gateways here, so it plans nothing); the audit role.

Stood in (tests/unit/_playbook_standins.py; each keeps the name, tags, ``when`` and ``vars`` of the role call): the
roles that need a GPU host, a network or systemd. The model role's fetch and verification sets ``sglang_model_result``
to the test's model (tests/unit/model covers the real one). sglang_service's main entry point writes the unit the way
the role renders its model: ``ExecStart`` with the real filter ``systemd_exec_args`` from
``sglang_service_model_path`` and an ``Environment=`` line per ``sglang_service_model_env`` entry, and logs the restart.

Release A serves M1, a verified checkpoint (the model role ran: a local directory, its revision and manifest digest,
HF_HUB_OFFLINE=1); release B serves M2, a Hub id configured with ``-e sglang_stack_model_path`` (no model role, no
environment). A rollback to A with M2 still configured must render M1 with its environment, both by rollback.yml and
by the rollout's automatic rollback, and the audit must find the unit serving what A's manifest recorded. B's
stack is also selected with other service flags (KV-cache dtype, FP4 GEMM backend) in the inventory: both rollbacks
must render A's recorded flags.
"""

import grp
import json
import os
import pwd
import subprocess
import sys

import pytest
import yaml

import _playbook_standins as standins
import ansible_run
from conftest import ROOT

PLAYBOOK = standins.PLAYBOOK
HOST = "gpu-1"
REV1 = "1" * 40
M1 = {"path": "/srv/models/m1@" + REV1, "revision": REV1, "source": "hub", "repository": "acme/m1",
      "manifest_digest": "d1" * 32}
M2 = "acme/m2"
# the stack-decided service flags each release's unit renders (A: nothing configured, the stand-in service decides
# bf16 and flashinfer_cudnn; B: both configured in the inventory), and the settings its manifest records
FLAGS_A = {"kv_cache_dtype": "bf16", "fp4_gemm_backend": "flashinfer_cudnn"}
FLAGS_B = {"kv_cache_dtype": "fp8_e4m3", "fp4_gemm_backend": "flashinfer_cutlass"}
SETTINGS_A = {"kv_cache_dtype": "", "fp4_gemm_backend": "", "moe_runner_backend": "", "render_fp4_flags": True}
SETTINGS_B = dict(SETTINGS_A, **FLAGS_B)
INJECTED = [["/bin/sh", "-c", "echo injected health failure >&2; exit 1"]]
pytestmark = pytest.mark.slow

# the role's defaults: sglang_service_model_path = sglang_stack_model_path, sglang_service_model_env = {}
UNIT = r"""[Service]
{% for key, value in sglang_service_model_env | default({}) | dictsort %}Environment="{{ key }}={{ value }}"
{% endfor %}ExecStart={{ ['/opt/sglang/current/venv/bin/python', '-m', 'sglang.launch_server']
                         | blackwell.sglang.systemd_exec_args }} -- \
{% for line in ['--model-path', sglang_service_model_path | default(sglang_stack_model_path, true), '--port', '30000',
                '--kv-cache-dtype', sglang_service_kv_cache_dtype | default('bf16', true),
                '--fp4-gemm-backend', sglang_service_fp4_gemm_backend | default('flashinfer_cudnn', true)]
               | blackwell.sglang.systemd_exec_args(per_flag=true) %}
    {{ line }}{{ ' \\' if not loop.last else '' }}
{% endfor %}"""


def _double(task, tmp):
    _key, _args, role, entry = standins.role_call(task)
    if role in ("sglang_release", "sglang_gateway", "sglang_audit") or (role, entry) == ("sglang_model", "service_env"):
        return task                                   # the real thing
    out = standins.without_call(task)
    if (role, entry) == ("sglang_model", "main"):
        # what the real role publishes after verification (roles/sglang_model/tasks/verify.yml)
        out["ansible.builtin.set_fact"] = {"sglang_model_result": "{{ test_model }}",
                                           "sglang_stack_model_path": "{{ test_model.path }}"}
        return out
    if (role, entry) == ("sglang_service", "main"):
        # the unit as the role renders the model into it, then the restart it would do
        out.pop("ansible.builtin.debug", None)
        out["block"] = [
            {"name": "Write the unit", "ansible.builtin.copy": {
                "dest": "{{ sglang_stack_service_unit_dir }}/{{ sglang_stack_service_name }}.service",
                "content": UNIT, "mode": "0644"}},
            # what the real role publishes for the manifest: the KV-cache dtype it rendered, and the settings as
            # configured for this render ("" = the role decides: here the stand-in's defaults above)
            {"name": "Publish the rendered flags", "ansible.builtin.set_fact": {
                "sglang_stack_kv_cache_dtype": "{{ sglang_service_kv_cache_dtype | default('bf16', true) }}",
                "sglang_service_result": {"settings": {
                    "kv_cache_dtype": "{{ sglang_service_kv_cache_dtype | default('') }}",
                    "fp4_gemm_backend": "{{ sglang_service_fp4_gemm_backend | default('') }}",
                    "moe_runner_backend": "{{ sglang_service_moe_runner_backend | default('') }}",
                    "render_fp4_flags": "{{ sglang_service_render_fp4_flags | default(true) | bool }}"}}}},
            {"name": "Log the restart", "ansible.builtin.shell": (
                "echo 'restart={{ sglang_service_restart | default(false) }} model={{ sglang_service_model_path | default(sglang_stack_model_path) }}'"
                " >> %s/service.log" % tmp), "changed_when": False}]
        return out
    facts = standins.stage_facts(role, entry, switched=None)
    if facts is not None:
        out["ansible.builtin.set_fact"] = facts
    else:
        out["ansible.builtin.debug"] = {"msg": "stand-in for %s/%s" % (role, entry)}
    return out


@pytest.fixture(name="host")
def fixture_host(tmp_path):
    if not os.path.exists(PLAYBOOK):
        pytest.skip("ansible-playbook not installed next to this python")
    root = tmp_path / HOST
    (root / "opt").mkdir(parents=True)
    (root / "units").mkdir()
    (tmp_path / "artifacts" / "k1").mkdir(parents=True)      # play 2's artifact cache (empty: "built here")
    host = {
        "ansible_connection": "local", "ansible_python_interpreter": sys.executable,
        "sglang_stack_root": str(root / "opt"), "sglang_stack_service_unit_dir": str(root / "units"),
        "sglang_release_owner": pwd.getpwuid(os.getuid()).pw_name,
        "sglang_release_group": grp.getgrgid(os.getgid()).gr_name,
        "sgl_kernel_sm120_fetch_dir": str(tmp_path / "artifacts"),
        "sglang_stack_venv": str(root / "no-venv"),
    }
    _write_inventory(tmp_path, host)
    for playbook in ("rollout.yml", "rollback.yml", "audit.yml"):
        dest = tmp_path / playbook.split(".", maxsplit=1)[0]
        dest.mkdir()
        standins.standin_playbook(playbook, dest, lambda task: _double(task, tmp_path))
    return {"tmp": tmp_path, "root": root / "opt", "unit": root / "units" / "sglang.service", "vars": host}


def _write_inventory(tmp, host_vars):
    inventory = {"all": {"children": {"sglang_servers": {"hosts": {HOST: host_vars}}}}}
    (tmp / "inventory.yml").write_text(yaml.safe_dump(inventory))


def _configure(host, **settings):
    """Change the inventory's host vars, as an operator selecting another stack would (not -e: extra vars would also
    outrank what a rollback restores)."""
    host["vars"].update(settings)
    _write_inventory(host["tmp"], host["vars"])


def _play(host, playbook, extra):
    tmp = host["tmp"]
    path = str(tmp / playbook.split(".", maxsplit=1)[0] / playbook)
    proc = subprocess.run([PLAYBOOK, "-i", str(tmp / "inventory.yml"), path, "-e", json.dumps(extra)], cwd=ROOT,
                          env=ansible_run.env(tmp), capture_output=True, text=True, timeout=400, check=False)
    out = proc.stdout + proc.stderr
    with open(str(tmp / "ansible.log"), "a") as log:
        log.write("==== %s %s\n%s\n" % (playbook, json.dumps(extra), out))
    return proc.returncode, out


def _release(host, link):
    path = str(host["root"] / link)
    return os.path.basename(os.readlink(path)) if os.path.islink(path) else None


def _manifest(host, release):
    return json.loads((host["root"] / "releases" / release / "manifest.json").read_text())


def _unit(host):
    return host["unit"].read_text()


def _flags(host):
    """The stack-decided flags the unit renders, as the manifest records them."""
    words = _unit(host).replace("\\\n", " ").split()
    return {w[2:].replace("-", "_"): words[i + 1].strip('"') for i, w in enumerate(words)
            if w in ("--kv-cache-dtype", "--fp4-gemm-backend")}


def _restarts(host):
    path = host["tmp"] / "service.log"
    return path.read_text().splitlines() if path.exists() else []


def test_a_rollback_across_a_model_change_serves_the_old_release_with_its_own_model(host):
    # ---- release A: the verified model M1 (the model role ran)
    rc, out = _play(host, "rollout.yml", {"sglang_release_key_extra": {"t": "A"}, "sglang_model_revision": REV1,
                                          "test_model": M1})
    assert rc == 0, out[-6000:]
    rel_a = _release(host, "current")
    model = _manifest(host, rel_a)["model"]
    assert model == dict(M1, service_env={"HF_HUB_OFFLINE": "1"}), model
    assert "--model-path " + M1["path"] in _unit(host) and 'Environment="HF_HUB_OFFLINE=1"' in _unit(host)

    assert _manifest(host, rel_a)["service"] == {"kv_cache_dtype": "bf16", "settings": SETTINGS_A}, \
        _manifest(host, rel_a)["service"]
    assert _flags(host) == FLAGS_A, _unit(host)

    # ---- release B: another SGLang (key) whose stack the inventory now selects with other service flags, and
    # another model, M2 from the Hub, no model role, no environment
    _configure(host, sglang_service_kv_cache_dtype=FLAGS_B["kv_cache_dtype"],
               sglang_service_fp4_gemm_backend=FLAGS_B["fp4_gemm_backend"])
    m2 = {"sglang_release_key_extra": {"t": "B"}, "sglang_stack_model_path": M2}
    rc, out = _play(host, "rollout.yml", m2)
    assert rc == 0, out[-6000:]
    rel_b = _release(host, "current")
    assert rel_b != rel_a and _release(host, "previous") == rel_a
    model = _manifest(host, rel_b)["model"]
    assert (model["path"], model["manifest_digest"], model["service_env"]) == (M2, None, None), model
    assert "--model-path " + M2 in _unit(host) and "Environment=" not in _unit(host)
    assert _manifest(host, rel_b)["service"]["settings"] == SETTINGS_B and _flags(host) == FLAGS_B, _unit(host)

    # ---- rollback.yml with M2 and B's flags still configured: A comes back with M1, M1's environment and A's flags
    rc, out = _play(host, "rollback.yml", {"sglang_stack_model_path": M2})
    assert rc == 0, out[-6000:]
    assert (_release(host, "current"), _release(host, "previous")) == (rel_a, rel_b)
    assert "--model-path " + M1["path"] in _unit(host), _unit(host)
    assert 'Environment="HF_HUB_OFFLINE=1"' in _unit(host) and M2 not in _unit(host)
    assert _flags(host) == FLAGS_A, _unit(host)
    assert _restarts(host)[-1] == "restart=True model=" + M1["path"], _restarts(host)
    assert ("release %s recorded model %s (revision %s, manifest digest %s); it is served with it, with the service "
            "settings it recorded (fp4_gemm_backend=, kv_cache_dtype=, moe_runner_backend=, render_fp4_flags=true)"
            % (rel_a, M1["path"], REV1, M1["manifest_digest"])) in out, out[-4000:]

    # ---- the audit: the unit serves what A's manifest recorded (same unit as A's rollout wrote, same model)
    report = host["tmp"] / "drift.json"
    rc, out = _play(host, "audit.yml", {"sglang_audit_report": str(report), "sglang_stack_model_path": M2})
    assert rc == 0, out[-6000:]
    assert json.loads(report.read_text())["hosts"] == [], report.read_text()

    # ---- B again, its health check fails: the rollout's automatic rollback returns to A, again with M1
    rc, out = _play(host, "rollout.yml", dict(m2, sglang_rollout_health_checks=INJECTED))
    assert rc != 0 and "rollout stopped at %s (rolled back to" % HOST in out, out[-6000:]
    assert _release(host, "current") == rel_a
    assert (host["root"] / "releases" / rel_b / "ROLLED_BACK").exists()
    assert "--model-path " + M1["path"] in _unit(host) and 'Environment="HF_HUB_OFFLINE=1"' in _unit(host)
    assert _flags(host) == FLAGS_A, _unit(host)
    assert _restarts(host)[-2:] == ["restart=True model=" + M2, "restart=True model=" + M1["path"]], _restarts(host)

    # ---- the audit now reports the unit against A's manifest: still no host drift
    rc, out = _play(host, "audit.yml", {"sglang_audit_report": str(report)})
    assert rc == 0, out[-6000:]


def test_the_audit_names_a_unit_that_serves_another_model_than_its_release_recorded(host):
    rc, out = _play(host, "rollout.yml", {"sglang_release_key_extra": {"t": "A"}, "sglang_model_revision": REV1,
                                          "test_model": M1})
    assert rc == 0, out[-6000:]
    # what a rollback used to leave behind: the old release's unit rendered with the model configured now
    host["unit"].write_text(_unit(host).replace(M1["path"], M2))
    report = host["tmp"] / "drift.json"
    rc, out = _play(host, "audit.yml", {"sglang_audit_report": str(report)})
    assert rc != 0
    hosts = {(d["field"], d["value"], d["expected"]) for d in json.loads(report.read_text())["hosts"]}
    assert ("model path", M2, M1["path"]) in hosts, hosts
    assert "host drift on %s: model path is %r now, manifest says %r" % (HOST, M2, M1["path"]) in out
