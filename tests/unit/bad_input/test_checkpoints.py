"""Hostile checkpoints through the modules as Ansible runs them: links out of the model and their siblings,
safetensors headers the reference loader refuses, indexes that disagree with their shards, archives that would
unpack outside. Each is refused naming the file (and the link's target or the tensor), with no traceback and
nothing written; a real Hugging Face cache snapshot passes (docs/model.md "Links and special files")."""

import hashlib
import io
import json
import os
import struct
import tarfile
import zipfile

import pytest

from harness import run_module, run_role

COMMIT = "0123456789abcdef0123456789abcdef01234567"


def tensors_bytes(tensors, header_extra=None):
    """A safetensors file by hand: ``tensors`` = [(name, dtype, shape, data bytes)] laid out one after another."""
    header, data = dict(header_extra or {}), b""
    for name, dtype, shape, blob in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(blob)]}
        data += blob
    raw = json.dumps(header).encode()
    return struct.pack("<Q", len(raw)) + raw + data


def raw_file(header_bytes, data=b"", length=None):
    return struct.pack("<Q", len(header_bytes) if length is None else length) + header_bytes + data


GOOD_SHARD = tensors_bytes([("w", "F32", [4], struct.pack("<4f", 1, 2, 3, 4))])


def make_model(root, files=None):
    root.mkdir(parents=True, exist_ok=True)
    files = {"config.json": b'{"model_type": "llama"}', "model.safetensors": GOOD_SHARD} if files is None else files
    for rel, data in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    return root


def verify(tmp_path, path, **over):
    args = {"path": str(path), "name": "m", "revision": COMMIT, "allowed_roots": [str(tmp_path / "models")],
            "state_dir": str(tmp_path / "state"), "write_manifest": True, "own_dir": False}
    args.update(over)
    return run_module("sglang_model_verify", args, tmp_path)


def refused(result, *needles):
    text = json.dumps(result)
    missing = [n for n in needles if n not in result.get("msg", "")]
    return result.get("failed") is True and "Traceback" not in text and not missing


def reference_refuses(path):
    safetensors = pytest.importorskip("safetensors")
    try:
        with safetensors.safe_open(str(path), framework="numpy") as handle:
            list(handle.keys())
    except Exception:  # pylint: disable=broad-exception-caught  # whatever the reference raises is its refusal
        return True
    return False


# --- class 1: links, special files, hard links ----------------------------------------------------------------------

