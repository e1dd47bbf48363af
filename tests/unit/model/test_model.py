"""sglang_model_fetch / sglang_model_verify / sglang_model_wait and plugins/module_utils/_model.py.

The Hub path runs the real huggingface_hub (1.33.0, requirements-dev.txt) against tests/unit/model/fakehub.py, a
stand-in for the Hub on 127.0.0.1; the Hub itself is not reached. Modules run as Ansible runs them: a subprocess
with the arguments file.
"""

import hashlib
import json
import os
import struct
import sys

import pytest

import ansible_run

sys.path.insert(0, os.path.dirname(__file__))
from fakehub import FakeHub  # noqa: E402  pylint: disable=wrong-import-position

from ansible_collections.blackwell.sglang.plugins.module_utils import _model  # noqa: E402

COMMIT = "0123456789abcdef0123456789abcdef01234567"
REPO = "acme/tiny-nvfp4"


def run_module(name, args, tmp_path, env=None):
    return ansible_run.module_file(name, args, tmp_path, env=dict({"HF_HOME": str(tmp_path / "hf-home")}, **(env or {})))


def safetensors_bytes(tensors):
    """A safetensors file by hand (format: u64 LE header length, JSON header, data), F32 tensors."""
    header, data = {}, b""
    for name, count in tensors:
        blob = struct.pack("<%df" % count, *[float(i) for i in range(count)])
        header[name] = {"dtype": "F32", "shape": [count], "data_offsets": [len(data), len(data) + len(blob)]}
        data += blob
    raw = json.dumps(header).encode()
    return struct.pack("<Q", len(raw)) + raw + data


def tiny_model(embed=64):
    """Two shards, an index, config and tokenizer: a real (tiny) safetensors checkpoint, written with safetensors.

    ``embed`` float32 elements in the first shard (a large one makes a body longer than huggingface_hub's 10 MB read
    chunk, so a connection cut in the middle leaves bytes to resume from)."""
    st = pytest.importorskip("safetensors.numpy")
    np = pytest.importorskip("numpy")
    shard1 = st.save({"model.embed.weight": np.arange(embed, dtype=np.float32)})
    shard2 = st.save({"model.layers.0.mlp.weight": np.ones((16, 4), dtype=np.float16),
                      "lm_head.weight": np.zeros((8,), dtype=np.float32)})
    index = {"metadata": {"total_size": embed * 4 + 64 * 2 + 32},
             "weight_map": {"model.embed.weight": "model-00001-of-00002.safetensors",
                            "model.layers.0.mlp.weight": "model-00002-of-00002.safetensors",
                            "lm_head.weight": "model-00002-of-00002.safetensors"}}
    return {"config.json": json.dumps({"model_type": "llama", "torch_dtype": "bfloat16"}).encode(),
            "tokenizer.json": b'{"version": "1.0"}',
            "model.safetensors.index.json": json.dumps(index).encode(),
            "model-00001-of-00002.safetensors": shard1,
            "model-00002-of-00002.safetensors": shard2,
            "README.md": b"# tiny\n"}


def fetch_args(tmp_path, hub, **over):
    args = {"repo_id": REPO, "revision": COMMIT, "name": "tiny", "root": str(tmp_path / "models"),
            "allowed_roots": [str(tmp_path / "models")], "endpoint": hub.endpoint if hub else "http://127.0.0.1:9",
            "token": "hf_secret_token_value", "ignore_patterns": ["*.md"], "state_dir": str(tmp_path / "state"),
            "progress_file": str(tmp_path / "state" / "progress.json"), "max_workers": 2,
            "disk_headroom_bytes": 0}
    args.update(over)
    return args


@pytest.fixture(name="hub_lib")
def fixture_hub_lib():
    pytest.importorskip("huggingface_hub")


# --------------------------------------------------------------------------------------------- structure


