# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang contributors
# Apache-2.0 (see LICENSE)
"""A model checkpoint on a host: inputs, manifest, safetensors structure, verification stamp, Hub fetch.

Pure Python (stdlib); ``huggingface_hub`` is imported only inside the Hub functions (guarded), so the verify side
runs with the system Python of any host. docs/model.md describes the whole flow.

Shapes (all sizes in bytes, digests lowercase hex):

* manifest: ``{"format": 1, "name": str, "revision": str, "source": str,
  "files": {relpath: {"size": int, "sha256": str, "git_sha1": str (optional, Hub non-LFS files)}}}``.
  For the Hub, ``size``/``sha256`` of LFS files come from the repository's own tree metadata (``lfs.sha256``,
  ``lfs.size``); small non-LFS files carry the git blob id (``git_sha1`` = sha1 of ``"blob <size>\\0" + data``)
  and get their sha256 computed where they were fetched. Other sources: written once where fetched.
* manifest digest: sha256 of the canonical JSON of ``files`` (sorted keys, no spaces) -- what the release manifest
  and the drift audit compare.
* stamp (per host, never inside the model directory, so it does not travel with a copy):
  ``{"format": 1, "path": str, "manifest_digest": str, "files": {relpath: [size, mtime_ns]}}``; a file whose
  size and mtime_ns equal the stamp's (for the same manifest digest) is not re-hashed.

Files are read under the link rule of ``_checkpoint_tree`` (links resolve inside the model root; size, structure and
digest of one open descriptor); safetensors headers are checked as the reference loader checks them
(``_safetensors``), and an index against the headers of its shards (:func:`index_problems`).
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import os
import re
import shutil
import stat
import sys
import threading
import time

from ansible_collections.blackwell.sglang.plugins.module_utils import _checkpoint_tree as _tree
from ansible_collections.blackwell.sglang.plugins.module_utils import _safetensors
from ansible_collections.blackwell.sglang.plugins.module_utils import _fs
from ansible_collections.blackwell.sglang.plugins.module_utils import _inputs
from ansible_collections.blackwell.sglang.plugins.module_utils import _net

COMMIT_RE = re.compile(r"^[0-9a-f]{40}$")
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
MANIFEST_NAME = ".sglang-model-manifest.json"
# huggingface_hub's local_dir metadata (resume state); never part of the model, removed before promotion
HF_LOCAL_CACHE = ".cache"
CHUNK = 8 * 1024 * 1024


class ModelError(Exception):
    """A clear, operator-facing error (what, which variable or file, what to do)."""


# ---------------------------------------------------------------------------------------------------- inputs


def check_revision(revision, allow_branch, var="sglang_model_revision"):
    """Return the revision; raise ModelError when missing, or not a 40-hex commit and branches are not allowed."""
    revision = (revision or "").strip()
    if not revision:
        raise ModelError("%s is empty: pin the checkpoint to a 40-hex commit id of the repository" % var)
    if COMMIT_RE.match(revision):
        return revision
    if not allow_branch:
        raise ModelError("%s=%r is not a 40-hex commit id; a branch or tag can move under a running fleet. Pin the "
                         "commit (huggingface.co/<repo>/commits/<branch>) or set sglang_model_allow_branch=true "
                         "(not for production)" % (var, revision))
    if not re.match(r"^[A-Za-z0-9][A-Za-z0-9._/-]*$", revision) or ".." in revision:
        raise ModelError("%s=%r is not a valid branch or tag name" % (var, revision))
    return revision


def check_name(name, var="sglang_model_name"):
    if not name or not NAME_RE.match(name):
        raise ModelError("%s=%r must be a plain directory name (letters, digits, '.', '_', '-')" % (var, name))
    return name


def check_under_roots(path, roots, var):
    """Raise ModelError unless the absolute, normalised ``path`` lies below one of ``roots``."""
    if not path or not os.path.isabs(path):
        raise ModelError("%s=%r must be an absolute path" % (var, path))
    real = os.path.realpath(path)
    if not roots:
        raise ModelError("sglang_model_allowed_roots is empty: no directory may hold a model")
    for root in roots:
        root_real = os.path.realpath(root)
        if real == root_real or real.startswith(root_real.rstrip(os.sep) + os.sep):
            return real
    raise ModelError("%s=%s is outside the allowed roots %s (sglang_model_allowed_roots)" % (var, path, ", ".join(roots)))


def model_dir(root, name, revision):
    """``<root>/<name>@<revision>``: the verified directory the service points at."""
    return os.path.join(root, "%s@%s" % (name, revision))


def state_file(state_dir, name, revision, path, kind):
    """``<state_dir>/<name>@<revision>.<sha256(path)[:12]>.<kind>.json``: per host and per directory (two copies of
    one revision in different places never share a stamp)."""
    key = hashlib.sha256(os.path.realpath(path).encode()).hexdigest()[:12]
    return os.path.join(state_dir, "%s@%s.%s.%s.json" % (name, revision, key, kind))


def staging_dir(target):
    """Staging directory next to the target (same filesystem, so the final rename is atomic)."""
    parent, base = os.path.split(target.rstrip(os.sep))
    return os.path.join(parent, ".staging", base)


# ---------------------------------------------------------------------------------------------------- manifest


def canonical(files):
    return json.dumps(files, sort_keys=True, separators=(",", ":"))


def manifest_digest(manifest):
    files = {k: {"size": v["size"], "sha256": v.get("sha256")} for k, v in manifest["files"].items()}
    return hashlib.sha256(canonical(files).encode()).hexdigest()


def new_manifest(name, revision, source, files):
    return {"format": 1, "name": name, "revision": revision, "source": source, "files": files}


def load_manifest(path):
    """A manifest file given by the operator or kept in the state directory (not the model's own: see
    :func:`load_manifest_in`)."""
    try:
        with open(path, "rb") as handle:
            raw = handle.read()
    except OSError as exc:
        raise ModelError("cannot read the manifest %s: %s" % (path, exc)) from None
    return check_manifest(_fs.parse_json(raw, path, "model manifest", ModelError,
                                         lambda reason: "cannot read the manifest %s: %s" % (path, reason)), path)


def load_manifest_in(model_dir):
    """The model's own ``<model_dir>/.sglang-model-manifest.json``, read under the link rule (a link out of the
    model is refused, not followed); None when there is none."""
    path = os.path.join(model_dir, MANIFEST_NAME)
    try:
        opened = _tree.open_file(model_dir, MANIFEST_NAME)
        if opened is None:
            return None
        with opened[0] as handle:
            data = _fs.parse_json(handle.read(), path, "model manifest", ModelError,
                                  lambda reason: "cannot read the manifest %s: %s" % (path, reason))
    except _tree.TreeError as exc:
        raise ModelError("cannot read the manifest %s: it %s" % (path, exc.reason)) from None
    except OSError as exc:
        raise ModelError("cannot read the manifest %s: %s" % (path, exc)) from None
    return check_manifest(data, path)


def check_manifest(data, where="manifest"):
    if not isinstance(data, dict) or not isinstance(data.get("files"), dict) or not data["files"]:
        raise ModelError("%s is not a model manifest (needs a non-empty 'files' mapping)" % where)
    for rel, entry in data["files"].items():
        if not isinstance(entry, dict) or not isinstance(entry.get("size"), int):
            raise ModelError("%s: entry %r has no integer size" % (where, rel))
        if os.path.isabs(rel) or ".." in rel.split("/"):
            raise ModelError("%s: entry %r is not a relative path inside the model" % (where, rel))
        if not entry.get("sha256") and not entry.get("git_sha1"):
            raise ModelError("%s: entry %r has neither sha256 nor git_sha1" % (where, rel))
    return data


def write_json_atomic(path, data, mode=0o644):
    """Write ``data`` as JSON to ``path`` through a temporary file beside it and a rename. The temporary name is
    created exclusively and never through a link: a name planted in the directory (a link to /etc/passwd) is
    removed, not written through."""
    tmp = "%s.tmp.%d" % (path, os.getpid())
    try:
        os.unlink(tmp)
    except FileNotFoundError:
        pass
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), mode)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        json.dump(data, handle, indent=1, sort_keys=True)
        handle.write("\n")
        handle.flush()
        os.fchmod(handle.fileno(), mode)
        os.fsync(handle.fileno())
    os.replace(tmp, path)


def matches(rel, allow, ignore):
    """huggingface_hub's filter_repo_objects rule: fnmatch, a pattern ending in '/' means the whole folder."""
    def norm(patterns):
        return [p + "*" if p.endswith("/") else p for p in (patterns or [])]
    allow, ignore = norm(allow), norm(ignore)
    if allow and not any(fnmatch.fnmatch(rel, p) for p in allow):
        return False
    return not any(fnmatch.fnmatch(rel, p) for p in ignore)