def _outside(tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("root:x:0:0\n")
    return secret


LINK_CASES = [
    # (id, make(model_dir, tmp_path), the entry named, needles about its target)
    ("absolute-out", lambda m, t: os.symlink("/etc/passwd", str(m / "tokenizer.json")), "tokenizer.json",
     ["link to /etc/passwd", "outside the model root"]),
    ("relative-out", lambda m, t: (_outside(t), os.symlink("../../secret.txt", str(m / "tokenizer.json"))),
     "tokenizer.json", ["../../secret.txt", "outside the model root"]),
    ("absolute-inside", lambda m, t: os.symlink(str(m / "config.json"), str(m / "tokenizer.json")), "tokenizer.json",
     ["absolute link", "config.json"]),
    ("dangling", lambda m, t: os.symlink("nothing-here.json", str(m / "tokenizer.json")), "tokenizer.json",
     ["dangling", "nothing-here.json"]),
    ("loop", lambda m, t: (os.symlink("b.json", str(m / "a.json")), os.symlink("a.json", str(m / "b.json"))),
     "a.json", ["link loop", "b.json"]),
    ("dir-link", lambda m, t: (os.mkdir(str(m / "sub")), os.symlink("sub", str(m / "more"))), "more",
     ["link to a directory", "sub"]),
    ("dir-link-out", lambda m, t: os.symlink("/etc", str(m / "etc")), "etc", ["/etc", "outside the model root"]),
    ("fifo", lambda m, t: os.mkfifo(str(m / "tokenizer.json")), "tokenizer.json", ["FIFO"]),
    ("link-to-fifo", lambda m, t: (os.mkfifo(str(m / "pipe")), os.symlink("pipe", str(m / "tokenizer.json"))),
     "tokenizer.json", ["FIFO", "pipe"]),
    ("hard-link-out", lambda m, t: os.link(str(_outside(t)), str(m / "tokenizer.json")), "tokenizer.json",
     ["2 hard links", "1 of them inside"]),
]


@pytest.mark.parametrize("case_id, make, entry, needles", LINK_CASES, ids=[c[0] for c in LINK_CASES])
def test_verify_refuses_links_out_and_their_siblings(tmp_path, case_id, make, entry, needles):
    model = make_model(tmp_path / "models" / "m")
    make(model, tmp_path)
    result = verify(tmp_path, model)
    assert refused(result, str(model / entry), *needles), result
    assert not (tmp_path / "state").exists() and not (model / ".sglang-model-manifest.json").exists()


def test_staging_with_a_link_out_is_never_promoted(tmp_path):
    """The issue's example: a manifest that agrees with the link (the target's sha256, the link's length) is no
    help; the staging directory is refused and the target never appears."""
    staging = make_model(tmp_path / "models" / ".staging" / ("m@" + COMMIT))
    os.symlink("/etc/passwd", str(staging / "tokenizer.json"))
    passwd = open("/etc/passwd", "rb").read()
    manifest = {"files": {"config.json": {"size": 23, "sha256": hashlib.sha256(b'{"model_type": "llama"}').hexdigest()},
                          "model.safetensors": {"size": len(GOOD_SHARD), "sha256": hashlib.sha256(GOOD_SHARD).hexdigest()},
                          "tokenizer.json": {"size": len("/etc/passwd"), "sha256": hashlib.sha256(passwd).hexdigest()}}}
    target = tmp_path / "models" / ("m@" + COMMIT)
    result = verify(tmp_path, staging, promote_to=str(target), manifest=manifest, write_manifest=False, own_dir=True)
    assert refused(result, "tokenizer.json", "/etc/passwd", "outside the model root"), result
    assert not target.exists() and os.path.islink(str(staging / "tokenizer.json"))


def test_manifest_in_the_model_that_links_out_is_refused(tmp_path):
    model = make_model(tmp_path / "models" / "m")
    (tmp_path / "forged.json").write_text(json.dumps({"files": {"config.json": {"size": 23, "sha256": "0" * 64}}}))
    os.symlink("../../forged.json", str(model / ".sglang-model-manifest.json"))
    result = verify(tmp_path, model, own_dir=True, write_manifest=False)
    assert refused(result, ".sglang-model-manifest.json", "outside the model root"), result


def hf_snapshot(tmp_path, files=None):
    """A Hugging Face cache repository as huggingface_hub lays it out: blobs named by sha256, a snapshot of links."""
    repo = tmp_path / "models" / "hub" / "models--acme--tiny"
    snapshot = repo / "snapshots" / COMMIT
    (repo / "blobs").mkdir(parents=True)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(COMMIT)
    files = files or {"config.json": b'{"model_type": "llama"}', "model.safetensors": GOOD_SHARD,
                      "sub/tokenizer.json": b'{"version": "1.0"}'}
    for rel, data in files.items():
        blob = repo / "blobs" / hashlib.sha256(data).hexdigest()
        blob.write_bytes(data)
        (snapshot / rel).parent.mkdir(parents=True, exist_ok=True)
        os.symlink(os.path.relpath(str(blob), str((snapshot / rel).parent)), str(snapshot / rel))
    return repo, snapshot


def test_hugging_face_cache_snapshot_verifies_in_place_and_converges(tmp_path):
    """The issue's second example: every file a link to ../../blobs/<sha> (sizes are the blobs', not the links')."""
    _repo, snapshot = hf_snapshot(tmp_path)
    first = verify(tmp_path, snapshot)
    assert not first.get("failed"), first.get("msg")
    assert first["manifest"]["files"]["model.safetensors"]["size"] == len(GOOD_SHARD)
    assert first["manifest"]["files"]["sub/tokenizer.json"]["sha256"] == hashlib.sha256(b'{"version": "1.0"}').hexdigest()
    second = verify(tmp_path, snapshot, write_manifest=False)
    assert not second.get("failed") and second["bytes_hashed"] == 0, second
    facts = run_module("sglang_checkpoint_facts", {"model_path": str(snapshot)}, tmp_path)
    assert not facts.get("failed") and facts["num_shards"] == 1, facts


def test_hugging_face_snapshot_link_out_of_the_cache_repository_is_refused(tmp_path):
    repo, snapshot = hf_snapshot(tmp_path)
    other = tmp_path / "models" / "hub" / "models--evil--x" / "blobs"
    other.mkdir(parents=True)
    (other / "payload").write_bytes(b"{}")
    os.symlink("../../../models--evil--x/blobs/payload", str(snapshot / "generation_config.json"))
    result = verify(tmp_path, snapshot)
    assert refused(result, "generation_config.json", "models--evil--x", "outside the model root %s" % repo), result
    facts = run_module("sglang_checkpoint_facts", {"model_path": str(snapshot)}, tmp_path)
    assert refused(facts, "generation_config.json", "outside the model root"), facts


@pytest.mark.parametrize("name, make, needles", [
    ("config.json", lambda m: (m / "config.json").unlink() or os.symlink("/etc/passwd", str(m / "config.json")),
     ["config.json", "/etc/passwd", "outside the model root"]),
    ("model.safetensors", lambda m: (m / "model.safetensors").unlink() or os.mkfifo(str(m / "model.safetensors")),
     ["model.safetensors", "FIFO"]),
    ("hf_quant_config.json", lambda m: os.symlink("../nowhere", str(m / "hf_quant_config.json")),
     ["hf_quant_config.json", "outside the model root"]),
], ids=["config-link-out", "shard-fifo", "quant-config-link-out"])
def test_checkpoint_facts_applies_the_same_rule(tmp_path, name, make, needles):
    model = make_model(tmp_path / "models" / "m")
    make(model)
    result = run_module("sglang_checkpoint_facts", {"model_path": str(model)}, tmp_path, timeout=60)
    assert refused(result, *needles), result


# --- class 2: safetensors structure, checked as the reference checks it --------------------------------------------

U8 = "U8"
STRUCTURE_CASES = [
    # (id, file bytes, needles in the message besides the file name)
    ("overlap", raw_file(json.dumps(
        {"a": {"dtype": U8, "shape": [4], "data_offsets": [0, 4]},
         "b": {"dtype": U8, "shape": [4], "data_offsets": [2, 6]}}).encode(), b"123456"), ["'b'", "overlap"]),
    ("gap", raw_file(json.dumps({"a": {"dtype": U8, "shape": [2], "data_offsets": [0, 2]},
                                 "b": {"dtype": U8, "shape": [2], "data_offsets": [4, 6]}}).encode(), b"123456"),
     ["'b'", "belong to no tensor"]),
    ("trailing", raw_file(json.dumps({"a": {"dtype": U8, "shape": [4], "data_offsets": [0, 4]}}).encode(), b"12345"),
     ["trailing bytes"]),
    ("begin-after-end", raw_file(json.dumps({"a": {"dtype": U8, "shape": [0], "data_offsets": [4, 0]}}).encode(),
                                 b"1234"), ["'a'", "begin 4 > end 0"]),
    ("dtype-size", raw_file(json.dumps({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 4]}}).encode(),
                            b"1234"), ["'a'", "needs 8 bytes"]),
    ("unknown-dtype", raw_file(json.dumps({"a": {"dtype": "Q9", "shape": [4], "data_offsets": [0, 4]}}).encode(),
                               b"1234"), ["'a'", "'Q9'", "not a safetensors dtype"]),
    ("sub-byte", raw_file(json.dumps({"a": {"dtype": "F4", "shape": [3], "data_offsets": [0, 2]}}).encode(), b"12"),
     ["'a'", "not whole bytes"]),
    ("header-list", raw_file(b"[1, 2]"), ["not a JSON object"]),
    ("duplicate-key", raw_file(b'{"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},'
                               b'"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}}', b"1234"), ["'a'", "twice"]),
    ("length-beyond-file", raw_file(b"{}", length=4096), ["header needs 4104 bytes"]),
    ("length-absurd", raw_file(b"{}", length=2 ** 40), ["implausible"]),
    ("not-utf8", raw_file(b'{"\xff":{"dtype":"U8","shape":[4],"data_offsets":[0,4]}}', b"1234"), ["not UTF-8"]),
    ("metadata-not-str", raw_file(json.dumps({"__metadata__": {"format": 1}, "a": {
        "dtype": U8, "shape": [4], "data_offsets": [0, 4]}}).encode(), b"1234"), ["__metadata__", "'format'"]),
    ("minus-zero", raw_file(b'{"a":{"dtype":"U8","shape":[4],"data_offsets":[-0,4]}}', b"1234"), ["'a'", "data_offsets"]),
    ("nan", raw_file(b'{"a":{"dtype":"U8","shape":[NaN],"data_offsets":[0,4]}}', b"1234"), ["not JSON"]),
    ("shape-float", raw_file(b'{"a":{"dtype":"U8","shape":[4.0],"data_offsets":[0,4]}}', b"1234"), ["'a'", "shape"]),
    ("offset-past-u64", raw_file(b'{"a":{"dtype":"U8","shape":[0],"data_offsets":[18446744073709551616,0]}}'),
     ["'a'", "data_offsets"]),
    ("overflow", raw_file(b'{"a":{"dtype":"U8","shape":[4294967296,4294967296],"data_offsets":[0,0]}}'),
     ["'a'", "overflows 64 bits"]),
    ("deep", raw_file(b'{"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4],"x":' + b"[" * 200 + b"]" * 200 + b"}}",
                      b"1234"), ["deeper than 127"]),
    ("short", b"\x01\x02\x03", ["shorter than the 8-byte"]),
]


