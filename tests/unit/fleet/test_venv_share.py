"""The release venv built once per release id and platform (playbooks/rollout.yml's staging play, sglang_rollout
venv_plan / venv_archive / venv_unpack), run by real ansible-playbook over local-connection hosts.

A venv is not relocatable, so every host must see its venv at the same path: each host's interpreter
(``ansible_python_interpreter``) is a wrapper that runs the module in a mount namespace of its own, with the host's
directory ``<tmp>/hosts/<host>`` bound over the one ``sglang_stack_root`` (``<tmp>/opt``) all hosts share. Whatever
a module or a command of a host writes under the root lands in that host's directory; the controller's artifact cache,
the hosts' transfer directories (``<tmp>/transfer/<host>``) and the stage log are outside the root, the same for all.

Real: the staging play as written (its plan, archive and unpack tasks, tar, sha256, fetch and copy to the
controller's cache), sglang_release (release directory from the key), the venv_stamp and venv_facts modules.
Stood in (tests/unit/_playbook_standins.py): the roles that need a GPU host or a network. The venv stages (torch,
FlashInfer, SGLang) are each a real venv_stamp check, and when it misses a stand-in for pip (``python -m venv`` the
first time, one distribution ``fake-<stage>==1.0`` with its METADATA and RECORD) and the stamp's record, as the roles
do; each logs ``<host> <stage> installed`` or ``<host> <stage> matched`` to ``<tmp>/stages.log``.
"""

import hashlib
import json
import os
import subprocess
import sys

import packaging
import pytest
import yaml

import _playbook_standins as standins
import ansible_run

pytestmark = pytest.mark.slow
STAGES = ("torch", "flashinfer", "sglang")
STAGE_ROLES = {"torch_nightly": "torch", "flashinfer": "flashinfer", "sglang_source": "sglang"}
WRAPPER = """#!/bin/sh
exec unshare --user --map-root-user --mount /bin/sh -c 'mount --bind "$1" "$2" && shift 2 && exec "$@"' wrap %s %s %s "$@"
"""


def _venv_stage(stage, log):
    """A venv stage as the roles do it: the stamp check, pip (stood in) and the stamp's record when it missed."""
    venv = "{{ sglang_stack_venv }}"
    stamp = {"path": venv + "/.blackwell-sglang-stamps/standin-%s.json" % stage, "python": venv + "/bin/python",
             "requirements": ["fake-%s==1.0" % stage], "inputs": {"stage": stage}}
    var = "standin_%s_stamp" % stage
    install = "\n".join([
        "set -e",
        "V='%s'" % venv,
        "[ -x \"$V/bin/python\" ] || '%s' -m venv --without-pip \"$V\"" % sys.executable,
        "SP=$(\"$V/bin/python\" -c 'import sysconfig; print(sysconfig.get_paths()[\"purelib\"])')",
        # venv_stamp compares versions with the venv's packaging (pip's vendored copy in a real venv)
        "[ -d \"$SP/packaging\" ] || cp -r '%s' \"$SP/\"" % os.path.dirname(packaging.__file__),
        "D=\"$SP/fake_%s-1.0.dist-info\"" % stage,
        "mkdir -p \"$D\"",
        "printf 'Metadata-Version: 2.1\\nName: fake-%s\\nVersion: 1.0\\n' > \"$D/METADATA\"" % stage,
        "printf 'fake_%s-1.0.dist-info/METADATA,,\\n' > \"$D/RECORD\"" % stage,
        "echo '{{ inventory_hostname }} %s installed' >> %s" % (stage, log),
    ])
    return [
        {"name": "stamp check (%s)" % stage, "blackwell.sglang.venv_stamp": stamp, "register": var},
        {"name": "pip (stand-in, %s)" % stage, "ansible.builtin.shell": install, "when": "not %s.matched" % var},
        {"name": "stamp record (%s)" % stage, "blackwell.sglang.venv_stamp": dict(stamp, state="record"),
         "when": ["not %s.matched" % var, "not ansible_check_mode"]},
        {"name": "matched (%s)" % stage, "changed_when": False, "when": "%s.matched" % var,
         "ansible.builtin.shell": "echo '{{ inventory_hostname }} %s matched' >> %s" % (stage, log)},
    ]


