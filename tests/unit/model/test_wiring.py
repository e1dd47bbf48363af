"""The model role's result wired into the service, the release manifest and the drift audit.

The wiring tasks are taken by name from the real playbooks/site.yml's chain (roles/sglang_converge; the model role, its ``service_env`` entry
point, the set_fact that passes the result on) and run by real ansible-playbook on local-connection hosts, followed
by the real sglang_service ``checkpoint`` tasks (sglang_checkpoint_facts, the KV-cache guard), the real environment
file template and the real sglang_release ``manifest`` tasks. playbooks/audit.yml runs unchanged over release trees
under tmp_path. Nothing here needs a GPU, systemd or the Hub (the archive source is real; test_model.py covers the
Hub path against its stand-in).

The one stand-in: the "staged release's Python" is a wrapper around the test's Python; on host ``a`` its
PYTHONPATH holds an empty module named ``hf_transfer`` (the probe is exactly ``import hf_transfer``), on ``b`` not.
"""

import copy
import json
import os
import sys
import tarfile

import pytest
import yaml

import _playbook_standins as standins
import ansible_run
from conftest import ROOT
from test_role import COMMIT, model_files, recap

pytestmark = pytest.mark.slow

WIRING = ("The verified model checkpoint", "The verified model's service environment",
          "Point the service and the release manifest at the verified model")
OTHER = "0123456789abcdef0123456789abcdef01234567"


def _site_tasks(names):
    """The tasks of site.yml's converge play (its chain, sglang_converge's task files) whose names start with one of
    ``names``, in playbook order."""
    plays = standins.static_plays("site.yml")
    play = [p for p in plays if p.get("name") == "Converge the SGLang stack"][0]
    tasks = [t for t in standins.leaf_tasks(play["tasks"]) if t.get("name", "").startswith(names)]
    assert len(tasks) == len(names), [t.get("name") for t in tasks]
    return tasks


def _python(where, hf_transfer):
    """<release>/venv/bin/python: the test's Python, with an importable hf_transfer or without."""
    bindir = where / "venv" / "bin"
    bindir.mkdir(parents=True)
    path = ""
    if hf_transfer:
        (where / "site").mkdir()
        (where / "site" / "hf_transfer.py").write_text("")
        path = str(where / "site")
    (bindir / "python").write_text("#!/bin/sh\nPYTHONPATH=%s exec %s \"$@\"\n" % (path, sys.executable))
    (bindir / "python").chmod(0o755)


def _converge(tmp_path, host_vars, play_vars):
    inventory = {"all": {"hosts": {}}}
    for host, extra in host_vars.items():
        base = tmp_path / host
        release = base / "opt" / "releases" / "r1"
        if not release.exists():
            _python(release, hf_transfer=(host == "a"))
        inventory["all"]["hosts"][host] = dict({
            "ansible_connection": "local", "ansible_python_interpreter": sys.executable,
            "sglang_model_root": str(base / "models"), "sglang_model_state_dir": str(base / "state"),
            "sglang_release_dir": str(release), "sglang_stack_venv": str(base / "no-venv"),
            "sglang_release_manifest_unit_path": str(base / "no-unit"),
            "sglang_stack_model_path": "/inventory/value"}, **extra)
    (tmp_path / "inventory.yml").write_text(yaml.safe_dump(inventory))
    report = str(tmp_path) + "/{{ inventory_hostname }}.wired.json"
    tasks = _site_tasks(WIRING) + [
        {"name": "The service's checkpoint checks (sglang_checkpoint_facts, KV-cache guard) on the path it was given",
         "ansible.builtin.include_role": {"name": "blackwell.sglang.sglang_service", "tasks_from": "check",
                                          "public": True,
                                          # the check changes nothing; in check mode a host without a venv plans
                                          # the flags without reading the parser
                                          "apply": {"check_mode": True}},
         "vars": {"sglang_service_python": "/nonexistent/python"}},
        {"name": "The service's environment file, from the role's template",
         "ansible.builtin.template": {"src": os.path.join(ROOT, "roles", "sglang_service", "templates", "sglang.env.j2"),
                                      "dest": str(tmp_path) + "/{{ inventory_hostname }}.sglang.env", "mode": "0644"}},
        {"name": "The release manifest",
         "ansible.builtin.include_role": {"name": "blackwell.sglang.sglang_release", "tasks_from": "manifest"}},
        {"name": "What the service was given", "ansible.builtin.copy": {
            "dest": report, "mode": "0644",
            "content": "{{ {'model_path': __sglang_service_model_path, 'checkpoint': __sglang_service_checkpoint,"
                       " 'kv': __sglang_service_kv, 'model_env': sglang_service_model_env} | to_json }}"}},
    ]
    play = [{"name": "wiring", "hosts": "all", "gather_facts": False, "vars": play_vars, "tasks": tasks}]
    (tmp_path / "play.yml").write_text(yaml.safe_dump(play, sort_keys=False))
    proc = ansible_run.playbook(tmp_path / "play.yml", tmp_path, inventory=tmp_path / "inventory.yml", cwd=tmp_path)
    with open(str(tmp_path / "ansible.log"), "a") as log:
        log.write(proc.stdout + proc.stderr)
    return proc