def test_safetensors_check_accepts_whole_and_names_truncation(tmp_path):
    good = tmp_path / "a.safetensors"
    good.write_bytes(safetensors_bytes([("x", 10), ("y", 6)]))
    assert _model.safetensors_problem(str(good)) is None
    cut = tmp_path / "b.safetensors"
    cut.write_bytes(good.read_bytes()[:-5])
    assert "truncated" in _model.safetensors_problem(str(cut))
    head_only = tmp_path / "c.safetensors"
    head_only.write_bytes(good.read_bytes()[:12])
    assert "truncated" in _model.safetensors_problem(str(head_only))
    trailing = tmp_path / "d.safetensors"
    trailing.write_bytes(good.read_bytes() + b"\0\0")
    assert "trailing" in _model.safetensors_problem(str(trailing))


def test_hand_writer_matches_the_safetensors_library(tmp_path):
    st = pytest.importorskip("safetensors.numpy")
    path = tmp_path / "h.safetensors"
    path.write_bytes(safetensors_bytes([("x", 3)]))
    assert list(st.load_file(str(path))["x"]) == [0.0, 1.0, 2.0]


def test_revision_rules():
    assert _model.check_revision(COMMIT, False) == COMMIT
    with pytest.raises(_model.ModelError, match="sglang_model_revision is empty"):
        _model.check_revision("", False)
    with pytest.raises(_model.ModelError, match="not a 40-hex commit.*sglang_model_allow_branch"):
        _model.check_revision("main", False)
    assert _model.check_revision("main", True) == "main"


# --------------------------------------------------------------------------------------------- verify module


def make_dir(tmp_path, name="m"):
    root = tmp_path / "models" / name
    root.mkdir(parents=True)
    (root / "config.json").write_text('{"model_type": "llama"}')
    (root / "model.safetensors").write_bytes(safetensors_bytes([("w", 1000)]))
    return root


def verify_args(tmp_path, path, **over):
    args = {"path": str(path), "name": "m", "revision": COMMIT, "allowed_roots": [str(tmp_path / "models")],
            "state_dir": str(tmp_path / "state")}
    args.update(over)
    return args


def test_directory_verified_in_place_then_not_rehashed(tmp_path):
    root = make_dir(tmp_path)
    first = run_module("sglang_model_verify", verify_args(tmp_path, root, write_manifest=True, own_dir=False), tmp_path)
    assert not first.get("failed"), first.get("msg")
    assert first["changed"] is True and first["manifest_source"] == "written"
    assert [p.name for p in (tmp_path / "state").glob("m@%s.*.manifest.json" % COMMIT)]
    assert not (root / _model.MANIFEST_NAME).exists()          # an operator's directory is not written to
    second = run_module("sglang_model_verify", verify_args(tmp_path, root, own_dir=False), tmp_path)
    assert second["changed"] is False and second["manifest_source"] == "state_dir"
    assert second["bytes_hashed"] == 0 and sorted(second["trusted"]) == ["config.json", "model.safetensors"]
    assert second["manifest_digest"] == first["manifest_digest"]
    assert second["service_env"] == {"HF_HUB_OFFLINE": "1"}
    (stamp,) = (tmp_path / "state").glob("m@%s.*.stamp.json" % COMMIT)
    assert oct(stamp.stat().st_mode & 0o777) == "0o600"
    # one file changes (same size, new mtime/content): only it is re-hashed, and the mismatch names it
    data = bytearray((root / "config.json").read_bytes())
    data[2:3] = b"X"
    (root / "config.json").write_bytes(bytes(data))
    os.utime(root / "config.json", ns=(1, 1))
    third = run_module("sglang_model_verify", verify_args(tmp_path, root, own_dir=False), tmp_path)
    assert third["failed"] is True and third["hashed"] == ["config.json"]
    assert str(root / "config.json") in third["msg"] and "sha256" in third["msg"]


def test_truncated_shard_refused_without_manifest(tmp_path):
    root = make_dir(tmp_path)
    data = (root / "model.safetensors").read_bytes()
    (root / "model.safetensors").write_bytes(data[:-100])
    result = run_module("sglang_model_verify", verify_args(tmp_path, root, write_manifest=True), tmp_path)
    assert result["failed"] is True
    assert "model.safetensors" in result["msg"] and "truncated" in result["msg"]
    assert not (root / _model.MANIFEST_NAME).exists() and not (tmp_path / "state").exists()


