"""The rollout play's failure paths (play 3 of playbooks/rollout.yml), run by real ansible-playbook over three
local-connection hosts: a multi-node pair (gpu-a rank 0, gpu-b rank 1) and a single-node host (gpu-c).

The play is loaded from the real playbook (and the chain roles' task files it calls, tests/unit/_playbook_standins.py);
the sglang_release steps (switch, rollback with its marker) run for
real on release trees under tmp_path. Test doubles stand in only for what needs a GPU host: the kernel install,
the FP4 probe, the sglang_service role (it appends "<entry point> restart=<bool>" to a per-host log, and the model
it would render to another, instead of touching systemd) and the manifest. The configured model is
``sglang_stack_model_path: /srv/models/new``; a release returned to is served with the model its manifest recorded
(``old``'s, where the test writes one), or with the configured one when its manifest records none (the automatic
rollback's fallback; rollback.yml refuses that). Faults are injected through the play's own health-check hook
(sglang_rollout_health_checks), so the rescue and the multi-node group block are the playbook's own.
"""

import grp
import json
import os
import pwd
import sys

import pytest
import yaml

import _playbook_standins as standins
import ansible_run

MARKER = "ROLLED_BACK"
pytestmark = pytest.mark.slow


def _double(task, log_dir):
    """Replace a role call that needs a GPU host by a stand-in with the same name, vars and conditions."""
    _key, _args, role, entry = standins.role_call(task)
    if (role, entry) in (("sglang_release", "switch"), ("sglang_release", "rollback"), ("sglang_service", "multinode")):
        return task                                   # the real thing
    out = standins.without_call(task)
    if role == "fp4_probe":
        out["ansible.builtin.set_fact"] = {"fp4_probe_passed": True}
    elif role == "sglang_service":
        out["ansible.builtin.shell"] = (
            "echo '%s restart={{ sglang_service_restart | default(false) }}' >> %s/{{ inventory_hostname }}.log; "
            "echo '%s {{ sglang_service_model_path | default(sglang_stack_model_path) }}'"
            " >> %s/{{ inventory_hostname }}.models" % (entry, log_dir, entry, log_dir))
        out["changed_when"] = False
    else:                                             # sgl_kernel_sm120 install, sglang_release manifest
        out["ansible.builtin.debug"] = {"msg": "stand-in for %s/%s" % (role, entry)}
    return out


def _batched_play(playbook, log_dir, dest):
    path = standins.standin_playbook(playbook, dest, lambda task: _double(task, log_dir), select=lambda p: "serial" in p)
    with open(path) as handle:
        play = yaml.safe_load(handle)
    assert len(play) == 1, "%s has one batched play" % playbook
    play = dict(play[0], gather_facts=False)
    return [play]


OLD_MODEL = "/srv/models/old"
NEW_MODEL = "/srv/models/new"


def _tree(root):
    """releases/{old,new}; current -> old (the running release); the rollout switches to `new`."""
    for rel in ("old", "new"):
        (root / "releases" / rel).mkdir(parents=True)
    os.symlink(str(root / "releases" / "old"), str(root / "current"))


def _old_manifests(roots, hosts):
    """releases/old/manifest.json with the model `old` served (what sglang_release's manifest tasks wrote then)."""
    for host in hosts:
        (roots[host] / "releases" / "old" / "manifest.json").write_text(json.dumps(
            {"schema": 1, "release": {"id": "old"}, "model": {
                "path": OLD_MODEL, "revision": "", "source": None, "repository": None, "manifest_digest": None,
                "service_env": None}}))


def _link(root, name):
    path = str(root / name)
    return os.path.basename(os.readlink(path)) if os.path.islink(path) else None


def _run(tmp_path, failing=None, playbook="rollout.yml", extra=None, prepare=None):
    log_dir = tmp_path / "service"
    log_dir.mkdir()
    roots = {}
    hosts = {}
    for host in ("gpu-a", "gpu-b", "gpu-c"):
        roots[host] = tmp_path / host
        _tree(roots[host])
        hosts[host] = {
            "sglang_stack_root": str(roots[host]),
            "sglang_stack_current": str(roots[host] / "current"),
            "sglang_stack_previous": str(roots[host] / "previous"),
            "sglang_release_dir": str(roots[host] / "releases" / "new"),
            "sglang_release_id": "new",
        }
    inventory = {"all": {
        "vars": {"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
                 "sglang_stack_model_path": NEW_MODEL,
                 "sglang_release_owner": pwd.getpwuid(os.getuid()).pw_name,
                 "sglang_release_group": grp.getgrgid(os.getgid()).gr_name},
        "children": {"sglang_servers": {"children": {
            "pair": {"hosts": {h: hosts[h] for h in ("gpu-a", "gpu-b")},
                     "vars": {"sglang_stack_service_multinode_group": "pair", "sglang_stack_service_tp_size": 16}},
            "solo": {"hosts": {"gpu-c": hosts["gpu-c"]}},
        }}},
    }}
    (tmp_path / "inventory.yml").write_text(yaml.safe_dump(inventory))
    (tmp_path / "play.yml").write_text(yaml.safe_dump(_batched_play(playbook, log_dir, tmp_path)))
    if prepare:
        prepare(roots)
    checks = ("{{ [['/bin/sh', '-c', 'echo injected failure on %s >&2; exit 1']] if inventory_hostname == '%s' "
              "else [] }}" % (failing, failing))
    extra = extra or {"sglang_rollout_serial": ["100%"], "sglang_rollout_health_checks": checks}
    proc = ansible_run.playbook(tmp_path / "play.yml", tmp_path, inventory=tmp_path / "inventory.yml", extra_vars=extra)
    service = {h: (log_dir / ("%s.log" % h)).read_text().split("\n")[:-1] if (log_dir / ("%s.log" % h)).exists()
               else [] for h in hosts}
    return proc, roots, service