# ---------------------------------------------------------------------------------------------------- files


def scan(root):
    """``(entries, problems)`` of the checkpoint below ``root`` under the link rule (``_checkpoint_tree.scan``),
    without our manifest and huggingface_hub's resume cache; problems as ``[{"file", "reason"}]``."""
    entries, problems = _tree.scan(root, skip_top=(HF_LOCAL_CACHE,), skip=(MANIFEST_NAME,))
    return entries, [{"file": p.rel, "reason": p.reason} for p in problems]


def list_files(root):
    """{relpath: (size, mtime_ns)} of the readable files below root (sizes of what a read gets: a link's target),
    without our manifest and the HF resume cache; entries the link rule refuses are left out (see :func:`scan`)."""
    entries, _problems = scan(root)
    return {rel: (e.stat.st_size, e.stat.st_mtime_ns) for rel, e in entries.items()}


def hash_handle(handle, size, progress=None):
    """(sha256 hex, git blob sha1 hex) of an open binary file of ``size`` bytes (its fstat), from offset 0, read in
    8 MiB chunks; progress(n_bytes) after each chunk. A file that changes length while read raises ModelError."""
    sha = hashlib.sha256()
    git = hashlib.sha1(b"blob %d\0" % size)
    handle.seek(0)
    done = 0
    while True:
        chunk = handle.read(CHUNK)
        if not chunk:
            break
        done += len(chunk)
        sha.update(chunk)
        git.update(chunk)
        if progress:
            progress(len(chunk))
    if done != size:
        raise ModelError("%s changed while it was read (%d bytes, %d when opened)" % (
            getattr(handle, "name", "a file"), done, size))
    return sha.hexdigest(), git.hexdigest()