def test_staging_promoted_only_after_verification(tmp_path):
    src = make_dir(tmp_path, "src")
    manifest = _model.manifest_from_dir(str(src), "m", COMMIT, "test")
    staging = tmp_path / "models" / ".staging" / ("m@" + COMMIT)
    target = tmp_path / "models" / ("m@" + COMMIT)
    staging.parent.mkdir(parents=True)
    os.rename(src, staging)
    (staging / "model.safetensors").write_bytes(safetensors_bytes([("w", 999), ("v", 1)]))   # same size, other bytes
    bad = run_module("sglang_model_verify", verify_args(tmp_path, staging, promote_to=str(target), manifest=manifest),
                     tmp_path)
    assert bad["failed"] is True and "model.safetensors" in bad["msg"] and not target.exists()
    (staging / "model.safetensors").write_bytes(safetensors_bytes([("w", 1000)]))
    good = run_module("sglang_model_verify", verify_args(tmp_path, staging, promote_to=str(target), manifest=manifest),
                      tmp_path)
    assert not good.get("failed"), good.get("msg")
    assert good["promoted"] is True and target.is_dir() and not staging.exists()
    assert json.loads((target / _model.MANIFEST_NAME).read_text())["files"] == manifest["files"]
    again = run_module("sglang_model_verify", verify_args(tmp_path, staging, promote_to=str(target), manifest=manifest),
                       tmp_path)
    assert again["changed"] is False and again["bytes_hashed"] == 0 and again["promoted"] is False


def test_promoted_checkpoint_is_readable_by_the_service_user_under_a_hardened_umask(tmp_path):
    # a download under umask 077 (a CIS-hardened host) writes 0600 files in 0700 directories: root only
    old = os.umask(0o077)
    try:
        src = make_dir(tmp_path, "src")
        (src / "sub").mkdir()
        (src / "sub" / "extra.json").write_text("{}")
        (src / "run.sh").write_text("#!/bin/sh\n")
        os.chmod(src / "run.sh", 0o700)
        os.symlink("model.safetensors", src / "link")
        manifest = _model.manifest_from_dir(str(src), "m", COMMIT, "test")
        staging = tmp_path / "models" / ".staging" / ("m@" + COMMIT)
        target = tmp_path / "models" / ("m@" + COMMIT)
        staging.parent.mkdir(parents=True)
        os.rename(src, staging)
        assert (staging / "model.safetensors").stat().st_mode & 0o777 == 0o600
        good = run_module("sglang_model_verify", verify_args(tmp_path, staging, promote_to=str(target), manifest=manifest),
                          tmp_path)
    finally:
        os.umask(old)
    assert not good.get("failed"), good.get("msg")
    modes = {p.relative_to(target).as_posix(): p.lstat().st_mode & 0o777 for p in [target, *target.rglob("*")]}
    assert modes["."] == 0o755 and modes["sub"] == 0o755
    assert modes["model.safetensors"] == 0o644 and modes["sub/extra.json"] == 0o644
    assert modes["run.sh"] == 0o744                        # bits are added, never removed: no new execute bit
    assert modes[_model.MANIFEST_NAME] == 0o644
    assert (target / "link").is_symlink()


@pytest.mark.parametrize("over, needle", [
    ({"revision": ""}, "sglang_model_revision is empty"),
    ({"revision": "main"}, "not a 40-hex commit"),
    ({"allowed_roots": ["/nonexistent-root"]}, "outside the allowed roots"),
])
def test_verify_bad_input_changes_nothing(tmp_path, over, needle):
    root = make_dir(tmp_path)
    result = run_module("sglang_model_verify", verify_args(tmp_path, root, write_manifest=True, **over), tmp_path)
    assert result["failed"] is True and needle in result["msg"]
    assert not (root / _model.MANIFEST_NAME).exists() and not (tmp_path / "state").exists()


def test_non_matching_manifest_is_refused(tmp_path):
    root = make_dir(tmp_path)
    manifest = _model.manifest_from_dir(str(root), "m", COMMIT, "test")
    manifest["files"]["config.json"]["sha256"] = hashlib.sha256(b"other").hexdigest()
    manifest["files"]["tokenizer.json"] = {"size": 3, "sha256": "0" * 64}
    result = run_module("sglang_model_verify", verify_args(tmp_path, root, manifest=manifest), tmp_path)
    assert result["failed"] is True
    assert {e["file"] for e in result["errors"]} == {"config.json", "tokenizer.json"}
    assert not (root / _model.MANIFEST_NAME).exists()