def _models(tmp_path, host):
    """The model each sglang_service call of ``host`` would have rendered, in order ("<entry point> <model>")."""
    path = tmp_path / "service" / ("%s.models" % host)
    return path.read_text().splitlines() if path.exists() else []


def _marker(root):
    path = root / "releases" / "new" / MARKER
    return json.loads(path.read_text()) if path.exists() else None


def test_a_failed_rank_takes_its_whole_server_back(tmp_path):
    proc, roots, service = _run(tmp_path, failing="gpu-a", prepare=lambda roots: _old_manifests(roots, ("gpu-a", "gpu-b")))
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out
    # both ranks are back on the old release, the new one is marked on both, nobody keeps a `previous`
    for host in ("gpu-a", "gpu-b"):
        assert _link(roots[host], "current") == "old", (host, out)
        assert _link(roots[host], "previous") is None, host
        assert _marker(roots[host]) is not None, host
    reason = _marker(roots["gpu-a"])["reason"]      # the looped health check's stderr, not just "items failed"
    assert reason.startswith("rollout: Run the operator's health checks against the live release: "), reason
    assert reason.endswith("One or more items failed: injected failure on gpu-a") and len(reason) <= 300, reason
    assert _marker(roots["gpu-b"])["reason"] == "rollout: multi-node member(s) gpu-a failed"
    # each rank restarted once on the new release, then exactly once more, together, on the old one
    for host in ("gpu-a", "gpu-b"):
        assert service[host] == ["check restart=False", "main restart=True", "main restart=True"], (host, service)
        # ... the new release with the configured model, the old one with the model it recorded: the failed rank in
        # its rescue, the other in the group's return
        assert _models(tmp_path, host) == ["check " + NEW_MODEL, "main " + NEW_MODEL, "main " + OLD_MODEL], host
    assert "rollout stopped at multi-node server pair: gpu-a failed" in out
    # the single-node host in the same batch finished its upgrade
    assert _link(roots["gpu-c"], "current") == "new" and _link(roots["gpu-c"], "previous") == "old"
    assert _marker(roots["gpu-c"]) is None


def test_a_failed_single_host_goes_back_alone(tmp_path):
    proc, roots, service = _run(tmp_path, failing="gpu-c")
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out
    assert _link(roots["gpu-c"], "current") == "old" and _link(roots["gpu-c"], "previous") is None
    assert "injected failure on gpu-c" in _marker(roots["gpu-c"])["reason"]
    assert service["gpu-c"] == ["check restart=False", "main restart=True", "main restart=True"], service
    # `old` has no manifest: the automatic rollback still returns (a failed release must not stay live), serving the
    # configured model, and says so
    assert _models(tmp_path, "gpu-c")[-1] == "main " + NEW_MODEL
    assert "/releases/old/manifest.json cannot be read" in out, out[-3000:]
    assert "served with the configured model " + NEW_MODEL in out
    assert "rollout stopped at gpu-c" in out
    for host in ("gpu-a", "gpu-b"):                 # the pair upgraded together and stays upgraded
        assert _link(roots[host], "current") == "new" and _marker(roots[host]) is None, host
        assert service[host] == ["check restart=False", "main restart=True"], (host, service)


def _upgraded(roots):
    """Every host already runs `new` with `previous` -> old (what a finished rollout leaves)."""
    for root in roots.values():
        os.remove(str(root / "current"))
        os.symlink(str(root / "releases" / "new"), str(root / "current"))
        os.symlink(str(root / "releases" / "old"), str(root / "previous"))
    _old_manifests(roots, roots)


def test_rollback_refuses_half_a_multinode_server_before_anything_moves(tmp_path):
    """playbooks/rollback.yml goes one host at a time by default: for the pair that must stop before a link moves."""
    proc, roots, service = _run(tmp_path, playbook="rollback.yml", prepare=_upgraded,
                                extra={"sglang_rollout_hosts": "pair"})
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out
    assert "gpu-b not in this play batch" in out
    for host in ("gpu-a", "gpu-b"):
        assert _link(roots[host], "current") == "new" and _link(roots[host], "previous") == "old", host
        assert service[host] == [], service


def test_rollback_of_a_whole_multinode_server_in_one_batch(tmp_path):
    proc, roots, service = _run(tmp_path, playbook="rollback.yml", prepare=_upgraded,
                                extra={"sglang_rollout_hosts": "pair", "sglang_rollback_serial": 2})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for host in ("gpu-a", "gpu-b"):                  # an operator rollback: current/previous swapped, no marker
        assert _link(roots[host], "current") == "old" and _link(roots[host], "previous") == "new", host
        assert _marker(roots[host]) is None
        assert service[host] == ["main restart=True"], service
        assert _models(tmp_path, host) == ["main " + OLD_MODEL], host       # not the configured /srv/models/new