def hash_file(path, progress=None):
    """(sha256 hex, git blob sha1 hex) of a file; size and bytes from the same open descriptor."""
    with open(path, "rb") as handle:
        return hash_handle(handle, os.fstat(handle.fileno()).st_size, progress)


def safetensors_problem(path, size=None):
    """None when the safetensors file is structurally whole (``_safetensors.read``: what the reference loader
    checks), else a short reason (truncated, bad header, overlapping tensors, ...)."""
    with open(path, "rb") as handle:
        size = os.fstat(handle.fileno()).st_size if size is None else size
        try:
            _safetensors.read(handle, size)
        except _safetensors.SafetensorsError as exc:
            return str(exc)
    return None


# model-00001-of-00004.safetensors: the names transformers and huggingface_hub give the shards of one index
SHARD_RE = re.compile(r"^(?P<prefix>.+)-(?P<k>\d+)-of-(?P<n>\d+)\.safetensors$")
# per index: tensor disagreements listed before "and N more" (a wrong index can disagree on every tensor)
MAX_TENSOR_PROBLEMS = 20


def read_index(handle, rel):
    """The ``weight_map`` of an open ``*.safetensors.index.json``: {tensor: shard file name}.

    :raises ModelError: not UTF-8 JSON, not an object, a key twice, no ``weight_map`` object of str -> str, or a shard
        name that is not a relative path inside the model.
    """
    def pairs(items):
        seen = {}
        for key, value in items:
            if key in seen:
                raise ModelError("%s: key %r appears twice in one object (ambiguous index)" % (rel, key))
            seen[key] = value
        return seen
    data = _fs.parse_json(handle.read(), rel, "safetensors index", ModelError,
                          lambda reason: "%s: not JSON (%s)" % (rel, reason), object_pairs_hook=pairs)
    weight_map = data.get("weight_map") if isinstance(data, dict) else None
    if not isinstance(weight_map, dict) or not all(isinstance(v, str) for v in weight_map.values()):
        raise ModelError("%s: needs a 'weight_map' object mapping tensor names to shard file names" % rel)
    for shard in sorted(set(weight_map.values())):
        try:
            _tree.check_rel(shard)
        except _tree.TreeError:
            raise ModelError("%s: weight_map names the shard %r, which is not a file name inside the model" % (
                rel, shard)) from None
    return weight_map


def index_problems(root, files, headers, indexes):
    """Where ``model.safetensors.index.json`` and its shards disagree.

    :param files: the checkpoint's relative paths. :param headers: {shard rel: ``_safetensors.read`` result} of the
        shards that were read whole. :param indexes: {index rel: weight_map} (:func:`read_index`).
    :returns: ``[{"file", "reason"}]``: a shard named but missing; a tensor the index puts in a shard that does not
        hold it; a tensor a shard holds that the index does not list or puts in another shard (a tensor in two
        shards); a file of the index's shard series (``<prefix>-NNNNN-of-NNNNN.safetensors``) the index does not name.
        Other ``*.safetensors`` beside an index (``consolidated.safetensors``) are not judged: loaders ignore them.
    """
    problems = []
    for rel in sorted(indexes):
        weight_map = indexes[rel]
        base = os.path.dirname(rel)

        def full(shard):
            return "%s/%s" % (base, shard) if base else shard
        by_shard = {}
        for tensor, shard in weight_map.items():
            by_shard.setdefault(full(shard), set()).add(tensor)
        tensor_problems = []
        for shard_rel in sorted(by_shard):
            if shard_rel not in files:
                problems.append({"file": shard_rel, "reason": "named by %s but missing" % rel})
                continue
            if shard_rel not in headers:
                continue
            held = headers[shard_rel]["tensors"]
            for tensor in sorted(by_shard[shard_rel] - set(held)):
                tensor_problems.append({"file": rel, "reason": "puts tensor %r in %s, which does not hold it" % (
                    tensor, shard_rel)})
            for tensor in sorted(set(held) - by_shard[shard_rel]):
                other = weight_map.get(tensor)
                tensor_problems.append({"file": shard_rel, "reason": (
                    "holds tensor %r, which %s puts in %s (a tensor in two shards)" % (tensor, rel, full(other))
                    if other is not None else "holds tensor %r, which %s does not list" % (tensor, rel))})
        if len(tensor_problems) > MAX_TENSOR_PROBLEMS:
            extra = len(tensor_problems) - MAX_TENSOR_PROBLEMS
            tensor_problems = tensor_problems[:MAX_TENSOR_PROBLEMS] + [
                {"file": rel, "reason": "and %d more tensors where the index and its shards disagree" % extra}]
        problems.extend(tensor_problems)
        series = set()
        for shard_rel in by_shard:
            match = SHARD_RE.match(os.path.basename(shard_rel))
            if match:
                series.add((os.path.dirname(shard_rel), match.group("prefix"), match.group("n")))
        for other in sorted(files):
            match = SHARD_RE.match(os.path.basename(other))
            if (match and other not in by_shard
                    and (os.path.dirname(other), match.group("prefix"), match.group("n")) in series):
                problems.append({"file": other, "reason": "is a shard of the series %s-*-of-%s.safetensors but %s "
                                                          "does not name it" % (match.group("prefix"),
                                                                                match.group("n"), rel)})
    return problems