@pytest.mark.parametrize("case_id, data, needles", STRUCTURE_CASES, ids=[c[0] for c in STRUCTURE_CASES])
def test_safetensors_the_reference_refuses_are_refused(tmp_path, case_id, data, needles):
    model = make_model(tmp_path / "models" / "m", {"config.json": b"{}", "model.safetensors": data})
    assert reference_refuses(model / "model.safetensors"), "the reference loader accepts %s" % case_id
    result = verify(tmp_path, model)
    assert refused(result, str(model / "model.safetensors"), *needles), result
    facts = run_module("sglang_checkpoint_facts", {"model_path": str(model)}, tmp_path)
    assert refused(facts, str(model / "model.safetensors"), *needles), facts


def _sharded(tmp_path, weight_map, shards, extra=None):
    files = {"config.json": b"{}", "model.safetensors.index.json": json.dumps({"weight_map": weight_map}).encode()}
    for name, tensors in shards.items():
        files[name] = tensors_bytes([(t, U8, [1], b"x") for t in tensors])
    files.update(extra or {})
    return make_model(tmp_path / "models" / "m", files)


S1, S2, S3 = ("model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors",
              "model-00003-of-00003.safetensors")
INDEX_CASES = [
    ("tensor-no-shard-holds", {"a": S1, "b": S1, "c": S2}, {S1: ["a"], S2: ["c"]}, None,
     ["model.safetensors.index.json", "puts tensor 'b' in %s, which does not hold it" % S1]),
    ("tensor-in-two-shards", {"a": S1, "c": S2}, {S1: ["a"], S2: ["a", "c"]}, None,
     [S2, "holds tensor 'a'", "puts in %s (a tensor in two shards)" % S1]),
    ("tensor-not-listed", {"a": S1, "c": S2}, {S1: ["a", "z"], S2: ["c"]}, None, [S1, "'z'", "does not list"]),
    ("shard-not-listed", {"a": S1}, {S1: ["a"], S2: ["c"]}, None, [S2, "does not name it"]),
    ("shard-missing", {"a": S1, "c": S2}, {S1: ["a"]}, None, [S2, "named by model.safetensors.index.json but missing"]),
    ("shard-dotdot", {"a": "../x.safetensors"}, {}, None, ["'../x.safetensors'", "not a file name inside the model"]),
    ("index-list", None, {S1: ["a"]}, {"model.safetensors.index.json": b"[1]"}, ["weight_map"]),
    ("index-duplicate", None, {S1: ["a"]}, {"model.safetensors.index.json": (
        '{"weight_map": {"a": "%s", "a": "%s"}}' % (S1, S3)).encode()}, ["'a'", "twice"]),
]


