"""The sglang_model role through real ansible-playbook on local-connection hosts (roots under tmp_path).

Two inventory hosts ``a`` (fetches) and ``b`` (copies) with their own sglang_model_root exercise the archive,
fleet-copy (controller transport) and directory paths for real; bad input is run in --check and must fail with
the variable named before anything exists on disk. The Hub path is covered by test_model.py (needs a Hub; the
stand-in lives in the test process).
"""

import hashlib
import json
import os
import struct
import sys
import tarfile

import pytest
import yaml

import ansible_run

COMMIT = "89abcdef0123456789abcdef0123456789abcdef"
pytestmark = pytest.mark.slow


def shard(names):
    header, data = {}, b""
    for name, count in names:
        blob = struct.pack("<%df" % count, *[float(i) for i in range(count)])
        header[name] = {"dtype": "F32", "shape": [count], "data_offsets": [len(data), len(data) + len(blob)]}
        data += blob
    raw = json.dumps(header).encode()
    return struct.pack("<Q", len(raw)) + raw + data


def model_files(where):
    os.makedirs(where, exist_ok=True)
    files = {"config.json": b'{"model_type": "llama"}', "model-00001-of-00001.safetensors": shard([("w", 256)]),
             "model.safetensors.index.json": json.dumps(
                 {"weight_map": {"w": "model-00001-of-00001.safetensors"}}).encode()}
    for rel, data in files.items():
        with open(os.path.join(where, rel), "wb") as handle:
            handle.write(data)
    return files


def run(tmp_path, play_vars, check=False, hosts=("a", "b")):
    inventory = {"all": {"hosts": {h: {"ansible_connection": "local", "ansible_python_interpreter": sys.executable,
                                       "sglang_model_root": str(tmp_path / h / "models"),
                                       "sglang_model_state_dir": str(tmp_path / h / "state")} for h in hosts}}}
    (tmp_path / "inventory.yml").write_text(yaml.safe_dump(inventory))
    play = [{"name": "sglang_model", "hosts": "all", "gather_facts": False, "vars": play_vars,
             "roles": [{"role": "blackwell.sglang.sglang_model"}],
             "post_tasks": [{"name": "facts", "ansible.builtin.copy": {
                 "dest": str(tmp_path) + "/{{ inventory_hostname }}.facts.json", "mode": "0644",
                 "content": "{{ {'path': sglang_model_path | default(''), 'digest': sglang_model_manifest_digest | default(''),"
                            " 'env': sglang_model_service_env | default({})} | to_json }}"}, "delegate_to": "localhost",
                 "check_mode": False}]}]
    (tmp_path / "play.yml").write_text(yaml.safe_dump(play, sort_keys=False))
    proc = ansible_run.playbook(tmp_path / "play.yml", tmp_path, inventory=tmp_path / "inventory.yml", check=check,
                                cwd=tmp_path)
    with open(str(tmp_path / "ansible.log"), "a") as log:     # the whole output, for a failing test
        log.write(proc.stdout + proc.stderr)
    return proc


def recap(out, host):
    line = [ln for ln in out.splitlines() if ln.startswith(host + " ") and "ok=" in ln][-1]
    return {k: int(v) for k, v in (f.split("=") for f in line.split(":", 1)[1].split())}


def facts(tmp_path, host):
    return json.loads((tmp_path / ("%s.facts.json" % host)).read_text())


def test_archive_fetched_once_copied_to_the_fleet_then_converged(tmp_path):
    src = tmp_path / "ctl" / "tiny"
    files = model_files(str(src))
    tarball = tmp_path / "ctl" / "tiny.tar"
    with tarfile.open(str(tarball), "w") as tar:
        for rel in files:
            tar.add(str(src / rel), arcname=rel)
    play_vars = {"sglang_model_source": "archive", "sglang_model_archive": str(tarball), "sglang_model_revision": COMMIT,
                 "sglang_model_fleet": True, "sglang_model_controller_cache": str(tmp_path / "ctl-cache"),
                 "sglang_model_disk_headroom_bytes": 0}
    first = run(tmp_path, play_vars)
    assert first.returncode == 0, first.stdout[-4000:] + first.stderr[-2000:]
    name = "tiny@" + COMMIT
    for host in ("a", "b"):
        target = tmp_path / host / "models" / name
        assert sorted(os.listdir(target)) == sorted(list(files) + [".sglang-model-manifest.json"]), host
        assert not (tmp_path / host / "models" / ".staging" / name).exists()
        assert facts(tmp_path, host)["path"] == str(target)
    manifest = json.loads((tmp_path / "a" / "models" / name / ".sglang-model-manifest.json").read_text())
    assert manifest["files"]["config.json"]["sha256"] == hashlib.sha256(files["config.json"]).hexdigest()
    assert facts(tmp_path, "a")["digest"] == facts(tmp_path, "b")["digest"] != ""
    assert facts(tmp_path, "b")["env"] == {"HF_HUB_OFFLINE": "1"}
    assert sorted(os.listdir(tmp_path / "ctl-cache" / name)) == sorted(files)    # fetched once through the controller
    second = run(tmp_path, play_vars)
    assert second.returncode == 0, second.stdout[-4000:]
    assert recap(second.stdout, "a")["changed"] == 0 and recap(second.stdout, "b")["changed"] == 0, second.stdout[-3000:]
    assert second.stdout.count("0.00 Bytes hashed in this run") == 2      # a converged host re-hashes nothing