# ---------------------------------------------------------------------------------------------------- verify


def load_stamp(path):
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
        return data if isinstance(data, dict) and isinstance(data.get("files"), dict) else None
    except (OSError, ValueError):
        return None


def _read_entry(entry, model_root, want_size=None, stamp_entry=None, progress=None):
    """Open one checkpoint file once and take everything from that descriptor: ``{"size", "mtime", "header",
    "weight_map", "sha256", "git_sha1"}`` (safetensors header for ``*.safetensors``, weight_map for an index).

    ``want_size``: stop after fstat when the size differs (nothing read). ``stamp_entry``: ``[size, mtime_ns]`` from
    the stamp; when fstat matches it the structure is still checked but the file is not hashed (``sha256`` None).
    :raises ModelError: with the reason (link rule, structure, the file changing while read).
    """
    try:
        handle, st = _tree.open_entry(entry, model_root)
    except _tree.TreeError as exc:
        raise ModelError(exc.reason) from None
    with handle:
        out = {"size": st.st_size, "mtime": st.st_mtime_ns, "header": None, "weight_map": None, "sha256": None,
               "git_sha1": None}
        if want_size is not None and st.st_size != want_size:
            return out
        if entry.rel.endswith(".safetensors"):
            try:
                out["header"] = _safetensors.read(handle, st.st_size)
            except _safetensors.SafetensorsError as exc:
                raise ModelError(str(exc)) from None
        elif entry.rel.endswith(".safetensors.index.json"):
            out["weight_map"] = read_index(handle, entry.rel)
        if stamp_entry is not None and list(stamp_entry) == [st.st_size, st.st_mtime_ns]:
            return out
        out["sha256"], out["git_sha1"] = hash_handle(handle, st.st_size, progress)
    return out


def verify_dir(root, manifest, stamp=None, strict=True, progress=None):
    """Check every file of ``manifest`` in ``root``.

    Returns ``{"ok", "errors": [{"file", "reason"}], "hashed": [rel], "trusted": [rel], "bytes_hashed",
    "total_bytes", "digest", "stamp", "computed": {rel: {"sha256", "git_sha1"}}}``. Files are read under the link
    rule (``_checkpoint_tree``: links resolve inside the model root; size, header and hash of one descriptor). A file
    is trusted (not hashed) when ``stamp`` is for the same manifest digest and records the same (size, mtime_ns).
    Safetensors files are always checked structurally (header only) and against ``*.safetensors.index.json``.
    ``strict``: files in ``root`` not in the manifest are errors.
    """
    digest = manifest_digest(manifest)
    entries, errors = scan(root)
    _real_dir, model_root = _tree.model_root(root)
    refused = set(e["file"] for e in errors)
    usable = stamp and stamp.get("manifest_digest") == digest and stamp.get("path") in (None, root)
    stamp_files = stamp["files"] if usable and isinstance(stamp.get("files"), dict) else {}
    hashed, trusted, computed, present, headers, indexes = [], [], {}, {}, {}, {}
    bytes_hashed = 0
    total = 0
    for rel in sorted(manifest["files"]):
        want = manifest["files"][rel]
        total += want["size"]
        if rel in refused:
            continue
        if rel not in entries:
            errors.append({"file": rel, "reason": "missing"})
            continue
        try:
            read = _read_entry(entries[rel], model_root, want_size=want["size"], stamp_entry=stamp_files.get(rel),
                               progress=progress)
        except ModelError as exc:
            errors.append({"file": rel, "reason": str(exc)})
            continue
        size = read["size"]
        present[rel] = (size, read["mtime"])
        if size != want["size"]:
            errors.append({"file": rel, "reason": "size %d, manifest says %d%s" % (
                size, want["size"], " (truncated)" if size < want["size"] else "")})
            continue
        if read["header"] is not None:
            headers[rel] = read["header"]
        if read["weight_map"] is not None:
            indexes[rel] = read["weight_map"]
        if read["sha256"] is None:
            trusted.append(rel)
            continue
        sha, git = read["sha256"], read["git_sha1"]
        bytes_hashed += size
        hashed.append(rel)
        computed[rel] = {"sha256": sha, "git_sha1": git}
        if want.get("sha256") and sha != want["sha256"]:
            errors.append({"file": rel, "reason": "sha256 %s, manifest says %s" % (sha, want["sha256"])})
        elif not want.get("sha256") and want.get("git_sha1") and git != want["git_sha1"]:
            errors.append({"file": rel, "reason": "git blob id %s, the repository says %s" % (git, want["git_sha1"])})
    if strict:
        for rel in sorted(set(entries) - set(manifest["files"])):
            errors.append({"file": rel, "reason": "not in the manifest"})
    listed = set(manifest["files"])
    for problem in index_problems(root, listed, headers, indexes):
        if not (problem["reason"].startswith("named by ") and problem["file"] in listed):   # reported as missing
            errors.append(problem)
    new_stamp = None
    if not errors:
        new_stamp = {"format": 1, "path": root, "manifest_digest": digest,
                     "files": {rel: list(present[rel]) for rel in manifest["files"]}}
    return {"ok": not errors, "errors": errors, "hashed": hashed, "trusted": trusted, "bytes_hashed": bytes_hashed,
            "total_bytes": total, "digest": digest, "stamp": new_stamp, "computed": computed}