def test_wait_reports_progress_and_finishes(tmp_path):
    record = tmp_path / "p.json"
    _model.write_json_atomic(str(record), {"state": "running", "phase": "download", "bytes_done": 512 * 1024 ** 2,
                                           "bytes_total": 2048 * 1024 ** 2, "rate_bytes_per_s": 64 * 1024 ** 2,
                                           "pid": os.getpid()})
    running = run_module("sglang_model_wait", {"progress_file": str(record), "timeout": 1}, tmp_path)
    assert running["finished"] is False
    assert running["msg"] == "download: 512.0 MiB / 2.0 GiB (25%), 64.0 MiB/s, 24 s left"
    _model.write_json_atomic(str(record), {"state": "running", "bytes_done": 1, "bytes_total": 2, "pid": 2 ** 22 + 7})
    dead = run_module("sglang_model_wait", {"progress_file": str(record), "timeout": 5}, tmp_path)
    assert dead["finished"] is True and dead["state"] == "failed"


# --------------------------------------------------------------------------------------------- Hub (stand-in)


def test_hub_fetch_verifies_promotes_and_converges(tmp_path, hub_lib):
    with FakeHub(REPO, COMMIT, tiny_model()) as hub:
        result = run_module("sglang_model_fetch", fetch_args(tmp_path, hub), tmp_path)
        assert not result.get("failed"), result.get("msg")
        target = tmp_path / "models" / ("tiny@" + COMMIT)
        assert result["changed"] is True and result["path"] == str(target)
        assert sorted(os.listdir(target)) == sorted(
            [_model.MANIFEST_NAME, "config.json", "tokenizer.json", "model.safetensors.index.json",
             "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"])     # *.md ignored, no .cache
        assert not (tmp_path / "models" / ".staging" / ("tiny@" + COMMIT)).exists()
        manifest = json.loads((target / _model.MANIFEST_NAME).read_text())
        shard = (target / "model-00001-of-00002.safetensors").read_bytes()
        assert manifest["files"]["model-00001-of-00002.safetensors"]["sha256"] == hashlib.sha256(shard).hexdigest()
        assert result["manifest_digest"] == _model.manifest_digest(manifest)
        assert json.loads((tmp_path / "state" / "progress.json").read_text())["state"] == "done"
        served, requests = hub.bytes_served, len(hub.log)
        again = run_module("sglang_model_fetch", fetch_args(tmp_path, hub), tmp_path)
        assert again["changed"] is False and again["action"] == "present" and again["bytes_hashed"] == 0
        assert hub.bytes_served == served                     # nothing downloaded again
        assert [path.split("?")[0] for _m, path, _r in hub.log[requests:]] == [
            "/api/models/%s/tree/%s" % (REPO, COMMIT)]          # one metadata request, no file request
        assert "hf_secret_token_value" not in json.dumps(again)


def test_hub_target_with_a_link_out_is_refused_in_place(tmp_path, hub_lib):
    """A fetched model whose file was swapped for a link out (same name, the link rule): the converged fetch's
    in-place verification refuses it naming the link and its target, and changes nothing."""
    with FakeHub(REPO, COMMIT, tiny_model()) as hub:
        assert not run_module("sglang_model_fetch", fetch_args(tmp_path, hub), tmp_path).get("failed")
        target = tmp_path / "models" / ("tiny@" + COMMIT)
        (target / "tokenizer.json").unlink()
        os.symlink("/etc/passwd", str(target / "tokenizer.json"))
        again = run_module("sglang_model_fetch", fetch_args(tmp_path, hub), tmp_path)
    assert again["failed"] is True and "Traceback" not in json.dumps(again)
    assert "tokenizer.json: is a link to /etc/passwd" in again["msg"] and "outside the model root" in again["msg"]
    assert os.path.islink(str(target / "tokenizer.json"))