def test_a_truncated_shard_in_the_archive_is_refused_on_every_host(tmp_path):
    src = tmp_path / "ctl" / "tiny"
    model_files(str(src))
    with open(str(src / "model-00001-of-00001.safetensors"), "r+b") as handle:
        handle.truncate(300)                         # no manifest: only the structural check can see it
    play_vars = {"sglang_model_source": "archive", "sglang_model_archive": str(src), "sglang_model_revision": COMMIT,
                 "sglang_model_fleet": True, "sglang_model_controller_cache": str(tmp_path / "ctl-cache"),
                 "sglang_model_disk_headroom_bytes": 0}
    proc = run(tmp_path, play_vars)
    assert proc.returncode != 0
    assert "model-00001-of-00001.safetensors: truncated" in proc.stdout
    name = "tiny@" + COMMIT
    assert not (tmp_path / "a" / "models" / name).exists() and not (tmp_path / "b" / "models" / name).exists()
    assert not (tmp_path / "ctl-cache").exists()    # nothing was distributed


def test_directory_verified_in_place_not_copied(tmp_path):
    nfs = tmp_path / "a" / "nfs" / "tiny"
    model_files(str(nfs))
    play_vars = {"sglang_model_source": "directory", "sglang_model_directory": str(nfs),
                 "sglang_model_revision": COMMIT, "sglang_model_allowed_roots": [str(tmp_path / "a" / "nfs")]}
    first = run(tmp_path, play_vars, hosts=("a",))
    assert first.returncode == 0, first.stdout[-4000:]
    assert facts(tmp_path, "a")["path"] == str(nfs)
    assert not (nfs / ".sglang-model-manifest.json").exists() and not (tmp_path / "a" / "models").exists()
    assert len(list((tmp_path / "a" / "state").glob("tiny@%s.*.manifest.json" % COMMIT))) == 1
    second = run(tmp_path, play_vars, hosts=("a",))
    assert recap(second.stdout, "a")["changed"] == 0, second.stdout[-3000:]


def hf_snapshot(base, files):
    """A Hugging Face cache repository: blobs named by sha256, the snapshot's files links ../../blobs/<sha>."""
    snapshot = base / "models--acme--tiny" / "snapshots" / COMMIT
    blobs = base / "models--acme--tiny" / "blobs"
    blobs.mkdir(parents=True)
    snapshot.mkdir(parents=True)
    for rel, data in files.items():
        digest = hashlib.sha256(data).hexdigest()
        (blobs / digest).write_bytes(data)
        os.symlink("../../blobs/" + digest, str(snapshot / rel))
    return snapshot


def test_hugging_face_snapshot_as_directory_in_place_and_as_archive(tmp_path):
    """A real cache snapshot (every file a link into blobs/) verifies in place, and as an archive directory on the
    controller its in-model links are followed by the copy: the promoted model holds regular files only."""
    files = {"config.json": b'{"model_type": "llama"}', "model-00001-of-00001.safetensors": shard([("w", 64)]),
             "model.safetensors.index.json": json.dumps({"weight_map": {"w": "model-00001-of-00001.safetensors"}}).encode()}
    snapshot = hf_snapshot(tmp_path / "a" / "hub", files)
    in_place = {"sglang_model_source": "directory", "sglang_model_directory": str(snapshot),
                "sglang_model_revision": COMMIT, "sglang_model_allowed_roots": [str(tmp_path / "a" / "hub")]}
    first = run(tmp_path, in_place, hosts=("a",))
    assert first.returncode == 0, first.stdout[-4000:]
    assert facts(tmp_path, "a")["path"] == str(snapshot)
    again = run(tmp_path, in_place, hosts=("a",))
    assert recap(again.stdout, "a")["changed"] == 0, again.stdout[-3000:]
    archive = {"sglang_model_source": "archive", "sglang_model_archive": str(snapshot), "sglang_model_revision": COMMIT,
               "sglang_model_disk_headroom_bytes": 0}
    copied = run(tmp_path, archive, hosts=("a",))
    assert copied.returncode == 0, copied.stdout[-4000:]
    target = tmp_path / "a" / "models" / ("%s@%s" % (COMMIT, COMMIT))
    assert target.is_dir() and sorted(os.listdir(target)) == sorted(list(files) + [".sglang-model-manifest.json"])
    assert not any(os.path.islink(str(target / rel)) for rel in files)
    assert all((target / rel).read_bytes() == data for rel, data in files.items())