def manifest_from_dir(root, name, revision, source, progress=None):
    """Hash every file below root (sha256 + git blob id) and return a manifest; a file the link rule refuses, a
    structural error or an index that disagrees with its shards raises ModelError naming the file."""
    entries, problems = scan(root)
    if problems:
        raise ModelError(format_errors(root, problems))
    _real_dir, model_root = _tree.model_root(root)
    files, headers, indexes = {}, {}, {}
    for rel, entry in entries.items():
        try:
            read = _read_entry(entry, model_root, progress=progress)
        except ModelError as exc:
            raise ModelError("%s: %s" % (os.path.join(root, rel), exc)) from None
        if read["header"] is not None:
            headers[rel] = read["header"]
        if read["weight_map"] is not None:
            indexes[rel] = read["weight_map"]
        files[rel] = {"size": read["size"], "sha256": read["sha256"]}
    if not files:
        raise ModelError("%s holds no files" % root)
    problems = index_problems(root, set(files), headers, indexes)
    if problems:
        raise ModelError(format_errors(root, problems))
    return new_manifest(name, revision, source, files)


def fill_sha256(manifest, computed):
    """Complete Hub entries that only had a git blob id with the sha256 computed where the files were fetched."""
    for rel, entry in manifest["files"].items():
        if not entry.get("sha256") and rel in computed:
            entry["sha256"] = computed[rel]["sha256"]
    return manifest


def format_errors(root, errors, limit=10):
    shown = ["%s: %s" % (os.path.join(root, e["file"]), e["reason"]) for e in errors[:limit]]
    more = " (and %d more)" % (len(errors) - limit) if len(errors) > limit else ""
    return "; ".join(shown) + more


def make_readable(root):
    """Add read (and, for directories, search) permission for group and others to every directory and regular file
    below ``root``; never removes a bit, never follows a symlink.

    The service user reads the checkpoint, but a download or copy under a hardened umask (027 or 077, CIS benchmarks)
    leaves it readable by root only. Weights are no secret on the host: the Hub token never reaches these files.
    The mode is changed through a descriptor opened without following links (``fchmod``), so a name swapped for a
    link to /etc/shadow between the check and the change is not touched.
    """
    for dirpath, _dirnames, filenames in os.walk(root):
        _add_mode(dirpath, 0o755, directory=True)
        for name in filenames:
            _add_mode(os.path.join(dirpath, name), 0o444, directory=False)


def _add_mode(path, bits, directory):
    try:
        before = os.lstat(path)
    except OSError:
        return
    if not (stat.S_ISDIR(before.st_mode) if directory else stat.S_ISREG(before.st_mode)):
        return
    flags = (os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
             | (getattr(os, "O_DIRECTORY", 0) if directory else 0))
    try:
        fd = os.open(path, flags)
    except PermissionError:
        # not root and a file we may not read: chmod can only reach our own files then
        os.chmod(path, stat.S_IMODE(before.st_mode) | bits)
        return
    except OSError:
        return
    try:
        now = os.fstat(fd)
        if (now.st_dev, now.st_ino) == (before.st_dev, before.st_ino):
            os.fchmod(fd, stat.S_IMODE(now.st_mode) | bits)
    finally:
        os.close(fd)