def test_hub_staging_with_a_planted_link_is_refused_not_promoted(tmp_path, hub_lib):
    staging = tmp_path / "models" / ".staging" / ("tiny@" + COMMIT)
    staging.mkdir(parents=True)
    os.symlink("/etc/shadow", str(staging / "extra.json"))
    with FakeHub(REPO, COMMIT, tiny_model()) as hub:
        result = run_module("sglang_model_fetch", fetch_args(tmp_path, hub), tmp_path)
    assert result["failed"] is True and "extra.json: is a link to /etc/shadow" in result["msg"], result["msg"]
    assert not (tmp_path / "models" / ("tiny@" + COMMIT)).exists() and os.path.islink(str(staging / "extra.json"))


def test_writes_and_permission_changes_never_follow_a_planted_link(tmp_path):
    outside = tmp_path / "outside.txt"
    outside.write_text("keep")
    os.chmod(str(outside), 0o600)
    record = tmp_path / "m" / "record.json"
    record.parent.mkdir()
    os.symlink(str(outside), "%s.tmp.%d" % (record, os.getpid()))        # the temporary name, planted
    _model.write_json_atomic(str(record), {"a": 1})
    assert outside.read_text() == "keep" and json.loads(record.read_text()) == {"a": 1}
    os.symlink(str(outside), str(tmp_path / "m" / "link"))
    _model.make_readable(str(tmp_path / "m"))
    assert outside.stat().st_mode & 0o777 == 0o600                      # the link's target is not touched
    assert record.stat().st_mode & 0o444 == 0o444
    keep = tmp_path / "keep-dir"
    keep.mkdir()
    (keep / "x").write_text("x")
    staging = make_dir(tmp_path, "staged")
    os.symlink(str(keep), str(staging / _model.HF_LOCAL_CACHE))
    _model.promote(str(staging), str(tmp_path / "models" / "promoted"))
    assert (keep / "x").exists() and not (tmp_path / "models" / "promoted" / _model.HF_LOCAL_CACHE).exists()


def test_hub_branch_needs_allow_branch_and_resolves(tmp_path, hub_lib):
    with FakeHub(REPO, COMMIT, tiny_model()) as hub:
        refused = run_module("sglang_model_fetch", fetch_args(tmp_path, hub, revision="main"), tmp_path)
        assert refused["failed"] is True and "sglang_model_allow_branch" in refused["msg"]
        assert hub.log == []                                   # refused before any request
        ok = run_module("sglang_model_fetch", fetch_args(tmp_path, hub, revision="main", allow_branch=True,
                                                         plan_only=True), tmp_path)
        assert ok["revision"] == COMMIT and ok["action"] == "download" and not (tmp_path / "models").exists()


def test_hub_unknown_revision_is_a_clear_error(tmp_path, hub_lib):
    with FakeHub(REPO, COMMIT, tiny_model()) as hub:
        result = run_module("sglang_model_fetch", fetch_args(tmp_path, hub, revision="f" * 40), tmp_path)
    assert result["failed"] is True and "does not exist" in result["msg"] and "f" * 40 in result["msg"]
    assert not (tmp_path / "models").exists()


def test_hub_wrong_sha256_names_the_file_and_keeps_the_target_absent(tmp_path, hub_lib):
    with FakeHub(REPO, COMMIT, tiny_model()) as hub:
        hub.faults["wrong_sha"] = "model-00002-of-00002.safetensors"
        result = run_module("sglang_model_fetch", fetch_args(tmp_path, hub), tmp_path)
        assert result["failed"] is True
        assert "model-00002-of-00002.safetensors: sha256" in result["msg"]
        assert not (tmp_path / "models" / ("tiny@" + COMMIT)).exists()
        staging = tmp_path / "models" / ".staging" / ("tiny@" + COMMIT)
        assert not (staging / "model-00002-of-00002.safetensors").exists()    # removed, refetched on rerun
        assert (staging / "model-00001-of-00002.safetensors").exists()         # the good shard is kept
        hub.faults.clear()
        before = hub.bytes_served
        fixed = run_module("sglang_model_fetch", fetch_args(tmp_path, hub), tmp_path)
        assert not fixed.get("failed"), fixed.get("msg")
        refetched = hub.bytes_served - before
        assert refetched == len(hub.files["model-00002-of-00002.safetensors"])   # only the bad shard again