def _double(task, log):
    _key, _args, role, entry = standins.role_call(task)
    if role == "sglang_release":
        return task                                   # the real release directory
    out = standins.without_call(task)
    if role in STAGE_ROLES:
        out["block"] = _venv_stage(STAGE_ROLES[role], log)
        return out
    facts = standins.stage_facts(role, entry, switched=None)
    if facts is not None:
        out["ansible.builtin.set_fact"] = facts
    else:
        out["ansible.builtin.debug"] = {"msg": "stand-in for %s/%s" % (role, entry)}
    return out


def _namespaces_work(tmp_path):
    probe = tmp_path / "ns-probe"
    probe.mkdir()
    try:
        proc = subprocess.run(["unshare", "--user", "--map-root-user", "--mount", "/bin/sh", "-c",
                               'mount --bind "$0" "$0"', str(probe)], capture_output=True, timeout=30, check=False)
    except OSError:
        return False
    return proc.returncode == 0


class Fleet(object):
    """Hosts on local connections, each in its own mount namespace over the shared root."""

    def __init__(self, tmp_path):
        self.tmp = tmp_path
        self.root = tmp_path / "opt"
        self.root.mkdir()
        self.cache = tmp_path / "artifacts" / "release-venv"
        self.log = tmp_path / "stages.log"
        self.log.write_text("")
        self.play = standins.standin_playbook("rollout.yml", tmp_path, lambda task: _double(task, self.log),
                                              select=lambda p: p["name"].startswith("Stage "))
        self.runs = 0

    def host(self, name):
        home = self.tmp / "hosts" / name
        home.mkdir(parents=True, exist_ok=True)
        (self.tmp / "transfer" / name).mkdir(parents=True, exist_ok=True)
        wrapper = self.tmp / "hosts" / ("python-%s" % name)
        wrapper.write_text(WRAPPER % (home, self.root, sys.executable))
        wrapper.chmod(0o755)
        return {"ansible_python_interpreter": str(wrapper),
                "sglang_rollout_venv_transfer_dir": str(self.tmp / "transfer" / name)}

    def run(self, hosts, extra=None, **kwargs):
        """One run of the staging play; ``hosts``: {name: host vars}. Returns the Result and the stage log lines
        this run added."""
        # root: the user the modules run as in their namespace (--map-root-user), whoever runs the test
        common = {"ansible_connection": "local", "sglang_stack_root": str(self.root),
                  "sglang_rollout_venv_fetch_dir": str(self.cache),
                  "sglang_release_owner": "root", "sglang_release_group": "root"}
        inventory = {"all": {"vars": common, "children": {"sglang_servers": {
            "hosts": {name: dict(self.host(name), **(hvars or {})) for name, hvars in hosts.items()}}}}}
        self.runs += 1
        path = self.tmp / ("inventory-%d.yml" % self.runs)
        path.write_text(yaml.safe_dump(inventory))
        before = len(self.log.read_text().splitlines())
        proc = ansible_run.playbook(self.play, self.tmp, inventory=path, extra_vars=extra, python=False, timeout=600,
                                    **kwargs)
        with open(str(self.tmp / "ansible.log"), "a") as out:
            out.write("==== run %d %s\n%s\n" % (self.runs, sorted(hosts), proc.out))
        return proc, self.log.read_text().splitlines()[before:]

    def release(self, host):
        """The id of the one release directory on ``host``."""
        ids = os.listdir(str(self.tmp / "hosts" / host / "releases"))
        assert len(ids) == 1, ids
        return ids[0]

    def venv(self, host):
        return self.tmp / "hosts" / host / "releases" / self.release(host) / "venv"

    def marker(self, host):
        path = self.tmp / "hosts" / host / "releases" / self.release(host) / "venv-archive.json"
        return json.loads(path.read_text()) if path.exists() else None

    def archives(self):
        """{(release id, platform): manifest} of the controller's cache."""
        found = {}
        if self.cache.exists():
            for rel in os.listdir(str(self.cache)):
                for platform in os.listdir(str(self.cache / rel)):
                    manifest = self.cache / rel / platform / "manifest.json"
                    found[(rel, platform)] = json.loads(manifest.read_text()) if manifest.exists() else None
        return found


@pytest.fixture(name="fleet")
def fixture_fleet(tmp_path):
    if not os.path.exists(standins.PLAYBOOK):
        pytest.skip("ansible-playbook not installed next to this python")
    if not _namespaces_work(tmp_path):
        pytest.skip("unshare --user --mount is not permitted here (each test host needs a mount namespace)")
    return Fleet(tmp_path)


def _by_host(lines):
    """{host: [(stage, what)]} of stage log lines."""
    found = {}
    for line in lines:
        host, stage, what = line.split()
        found.setdefault(host, []).append((stage, what))
    return found