def _read(tmp_path, host):
    wired = json.loads((tmp_path / ("%s.wired.json" % host)).read_text())
    manifest = json.loads((tmp_path / host / "opt" / "releases" / "r1" / "manifest.json").read_text())
    env = (tmp_path / ("%s.sglang.env" % host)).read_text()
    return wired, manifest, env


def _archive(tmp_path):
    src = tmp_path / "ctl" / "tiny"
    files = model_files(str(src))
    tarball = tmp_path / "ctl" / "tiny.tar"
    with tarfile.open(str(tarball), "w") as tar:
        for rel in files:
            tar.add(str(src / rel), arcname=rel)
    return tarball


def test_service_path_env_and_manifest_follow_the_verified_directory(tmp_path):
    tarball = _archive(tmp_path)
    play_vars = {"sglang_model_source": "archive", "sglang_model_archive": str(tarball), "sglang_model_revision": COMMIT,
                 "sglang_model_fleet": True, "sglang_model_controller_cache": str(tmp_path / "ctl-cache"),
                 "sglang_model_disk_headroom_bytes": 0}
    first = _converge(tmp_path, {"a": {}, "b": {}}, play_vars)
    assert first.returncode == 0, first.stdout[-5000:] + first.stderr[-2000:]
    digests = set()
    for host in ("a", "b"):
        wired, manifest, env = _read(tmp_path, host)
        verified = str(tmp_path / host / "models" / ("tiny@" + COMMIT))
        # the inventory said /inventory/value; the playbook's wiring replaced it by the verified directory
        assert wired["model_path"] == verified
        # sglang_checkpoint_facts read that directory (the tiny model's config.json), not the inventory's path
        assert wired["checkpoint"]["model_type"] == "llama", wired["checkpoint"]
        assert "not inspected" not in wired["kv"]["reason"]
        assert 'HF_HUB_OFFLINE="1"' in env
        assert manifest["model"]["path"] == verified
        assert manifest["model"]["revision"] == COMMIT
        assert manifest["model"]["source"] == "archive" and manifest["model"]["repository"] == "tiny.tar"
        assert len(manifest["model"]["manifest_digest"]) == 64
        digests.add(manifest["model"]["manifest_digest"])
        # the environment the service got, recorded for a rollback to this release
        assert manifest["model"]["service_env"] == wired["model_env"], (manifest["model"], wired)
    # hf_transfer imports in a's staged venv only: only a's service gets HF_HUB_ENABLE_HF_TRANSFER
    assert 'HF_HUB_ENABLE_HF_TRANSFER="1"' in _read(tmp_path, "a")[2]
    assert "HF_HUB_ENABLE_HF_TRANSFER" not in _read(tmp_path, "b")[2]
    assert _read(tmp_path, "b")[0]["model_env"] == {"HF_HUB_OFFLINE": "1"}
    assert len(digests) == 1                                       # the copy verified against a's manifest
    with open(str(tmp_path / "a" / "models" / ("tiny@" + COMMIT) / ".sglang-model-manifest.json")) as handle:
        written = json.load(handle)
    sys.path.insert(0, os.path.join(ROOT, "collections"))
    from ansible_collections.blackwell.sglang.plugins.module_utils import _model  # pylint: disable=import-outside-toplevel
    assert digests == {_model.manifest_digest(written)}            # the digest of the manifest the role wrote
    second = _converge(tmp_path, {"a": {}, "b": {}}, play_vars)
    assert second.returncode == 0, second.stdout[-4000:]
    assert recap(second.stdout, "a")["changed"] == 0 and recap(second.stdout, "b")["changed"] == 0, second.stdout[-3000:]