@pytest.mark.parametrize("case_id, weight_map, shards, extra, needles", INDEX_CASES, ids=[c[0] for c in INDEX_CASES])
def test_index_that_disagrees_with_its_shards_is_refused(tmp_path, case_id, weight_map, shards, extra, needles):
    model = _sharded(tmp_path, weight_map or {}, shards, extra)
    result = verify(tmp_path, model)
    assert refused(result, *needles), result
    assert not (tmp_path / "state").exists()


def test_index_that_is_not_utf8_is_refused_naming_the_file_and_the_offset(tmp_path):
    """The index is a record: bytes that are not UTF-8 are refused (module_utils/_fs), never read with replacement."""
    index = json.dumps({"weight_map": {"a": S1}}).encode()
    at = index.index(b'"a"') + 1
    model = _sharded(tmp_path, {"a": S1}, {S1: ["a"]}, {
        "model.safetensors.index.json": index[:at] + b"\xff" + index[at:]})
    result = verify(tmp_path, model)
    assert refused(result, "model.safetensors.index.json", "not UTF-8", "offset %d" % at), result
    assert not (tmp_path / "state").exists()


def test_consistent_index_with_a_consolidated_file_beside_it_passes(tmp_path):
    model = _sharded(tmp_path, {"a": S1, "c": S2}, {S1: ["a"], S2: ["c"], "consolidated.safetensors": ["a", "c"]})
    result = verify(tmp_path, model)
    assert not result.get("failed"), result.get("msg")