def test_hub_truncated_shard_caught_structurally(tmp_path, hub_lib):
    files = tiny_model()
    files["model-00001-of-00002.safetensors"] = files["model-00001-of-00002.safetensors"][:-40]
    with FakeHub(REPO, COMMIT, files) as hub:                  # the metadata agrees with the truncated bytes
        result = run_module("sglang_model_fetch", fetch_args(tmp_path, hub), tmp_path)
    assert result["failed"] is True
    assert "model-00001-of-00002.safetensors: truncated" in result["msg"]
    assert not (tmp_path / "models" / ("tiny@" + COMMIT)).exists()


def test_hub_connection_dropped_mid_file_resumes(tmp_path, hub_lib):
    with FakeHub(REPO, COMMIT, tiny_model(embed=6 * 1024 * 1024)) as hub:        # a 24 MiB shard
        hub.faults["drop_once"] = "model-00001-of-00002.safetensors"
        result = run_module("sglang_model_fetch", fetch_args(tmp_path, hub), tmp_path)
        assert not result.get("failed"), result.get("msg")
        assert hub.faults.get("dropped") is True
        ranges = [r for _m, path, r in hub.log if path.startswith("/cdn/") and r]
        assert ranges == ["bytes=%d-" % (10 * 1024 * 1024)]    # resumed after the first 10 MiB chunk it got
        shard = tmp_path / "models" / ("tiny@" + COMMIT) / "model-00001-of-00002.safetensors"
        assert shard.read_bytes() == hub.files["model-00001-of-00002.safetensors"]


def test_hub_connection_always_dropped_fails_then_rerun_resumes(tmp_path, hub_lib):
    with FakeHub(REPO, COMMIT, tiny_model()) as hub:
        hub.faults["drop_always"] = "model-00002-of-00002.safetensors"
        result = run_module("sglang_model_fetch", fetch_args(tmp_path, hub), tmp_path)
        assert result["failed"] is True and "rerun resumes" in result["msg"]
        assert not (tmp_path / "models" / ("tiny@" + COMMIT)).exists()
        hub.faults.clear()
        before = hub.bytes_served
        fixed = run_module("sglang_model_fetch", fetch_args(tmp_path, hub), tmp_path)
        assert not fixed.get("failed"), fixed.get("msg")
        # the first shard completed before and is not fetched again
        assert hub.bytes_served - before < sum(len(v) for v in hub.files.values())


def test_hub_disk_too_small_before_any_download(tmp_path, hub_lib):
    with FakeHub(REPO, COMMIT, tiny_model()) as hub:
        result = run_module("sglang_model_fetch", fetch_args(tmp_path, hub, disk_headroom_bytes=2 ** 62), tmp_path)
        assert result["failed"] is True and "not enough disk space" in result["msg"]
        assert "sglang_model_disk_headroom_bytes" in result["msg"]
        assert not any("/cdn/" in path or "/resolve/" in path for _m, path, _r in hub.log)
    assert not (tmp_path / "models").exists()


def test_hub_path_outside_roots_refused_before_any_request(tmp_path, hub_lib):
    with FakeHub(REPO, COMMIT, tiny_model()) as hub:
        result = run_module("sglang_model_fetch", fetch_args(tmp_path, hub, root="/etc/models"), tmp_path)
        assert result["failed"] is True and "outside the allowed roots" in result["msg"] and hub.log == []


def test_pattern_rule_matches_huggingface_hub(hub_lib):
    from huggingface_hub.utils import filter_repo_objects  # pylint: disable=import-outside-toplevel
    names = ["config.json", "model-00001-of-00002.safetensors", "original/consolidated.pth", "tokenizer.model",
             "sub/dir/x.safetensors", "README.md", "original/params.json"]
    for allow, ignore in [(["*.safetensors", "*.json"], ["original/*"]), ([], ["*.md"]), (["original/"], []),
                          (["*.json"], ["original/"])]:
        want = list(filter_repo_objects(names, allow_patterns=allow or None, ignore_patterns=ignore or None))
        assert [n for n in names if _model.matches(n, allow, ignore)] == want, (allow, ignore)