def _tree(path):
    """{relative path: sha256 or link target} of every file and link under ``path``."""
    found = {}
    for top, dirs, files in os.walk(str(path)):
        for name in files + [d for d in dirs if os.path.islink(os.path.join(top, d))]:
            full = os.path.join(top, name)
            rel = os.path.relpath(full, str(path))
            if os.path.islink(full):
                found[rel] = "-> " + os.readlink(full)
            else:
                with open(full, "rb") as handle:
                    found[rel] = hashlib.sha256(handle.read()).hexdigest()
    return found


INSTALLED = [(stage, "installed") for stage in STAGES]
MATCHED = [(stage, "matched") for stage in STAGES]


def test_one_builder_per_release_id_the_others_unpack_a_rerun_changes_nothing_and_hosts_join_later(fleet):
    # two release ids: a and b share one, c and d another (a key input only they set)
    other = {"sglang_release_key_extra": {"fleet": "second"}}
    hosts = {"gpu-a": {}, "gpu-b": {}, "gpu-c": other, "gpu-d": other}
    proc, lines = fleet.run(hosts)
    assert proc.ok, proc
    # the first host of each release id in play order ran pip (every stage); the others never did, and their stages,
    # run after the unpack, found every install stamp matching
    assert _by_host(lines) == {"gpu-a": INSTALLED, "gpu-c": INSTALLED, "gpu-b": MATCHED, "gpu-d": MATCHED}, lines
    rel_ab, rel_cd = fleet.release("gpu-a"), fleet.release("gpu-c")
    assert rel_ab != rel_cd and fleet.release("gpu-b") == rel_ab and fleet.release("gpu-d") == rel_cd
    archives = fleet.archives()
    assert sorted(rel for rel, _platform in archives) == sorted([rel_ab, rel_cd]), archives
    for (rel, platform), manifest in archives.items():
        builder, unpacker = ("gpu-a", "gpu-b") if rel == rel_ab else ("gpu-c", "gpu-d")
        assert manifest["built_on"] == builder and manifest["release_id"] == rel and manifest["platform"] == platform
        assert manifest["venv"] == "%s/releases/%s/venv" % (fleet.root, rel)
        assert {"fake-torch": "1.0", "fake-flashinfer": "1.0", "fake-sglang": "1.0"}.items() <= manifest["distributions"].items()
        data = (fleet.cache / rel / platform / "venv.tar.zst").read_bytes()
        assert manifest["archive"]["sha256"] == hashlib.sha256(data).hexdigest() == \
            (fleet.cache / rel / platform / "venv.tar.zst.sha256").read_text().split()[0]
        assert manifest["archive"]["bytes"] == len(data) and manifest["venv_bytes"] > 0
        # the unpacked venv is the builder's, file for file, at the same path; the release directories say so
        assert _tree(fleet.venv(unpacker)) == _tree(fleet.venv(builder))
        assert fleet.marker(builder)["origin"] == "built" and fleet.marker(unpacker)["origin"] == "unpacked"
        assert fleet.marker(unpacker)["built_on"] == builder
        assert not os.path.exists(str(fleet.venv(unpacker)) + ".partial")
    assert "venv unpacked from the archive that gpu-a builds" in proc.out
    assert "venv built here and archived to %s/%s/" % (fleet.cache, rel_ab) in proc.out
    for host in hosts:                                # the transfer directories are emptied
        assert os.listdir(str(fleet.tmp / "transfer" / host)) == [], host

    # the rerun: every venv exists, every archive is cached: no build, no unpack, no change
    mtimes = {p: os.stat(str(fleet.cache / p[0] / p[1] / "venv.tar.zst")).st_mtime_ns for p in archives}
    proc, lines = fleet.run(hosts)
    assert proc.ok, proc
    assert _by_host(lines) == {h: MATCHED for h in hosts}, lines
    assert "venv present, kept" in proc.out
    for host in hosts:
        assert proc.recap(host)["changed"] == 0, (host, proc.out[-3000:])
    assert {p: os.stat(str(fleet.cache / p[0] / p[1] / "venv.tar.zst")).st_mtime_ns for p in archives} == mtimes

    # a host added later (--limit, so the first of its group in the play) finds gpu-a's archive in the cache
    key_ab = [p for p in archives if p[0] == rel_ab][0]
    _host_added_later_unpacks_from_the_cache(fleet, key_ab, archives[key_ab], hosts)
    # a damaged archive for the other release id is refused before anything is unpacked
    key_cd = [p for p in archives if p[0] == rel_cd][0]
    _damaged_archive_is_refused_before_unpacking(fleet, key_cd, hosts)