# --- class 6: the crash of the example ------------------------------------------------------------------------------

def test_checkpoint_facts_on_a_header_that_is_a_json_list(tmp_path):
    model = make_model(tmp_path / "models" / "m", {"config.json": b'{"model_type": "llama"}',
                                                   "model.safetensors": raw_file(b"[1, 2, 3]")})
    result = run_module("sglang_checkpoint_facts", {"model_path": str(model)}, tmp_path)
    assert refused(result, str(model / "model.safetensors"), "not a JSON object"), result


# --- archives -------------------------------------------------------------------------------------------------------

def _tar(path, members, mode="w"):
    with tarfile.open(str(path), mode) as archive:
        for name, kind, value in members:
            info = tarfile.TarInfo(name)
            if kind == "file":
                info.size = len(value)
                archive.addfile(info, io.BytesIO(value))
                continue
            info.type = {"dir": tarfile.DIRTYPE, "sym": tarfile.SYMTYPE, "hard": tarfile.LNKTYPE,
                         "fifo": tarfile.FIFOTYPE, "chr": tarfile.CHRTYPE}[kind]
            info.linkname = value or ""
            archive.addfile(info)
    return path


BASE = [("config.json", "file", b"{}"), ("model.safetensors", "file", GOOD_SHARD)]
ARCHIVE_CASES = [
    ("symlink-absolute", [("tokenizer.json", "sym", "/etc/passwd")], ["tokenizer.json", "/etc/passwd", "absolute"]),
    ("symlink-leaves", [("tokenizer.json", "sym", "../../etc/passwd")], ["tokenizer.json", "leaves the archive"]),
    ("written-through-link", [("d", "sym", "sub"), ("d/x.json", "file", b"{}")], ["d/x.json", "through the link member d"]),
    ("hardlink-out", [("tokenizer.json", "hard", "/etc/passwd")], ["tokenizer.json", "hard link to /etc/passwd"]),
    ("absolute-name", [("/etc/cron.d/x", "file", b"x")], ["/etc/cron.d/x", "absolute member name"]),
    ("dotdot-name", [("../../x", "file", b"x")], ["../../x", "'..'"]),
    ("fifo", [("pipe", "fifo", None)], ["pipe", "FIFO member"]),
    ("device", [("null", "chr", None)], ["null", "character device member"]),
    ("twice", [("config.json", "file", b"[]")], ["config.json", "appears twice"]),
]


@pytest.mark.parametrize("case_id, members, needles", ARCHIVE_CASES, ids=[c[0] for c in ARCHIVE_CASES])
def test_archive_members_refused_before_unpacking(tmp_path, case_id, members, needles):
    archive = _tar(tmp_path / "m.tar.gz", BASE + members, "w:gz")
    result = run_module("sglang_model_archive", {"path": str(archive)}, tmp_path)
    assert refused(result, "sglang_model_archive=", *needles), result