def test_without_a_model_the_inventory_path_stays_and_the_manifest_records_null(tmp_path):
    proc = _converge(tmp_path, {"b": {}}, {})
    assert proc.returncode == 0, proc.stdout[-5000:] + proc.stderr[-2000:]
    wired, manifest, env = _read(tmp_path, "b")
    assert wired["model_path"] == "/inventory/value"
    assert manifest["model"] == {"path": "/inventory/value", "revision": "", "source": None, "repository": None,
                                 "manifest_digest": None, "service_env": None}
    assert "HF_HUB_OFFLINE" not in env and wired["model_env"] == {}


# ---------------------------------------------------------------------------------------------- playbooks/audit.yml

MANIFEST = {"schema": 1, "release": {"id": "r1", "dir": "/opt/sglang/releases/r1"},
            "sglang": {"repo": "", "commit": "c" * 40, "version": "0.5.9"}, "python": "3.11.7", "torch": {},
            "packages": {}, "wheels": {}, "unit": {"path": "/x", "sha256": None, "fleet_sha256": None},
            "probe": {"recommended": {"fp4_gemm_backend": None, "moe_runner_backend": None}},
            "model": {"path": "/srv/models/tiny@" + COMMIT, "revision": COMMIT, "source": "hub", "repository": "acme/tiny",
                      "manifest_digest": "d" * 64}}


def _audit(tmp_path, manifests, pins=None):
    hosts = {}
    for host, manifest in manifests.items():
        release = tmp_path / host / "opt" / "releases" / "r1"
        release.mkdir(parents=True)
        (release / "manifest.json").write_text(json.dumps(manifest))
        os.symlink(str(release), str(tmp_path / host / "opt" / "current"))
        hosts[host] = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
                       "sglang_stack_root": str(tmp_path / host / "opt"), "sglang_stack_service_name": "bw-test-no-such-unit"}
        hosts[host].update((pins or {}).get(host, {}))
    (tmp_path / "inventory.yml").write_text(yaml.safe_dump({"all": {"children": {"sglang_servers": {"hosts": hosts}}}}))
    report = tmp_path / "drift.json"
    proc = ansible_run.playbook(os.path.join(ROOT, "playbooks", "audit.yml"), tmp_path, inventory=tmp_path / "inventory.yml",
                                extra_vars={"sglang_audit_report": str(report)}, cwd=tmp_path)
    with open(str(tmp_path / "ansible.log"), "a") as log:
        log.write(proc.stdout + proc.stderr)
    return proc, (json.loads(report.read_text()) if report.exists() else None)


def test_audit_flags_the_host_whose_model_digest_differs(tmp_path):
    other = copy.deepcopy(MANIFEST)
    other["model"]["manifest_digest"] = "e" * 64                # same commit, different files on gpu-3
    proc, report = _audit(tmp_path, {"gpu-1": MANIFEST, "gpu-2": MANIFEST, "gpu-3": other})
    assert proc.returncode != 0, proc.stdout[-3000:]
    assert report is not None, proc.stdout[-3000:]
    assert [(d["host"], d["field"], d["value"], d["expected"]) for d in report["fleet"]] == [
        ("gpu-3", "model manifest digest", "e" * 64, "d" * 64)]
    assert report["hosts"] == [] and report["pins"] == []
    assert "fleet drift on gpu-3: model manifest digest" in proc.stdout


def test_audit_flags_a_host_off_the_inventorys_pin_and_passes_a_converged_fleet(tmp_path):
    moved = copy.deepcopy(MANIFEST)
    moved["model"]["revision"] = OTHER
    pins = {h: {"sglang_model_revision": COMMIT} for h in ("gpu-1", "gpu-2")}
    proc, report = _audit(tmp_path, {"gpu-1": MANIFEST, "gpu-2": moved}, pins)
    assert proc.returncode != 0
    assert report["pins"] == [{"host": "gpu-2", "field": "model revision", "value": OTHER, "expected": COMMIT}]
    assert "pin drift on gpu-2" in proc.stdout

    same = tmp_path / "same"
    same.mkdir()
    proc, report = _audit(same, {"gpu-1": MANIFEST, "gpu-2": MANIFEST}, pins)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert report["drift"] is False and report["summary"] == ["no drift across 2 host(s)"]