def _host_added_later_unpacks_from_the_cache(fleet, key, manifest, hosts):
    archive = fleet.cache / key[0] / key[1] / "venv.tar.zst"
    mtime = os.stat(str(archive)).st_mtime_ns
    fleet_e = dict(hosts, **{"gpu-e": {}})
    # check mode first: it says what it would do and writes nothing on the new host
    proc, lines = fleet.run(fleet_e, limit="gpu-e", check=True)
    assert proc.ok, proc
    assert "venv unpacked from the artifact cache" in proc.out
    assert lines == [] and not (fleet.tmp / "hosts" / "gpu-e" / "releases").exists()
    assert os.listdir(str(fleet.tmp / "transfer" / "gpu-e")) == []

    # for real: gpu-e builds nothing, its venv is gpu-a's, the archive is untouched
    proc, lines = fleet.run(fleet_e, limit="gpu-e")
    assert proc.ok, proc
    assert _by_host(lines) == {"gpu-e": MATCHED}, lines
    assert "venv unpacked from the artifact cache %s/%s/%s" % (fleet.cache, key[0], key[1]) in proc.out
    assert fleet.marker("gpu-e") == dict(manifest, origin="unpacked") and manifest["built_on"] == "gpu-a"
    assert _tree(fleet.venv("gpu-e")) == _tree(fleet.venv("gpu-a"))
    assert os.stat(str(archive)).st_mtime_ns == mtime


def _damaged_archive_is_refused_before_unpacking(fleet, key, hosts):
    archive = fleet.cache / key[0] / key[1] / "venv.tar.zst"
    recorded = (fleet.cache / key[0] / key[1] / "venv.tar.zst.sha256").read_text().split()[0]
    # still a valid zstd'd tar (it would unpack), but not the bytes the builder recorded
    subprocess.run(["tar", "--create", "--zstd", "--file", str(archive), "--directory", str(fleet.tmp), "stages.log"],
                   check=True)
    actual = hashlib.sha256(archive.read_bytes()).hexdigest()

    proc, lines = fleet.run(dict(hosts, **{"gpu-f": hosts["gpu-c"]}), limit="gpu-f")
    assert not proc.ok
    assert ("%s has sha256 %s" % (archive, actual)) in proc.out, proc.out[-4000:]
    assert ("records %s" % recorded) in proc.out and "nothing was unpacked" in proc.out
    # nothing unpacked, no temporary directory, no copy left behind, no stage ran on gpu-f
    venv = fleet.tmp / "hosts" / "gpu-f" / "releases" / key[0] / "venv"
    assert not venv.exists() and not os.path.exists(str(venv) + ".partial")
    assert os.listdir(str(fleet.tmp / "transfer" / "gpu-f")) == []
    assert lines == []


def test_a_host_alone_builds_its_venv_and_archives_nothing(fleet):
    # nobody in the run would unpack it: packing it would cost a one-host fleet a minute and a GB for nothing
    proc, lines = fleet.run({"gpu-a": {}})
    assert proc.ok and _by_host(lines) == {"gpu-a": INSTALLED}, proc
    assert fleet.archives() == {} and fleet.marker("gpu-a") is None
    assert "venv built here, not archived: no other host of this run unpacks it" in proc.out
    # the same with a second host whose venv is there already (it keeps it): still no taker, no archive
    proc, lines = fleet.run({"gpu-b": {}})
    assert proc.ok, proc
    proc, lines = fleet.run({"gpu-a": {}, "gpu-b": {}, "gpu-c": {"sglang_release_key_extra": {"fleet": "other"}}})
    assert proc.ok and fleet.archives() == {}, (fleet.archives(), proc.out[-3000:])
    assert _by_host(lines) == {"gpu-a": MATCHED, "gpu-b": MATCHED, "gpu-c": INSTALLED}, lines


def test_without_sharing_every_host_builds_its_own_venv(fleet):
    proc, lines = fleet.run({"gpu-a": {}, "gpu-b": {}}, extra={"sglang_rollout_venv_share": False})
    assert proc.ok, proc
    assert _by_host(lines) == {"gpu-a": INSTALLED, "gpu-b": INSTALLED}, lines
    assert fleet.archives() == {} and fleet.marker("gpu-a") is None and fleet.marker("gpu-b") is None
    assert "venv sharing off (sglang_rollout_venv_share)" in proc.out