def test_archive_good_tar_zip_and_snapshot_directory(tmp_path):
    members = BASE + [("sub", "dir", None), ("sub/tokenizer.json", "file", b'{"v": 1}'),
                      ("tokenizer.json", "sym", "sub/tokenizer.json"), ("copy.json", "hard", "config.json")]
    tar = run_module("sglang_model_archive", {"path": str(_tar(tmp_path / "m.tar", members))}, tmp_path)
    assert not tar.get("failed") and tar["kind"] == "tar" and tar["files"] == 4, tar
    assert tar["bytes"] == 2 + len(GOOD_SHARD) + 8
    with zipfile.ZipFile(str(tmp_path / "m.zip"), "w") as archive:
        archive.writestr("config.json", "{}")
        link = zipfile.ZipInfo("tokenizer.json")
        link.external_attr = 0o120777 << 16
        archive.writestr(link, "/etc/passwd")
    bad_zip = run_module("sglang_model_archive", {"path": str(tmp_path / "m.zip")}, tmp_path)
    assert refused(bad_zip, "tokenizer.json", "/etc/passwd"), bad_zip
    _repo, snapshot = hf_snapshot(tmp_path)
    directory = run_module("sglang_model_archive", {"path": str(snapshot)}, tmp_path)
    assert not directory.get("failed") and directory["kind"] == "directory" and directory["files"] == 3, directory
    os.symlink("/etc/shadow", str(snapshot / "special_tokens_map.json"))
    bad_dir = run_module("sglang_model_archive", {"path": str(snapshot)}, tmp_path)
    assert refused(bad_dir, "special_tokens_map.json", "/etc/shadow", "outside the model root"), bad_dir
    (tmp_path / "junk.tar").write_bytes(b"not an archive at all")
    junk = run_module("sglang_model_archive", {"path": str(tmp_path / "junk.tar")}, tmp_path)
    assert refused(junk, "junk.tar", "neither a tar archive"), junk


# --- the role: refused before anything reaches a host ---------------------------------------------------------------

def _role_vars(tmp_path, **over):
    values = {"sglang_model_revision": COMMIT, "sglang_model_root": str(tmp_path / "models"),
              "sglang_model_allowed_roots": [str(tmp_path / "models")], "sglang_model_state_dir": str(tmp_path / "state"),
              "sglang_model_disk_headroom_bytes": 0}
    values.update(over)
    return values


def test_role_refuses_an_archive_with_a_link_out(tmp_path):
    (tmp_path / "ctl").mkdir()
    archive = _tar(tmp_path / "ctl" / "m.tar", BASE + [("tokenizer.json", "sym", "/etc/passwd")])
    run = run_role(tmp_path, "sglang_model", _role_vars(tmp_path, sglang_model_source="archive",
                                                        sglang_model_archive=str(archive)))
    assert run.refused_before_change("sglang_model_archive=", "tokenizer.json", "/etc/passwd"), run
    assert not (tmp_path / "models").exists()


def test_role_refuses_an_archive_directory_with_a_link_out(tmp_path):
    src = make_model(tmp_path / "ctl" / "m")
    os.symlink("/etc/passwd", str(src / "tokenizer.json"))
    run = run_role(tmp_path, "sglang_model", _role_vars(tmp_path, sglang_model_source="archive",
                                                        sglang_model_archive=str(src)))
    assert run.refused_before_change("sglang_model_archive=", "tokenizer.json", "outside the model root"), run
    assert not (tmp_path / "models").exists()


def test_role_refuses_a_directory_source_with_a_link_out(tmp_path):
    src = make_model(tmp_path / "models" / "nfs" / "m")
    os.symlink("../../../secret.txt", str(src / "tokenizer.json"))
    _outside(tmp_path)
    run = run_role(tmp_path, "sglang_model", _role_vars(tmp_path, sglang_model_source="directory",
                                                        sglang_model_directory=str(src)))
    assert run.refused_before_change("tokenizer.json", "secret.txt", "outside the model root"), run
    assert not (tmp_path / "state").exists()


def test_checkpoint_facts_applies_the_rule_to_the_speculative_draft(tmp_path):
    model = make_model(tmp_path / "models" / "m")
    draft = make_model(tmp_path / "models" / "draft", {"model.safetensors": GOOD_SHARD})
    os.symlink("/etc/passwd", str(draft / "config.json"))
    result = run_module("sglang_checkpoint_facts", {"model_path": str(model), "speculative": {
        "algorithm": "EAGLE", "draft_model_path": str(draft)}}, tmp_path)
    assert refused(result, "draft", "config.json", "/etc/passwd", "outside the model root"), result