def promote(staging, target):
    """Rename the verified staging directory to the target (same filesystem: atomic), readable by the service user
    (``make_readable``). Never replaces a target."""
    if os.path.exists(target):
        raise ModelError("%s already exists; refusing to replace it (remove it or verify it in place)" % target)
    cache = os.path.join(staging, HF_LOCAL_CACHE)
    if os.path.islink(cache):
        os.unlink(cache)
    elif os.path.isdir(cache):
        shutil.rmtree(cache)
    make_readable(staging)
    os.rename(staging, target)
    parent = os.path.dirname(target)
    fd = os.open(parent, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# ---------------------------------------------------------------------------------------------------- disk


def free_bytes(path):
    """Free bytes for an unprivileged writer on the filesystem holding ``path`` (its nearest existing parent)."""
    probe = path
    while not os.path.exists(probe):
        probe = os.path.dirname(probe) or "/"
    stat = os.statvfs(probe)
    return stat.f_bavail * stat.f_frsize, probe


def staged_bytes(staging, manifest):
    """Bytes of the manifest already complete in the staging directory (right size), plus partial downloads."""
    if not os.path.isdir(staging):
        return 0
    done = 0
    present = list_files(staging)
    for rel, entry in manifest["files"].items():
        if rel in present and present[rel][0] == entry["size"]:
            done += entry["size"]
    return done + incomplete_bytes(staging)


def incomplete_bytes(staging):
    total = 0
    cache = os.path.join(staging, HF_LOCAL_CACHE)
    for dirpath, _dirs, filenames in os.walk(cache):
        for fname in filenames:
            if fname.endswith(".incomplete"):
                try:
                    total += os.path.getsize(os.path.join(dirpath, fname))
                except OSError:
                    pass
    return total


def check_disk(target, need_total, already, headroom):
    """Raise ModelError when the filesystem of ``target`` cannot take the rest of the download plus headroom."""
    free, where = free_bytes(target)
    need = max(need_total - already, 0) + headroom
    if free < need:
        raise ModelError(
            "not enough disk space for %s: need %s (model %s, %s already staged, headroom %s "
            "sglang_model_disk_headroom_bytes), %s free on the filesystem of %s" % (
                target, human(need), human(need_total), human(already), human(headroom), human(free), where))
    return {"free_bytes": free, "need_bytes": need, "filesystem_path": where}


def human(n):
    n = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return ("%d %s" % (n, unit)) if unit == "B" else ("%.1f %s" % (n, unit))
        n /= 1024
    return "%.1f TiB" % n


# ---------------------------------------------------------------------------------------------------- progress


def progress_message(state):
    """One line from a progress record: '1.2 GiB / 4.0 GiB (30%), 85.3 MiB/s, 40 s left'."""
    done, total = state.get("bytes_done", 0), state.get("bytes_total", 0)
    pct = (100.0 * done / total) if total else 0.0
    rate = state.get("rate_bytes_per_s") or 0
    eta = ", %d s left" % ((total - done) / rate) if rate and total > done else ""
    return "%s: %s / %s (%.0f%%), %s/s%s" % (state.get("phase", "download"), human(done), human(total), pct,
                                             human(rate), eta)


class ProgressWriter(object):
    """Writes ``{"state", "phase", "bytes_done", "bytes_total", "rate_bytes_per_s", "updated", "result"}`` to a
    JSON file every ``interval`` seconds while a download or a hash runs (read by the sglang_model_wait module)."""

    def __init__(self, path, total, measure, interval=2.0):
        self.path, self.total, self.measure, self.interval = path, total, measure, interval
        self.phase = "download"
        self._stop = threading.Event()
        self._thread = None
        self._samples = []

    def snapshot(self, state="running", result=None):
        done = self.measure()
        now = time.time()
        self._samples = [s for s in self._samples if now - s[0] <= 30] + [(now, done)]
        first = self._samples[0]
        rate = (done - first[1]) / (now - first[0]) if now > first[0] else 0
        record = {"state": state, "phase": self.phase, "bytes_done": done, "bytes_total": self.total,
                  "rate_bytes_per_s": max(rate, 0), "updated": now, "pid": os.getpid()}
        if result is not None:
            record["result"] = result
        if self.path:
            write_json_atomic(self.path, record, mode=0o600)
        return record

    def _run(self):
        while not self._stop.wait(self.interval):
            try:
                self.snapshot()
            except OSError:
                pass

    def start(self):
        if self.path:
            os.makedirs(os.path.dirname(self.path) or ".", mode=0o700, exist_ok=True)
            self.snapshot()
            self._thread = threading.Thread(target=self._run, daemon=True)
            self._thread.start()
        return self

    def finish(self, state, result):
        self._stop.set()
        if self._thread:
            self._thread.join(timeout=5)
        if self.path:
            self.snapshot(state=state, result=result)


# ---------------------------------------------------------------------------------------------------- Hub


def import_hub():
    try:
        import huggingface_hub  # pylint: disable=import-outside-toplevel
    except ImportError as exc:
        raise ModelError("huggingface_hub is not importable by %s (%s); the role installs it into sglang_model_venv"
                         % (sys.executable, exc)) from exc
    return huggingface_hub


# Where a failed Hub request says its endpoint, token and timeout come from (the role's names, then the option's).
HUB_ENDPOINT_VAR = ("sglang_model_hf_endpoint (module option endpoint; empty means HF_ENDPOINT, else "
                    "https://huggingface.co)")
HUB_TOKEN_VAR = "sglang_model_hf_token"
HUB_TIMEOUT_VAR = "sglang_model_hf_request_timeout (module option request_timeout)"
DEFAULT_REQUEST_TIMEOUT = 60.0


def bound_hub_requests(hub, timeout):
    """Give every request of huggingface_hub's shared httpx client ``timeout`` seconds to connect, and then between
    bytes (it has none for some calls: ``list_repo_tree`` waits for ever on a server that accepts and never
    answers). Done with a request hook (httpx reads a request's timeout from ``request.extensions``)."""
    if not timeout:
        return
    limits = {"connect": float(timeout), "read": float(timeout), "write": float(timeout), "pool": float(timeout)}

    def bound(request):
        request.extensions["timeout"] = dict(limits)

    session = hub.get_session()
    hooks = session.event_hooks
    if not any(getattr(h, "__name__", "") == "bound" for h in hooks.get("request", [])):
        hooks["request"] = list(hooks.get("request", [])) + [bound]
        session.event_hooks = hooks


def hub_endpoint(hub, endpoint):
    """The endpoint huggingface_hub talks to: ``endpoint``, else its own default (``HF_ENDPOINT`` or the Hub)."""
    return (endpoint or getattr(hub.constants, "ENDPOINT", "") or "https://huggingface.co").rstrip("/")


def _hub_network_error(action, base, exc, token, timeout, extra=None):
    """A :class:`ModelError` in the shape of :mod:`_net` for a failed Hub request (``exc``)."""
    url = _net.failed_url(exc, base)
    note = extra or ""
    if _net.host_port(url)[0] != _net.host_port(base)[0]:
        note = ("%s was where %s redirected the download (the Hub's file CDN or Xet storage): a proxy or firewall "
                "must let this host reach it. %s" % (_net.host_port(url)[0], _net.show_url(base), note)).strip()
    text, _kind, _status = _net.message(action, base, exc=exc, variable=HUB_ENDPOINT_VAR, credential=HUB_TOKEN_VAR,
                                        timeout=timeout, timeout_var=HUB_TIMEOUT_VAR, secrets=[token] if token else None,
                                        extra=note or None)
    return ModelError(text)


def _is_network(exc):
    kind, _detail = _net.describe(exc)
    return kind != "error"


def hub_manifest(repo_id, revision, name, token=None, endpoint=None, allow=None, ignore=None, repo_type="model",
                 request_timeout=DEFAULT_REQUEST_TIMEOUT):
    """Resolve ``revision`` to a commit and build the manifest from the repository's tree metadata.

    Calls ``HfApi.repo_info`` (only for a branch/tag) and ``HfApi.list_repo_tree(recursive=True)``, each request
    bounded by ``request_timeout`` seconds. Raises ModelError for a missing repository/revision, an empty
    selection, or a failed request (naming the endpoint, what failed and the variable to check, :mod:`_net`).
    Nothing is written.
    """
    hub = import_hub()
    from huggingface_hub.errors import (GatedRepoError, HfHubHTTPError,  # pylint: disable=import-outside-toplevel
                                        RepositoryNotFoundError, RevisionNotFoundError)
    bound_hub_requests(hub, request_timeout)
    base = hub_endpoint(hub, endpoint)
    shown = _net.show_url(base)
    api = hub.HfApi(endpoint=endpoint or None, token=token or False)
    action = "Hub file listing of %s@%s" % (repo_id, revision)
    try:
        commit = revision
        if not COMMIT_RE.match(revision):
            action = "Hub revision lookup of %s@%s" % (repo_id, revision)
            commit = api.repo_info(repo_id, revision=revision, repo_type=repo_type).sha
            action = "Hub file listing of %s@%s" % (repo_id, commit)
        files = {}
        for entry in api.list_repo_tree(repo_id, revision=commit, recursive=True, repo_type=repo_type):
            if not isinstance(entry, hub.hf_api.RepoFile) or not matches(entry.path, allow, ignore):
                continue
            if entry.lfs is not None:
                files[entry.path] = {"size": int(entry.lfs.size), "sha256": entry.lfs.sha256}
            else:
                files[entry.path] = {"size": int(entry.size), "git_sha1": entry.blob_id}
    except RevisionNotFoundError as exc:
        raise ModelError("revision %s of %s does not exist on %s (sglang_model_revision): %s" % (
            revision, repo_id, shown, first_line(exc))) from exc
    except GatedRepoError as exc:
        raise ModelError("repository %s on %s is gated: accept its terms on the Hub with the account whose token is "
                         "sglang_model_hf_token, or use a token that has access: %s" % (
                             repo_id, shown, first_line(exc))) from exc
    except RepositoryNotFoundError as exc:
        raise ModelError("repository %s not found on %s, or the token cannot read it (sglang_model_repo_id, "
                         "sglang_model_hf_token): %s" % (repo_id, shown, first_line(exc))) from exc
    except HfHubHTTPError as exc:
        raise _hub_network_error(action, base, exc, token, request_timeout,
                                 "Nothing was downloaded or written.") from exc
    except (ValueError, AttributeError, TypeError, KeyError) as exc:
        if _is_network(exc):
            raise _hub_network_error(action, base, exc, token, request_timeout,
                                     "Nothing was downloaded or written.") from exc
        # an answer that is not the Hub's JSON: a proxy's or captive portal's page, or not a Hub at all
        raise ModelError("%s: %s answered something that is not the Hub's API (%s: %s). The endpoint is set by %s. "
                         "Check: the endpoint is a Hugging Face Hub (or a mirror of its API) and no proxy answers in "
                         "its place. Nothing was downloaded or written." % (
                             action, shown, type(exc).__name__, first_line(exc), HUB_ENDPOINT_VAR)) from exc
    except Exception as exc:  # pylint: disable=broad-exception-caught  # httpx transport errors: a message, no traceback
        raise _hub_network_error(action, base, exc, token, request_timeout,
                                 "Nothing was downloaded or written.") from exc
    if not files:
        raise ModelError("%s@%s has no files matching sglang_model_allow_patterns %s / ignore_patterns %s" % (
            repo_id, commit, allow, ignore))
    return commit, new_manifest(name, commit, "hub:%s" % repo_id, files)


def hub_download(repo_id, commit, staging, token=None, endpoint=None, allow=None, ignore=None, max_workers=8,
                 repo_type="model", request_timeout=DEFAULT_REQUEST_TIMEOUT, target=None):
    """``snapshot_download`` into ``staging`` (local_dir mode: resumable ``.incomplete`` files), each request
    bounded by ``request_timeout`` seconds.

    :raises ModelError: the download failed; the message names the request that failed (the Hub, or the CDN host
        it redirected to), what failed and what to check, and says that ``staging`` keeps the partial download
        (a rerun resumes) and that nothing was promoted to ``target``.
    """
    hub = import_hub()
    bound_hub_requests(hub, request_timeout)
    base = hub_endpoint(hub, endpoint)
    kept = ("Nothing was promoted%s; the files fetched so far stay in %s: a rerun resumes from them."
            % (" to %s" % target if target else "", staging))
    try:
        hub.snapshot_download(repo_id, revision=commit, repo_type=repo_type, local_dir=staging, token=token or False,
                              endpoint=endpoint or None, allow_patterns=allow or None, ignore_patterns=ignore or None,
                              max_workers=max_workers)
    except Exception as exc:  # pylint: disable=broad-exception-caught  # httpx/hub errors: a message, no traceback
        if _is_network(exc):
            raise _hub_network_error("download of %s@%s" % (repo_id, commit), base, exc, token, request_timeout,
                                     kept) from exc
        raise ModelError(_inputs.mask("download of %s@%s from %s failed: %s: %s. %s" % (
            repo_id, commit, _net.show_url(base), type(exc).__name__, first_line(exc), kept),
            [token] if token else None)) from exc


def manifest_disagreements(stored, reference):
    """Entries where a stored manifest (sha256 for every file) contradicts a reference (e.g. the Hub's metadata)."""
    problems = []
    for rel in sorted(set(stored["files"]) | set(reference["files"])):
        have, want = stored["files"].get(rel), reference["files"].get(rel)
        if have is None or want is None:
            problems.append({"file": rel, "reason": "only in the %s manifest" % ("reference" if have is None else "stored")})
        elif have["size"] != want["size"]:
            problems.append({"file": rel, "reason": "size %d, the reference says %d" % (have["size"], want["size"])})
        elif want.get("sha256") and have.get("sha256") != want["sha256"]:
            problems.append({"file": rel, "reason": "sha256 differs from the reference"})
        elif want.get("git_sha1") and have.get("git_sha1") and have["git_sha1"] != want["git_sha1"]:
            problems.append({"file": rel, "reason": "git blob id differs from the reference"})
    return problems


def service_env(python=None):
    """Environment for the service: offline Hub, hf_transfer only when the service's Python can import it."""
    env = {"HF_HUB_OFFLINE": "1"}
    if python and os.path.exists(python):
        import subprocess  # pylint: disable=import-outside-toplevel
        try:
            probe = subprocess.run([python, "-c", "import hf_transfer"], capture_output=True, timeout=60, check=False)
            if probe.returncode == 0:
                env["HF_HUB_ENABLE_HF_TRANSFER"] = "1"
        except (OSError, subprocess.SubprocessError):
            pass
    return env


def first_line(exc):
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def remove_bad(staging, errors):
    """Delete files that failed verification so a rerun fetches them again; returns the removed paths."""
    removed = []
    for err in errors:
        path = os.path.join(staging, err["file"])
        try:
            regular = stat.S_ISREG(os.lstat(path).st_mode)
        except OSError:
            regular = False
        if regular and err["reason"] != "not in the manifest":
            os.unlink(path)
            removed.append(path)
            meta = os.path.join(staging, HF_LOCAL_CACHE, "huggingface", "download", err["file"] + ".metadata")
            if os.path.isfile(meta):
                os.unlink(meta)
    return removed