@pytest.mark.parametrize("over, needle", [
    ({"sglang_model_revision": ""}, "sglang_model_revision=\"\""),
    ({"sglang_model_revision": "main"}, "a branch\nor tag only with sglang_model_allow_branch"),
    ({"sglang_model_allowed_roots": ["/nonexistent"]}, "outside the allowed roots"),
    ({"sglang_model_manifest_file": "MANIFEST"}, "does not match its manifest"),
    ({"sglang_model_disk_headroom_bytes": 2 ** 62}, "not enough disk space"),
])
def test_bad_input_fails_in_check_mode_before_any_change(tmp_path, over, needle):
    src = tmp_path / "ctl" / "tiny"
    model_files(str(src))
    if over.get("sglang_model_manifest_file") == "MANIFEST":
        bad = {"files": {"config.json": {"size": 23, "sha256": "0" * 64}}}
        (tmp_path / "manifest.json").write_text(json.dumps(bad))
        over = {"sglang_model_manifest_file": str(tmp_path / "manifest.json"), "sglang_model_source": "directory",
                "sglang_model_directory": str(src), "sglang_model_allowed_roots": [str(tmp_path / "ctl")]}
    play_vars = dict({"sglang_model_source": "archive", "sglang_model_archive": str(src),
                      "sglang_model_revision": COMMIT}, **over)
    proc = run(tmp_path, play_vars, check=True, hosts=("a",))
    assert proc.returncode != 0
    assert needle.replace("\n", " ") in " ".join(proc.stdout.split()), proc.stdout[-3000:]
    assert not (tmp_path / "a").exists()


def test_hub_source_through_the_role_async_with_progress(tmp_path):
    """The role's Hub path (plan, async download, bounded wait loop, async_status, verify) against the stand-in
    for the Hub in this process; the venv is the one running the tests (it must have huggingface_hub)."""
    pytest.importorskip("huggingface_hub")
    sys.path.insert(0, os.path.dirname(__file__))
    from fakehub import FakeHub  # pylint: disable=import-outside-toplevel
    from test_model import tiny_model  # pylint: disable=import-outside-toplevel
    files = tiny_model(embed=256 * 1024)
    with FakeHub("acme/tiny", COMMIT, files, lifetime=280) as hub:
        play_vars = {"sglang_model_source": "hub", "sglang_model_repo_id": "acme/tiny", "sglang_model_revision": COMMIT,
                     "sglang_model_hf_endpoint": hub.endpoint, "sglang_model_hf_token": "hf_do_not_print_me",
                     "sglang_model_venv": os.path.dirname(os.path.dirname(sys.executable)),
                     "sglang_model_hub_packages": [], "sglang_model_disk_headroom_bytes": 0,
                     "sglang_model_progress_interval": 1, "sglang_model_download_timeout": 120}
        play_vars["sglang_model_hub_packages"] = ["huggingface_hub"]          # already there: pip changes nothing
        first = run(tmp_path, play_vars, hosts=("a",))
        assert first.returncode == 0, first.stdout[-4000:]
        target = tmp_path / "a" / "models" / ("tiny@" + COMMIT)
        assert facts(tmp_path, "a")["path"] == str(target)
        assert sorted(os.listdir(target)) == sorted([f for f in files if not f.endswith(".md")] + [
            ".sglang-model-manifest.json"])
        assert "(done)" in first.stdout                                   # the wait loop's last progress label
        assert "hf_do_not_print_me" not in first.stdout
        second = run(tmp_path, play_vars, hosts=("a",))
        assert recap(second.stdout, "a")["changed"] == 0, second.stdout[-3000:]
        # the second run's Hub plan finds the verified model in place and downloads nothing
        assert str(target) + ": verified, " in second.stdout
        assert "the Hub plan found it in place, nothing to download" in second.stdout, second.stdout[-3000:]
