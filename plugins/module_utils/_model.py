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

safetensors layout (https://github.com/huggingface/safetensors, "Format"): 8-byte little-endian unsigned header
length N, N bytes of UTF-8 JSON ``{name: {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {...}}``,
then the byte buffer; offsets are relative to the buffer, which must be exactly covered (the reference
implementation refuses a buffer that is shorter or longer than the largest ``end``).
"""

from __future__ import annotations

import fnmatch
import hashlib
import json
import os
import re
import shutil
import stat
import struct
import sys
import threading
import time

from ansible_collections.blackwell.sglang.plugins.module_utils import _fs
from ansible_collections.blackwell.sglang.plugins.module_utils import _inputs
from ansible_collections.blackwell.sglang.plugins.module_utils import _net

COMMIT_RE = re.compile(r"^[0-9a-f]{40}$")
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
MANIFEST_NAME = ".sglang-model-manifest.json"
# huggingface_hub's local_dir metadata (resume state); never part of the model, removed before promotion
HF_LOCAL_CACHE = ".cache"
MAX_HEADER_BYTES = 100 * 1024 * 1024
CHUNK = 8 * 1024 * 1024
# bytes per element (safetensors Dtype enum); sub-byte types (F4, F6_*) are skipped in the element-count check
DTYPE_BYTES = {
    "BOOL": 1, "U8": 1, "I8": 1, "F8_E5M2": 1, "F8_E4M3": 1, "F8_E8M0": 1, "I16": 2, "U16": 2, "F16": 2,
    "BF16": 2, "I32": 4, "U32": 4, "F32": 4, "I64": 8, "U64": 8, "F64": 8, "C64": 8,
}


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
    try:
        data = _fs.load_json(path, "model manifest")
    except _fs.NotUtf8 as exc:
        raise ModelError(str(exc)) from exc
    except (OSError, ValueError) as exc:
        raise ModelError("cannot read the manifest %s: %s" % (path, exc)) from exc
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
    tmp = "%s.tmp.%d" % (path, os.getpid())
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        json.dump(data, handle, indent=1, sort_keys=True)
        handle.write("\n")
        handle.flush()
        os.fsync(handle.fileno())
    os.chmod(tmp, mode)
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


def list_files(root):
    """{relpath: (size, mtime_ns)} of the regular files below root, without our manifest and the HF resume cache."""
    found = {}
    for dirpath, dirnames, filenames in os.walk(root):
        rel_dir = os.path.relpath(dirpath, root)
        if rel_dir == ".":
            dirnames[:] = [d for d in dirnames if d != HF_LOCAL_CACHE]
        dirnames.sort()
        for fname in sorted(filenames):
            rel = fname if rel_dir == "." else os.path.join(rel_dir, fname).replace(os.sep, "/")
            if rel == MANIFEST_NAME:
                continue
            stat = os.lstat(os.path.join(dirpath, fname))
            found[rel] = (stat.st_size, stat.st_mtime_ns)
    return found


def hash_file(path, progress=None):
    """(sha256 hex, git blob sha1 hex) of a file, read in 8 MiB chunks; progress(n_bytes) after each chunk."""
    sha = hashlib.sha256()
    size = os.path.getsize(path)
    git = hashlib.sha1(b"blob %d\0" % size)
    with open(path, "rb") as handle:
        while True:
            chunk = handle.read(CHUNK)
            if not chunk:
                break
            sha.update(chunk)
            git.update(chunk)
            if progress:
                progress(len(chunk))
    return sha.hexdigest(), git.hexdigest()


def safetensors_problem(path, size=None):
    """None when the safetensors file is structurally whole, else a short reason (truncated, bad header, ...)."""
    size = os.path.getsize(path) if size is None else size
    if size < 8:
        return "shorter than the 8-byte header length (%d bytes)" % size
    with open(path, "rb") as handle:
        (length,) = struct.unpack("<Q", handle.read(8))
        if length > MAX_HEADER_BYTES:
            return "header length %d is absurd (corrupt file)" % length
        if 8 + length > size:
            return "truncated: header needs %d bytes, file has %d" % (8 + length, size)
        raw = handle.read(length)
    try:
        header = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        return "header is not UTF-8: byte 0x%02x at offset %d of the file" % (raw[exc.start], 8 + exc.start)
    except ValueError as exc:
        return "header is not JSON (%s)" % exc
    if not isinstance(header, dict):
        return "header is not a JSON object"
    buffer_size = size - 8 - length
    largest = 0
    for tensor, info in header.items():
        if tensor == "__metadata__":
            continue
        try:
            begin, end = info["data_offsets"]
            shape = info["shape"]
            dtype = info["dtype"]
        except (KeyError, TypeError, ValueError):
            return "tensor %r has no dtype/shape/data_offsets" % tensor
        if not (isinstance(begin, int) and isinstance(end, int) and 0 <= begin <= end):
            return "tensor %r has invalid data_offsets %r" % (tensor, info["data_offsets"])
        if end > buffer_size:
            return "truncated: tensor %r ends at byte %d of the data, the file holds %d" % (tensor, end, buffer_size)
        if dtype in DTYPE_BYTES:
            count = 1
            for dim in shape:
                count *= int(dim)
            if count * DTYPE_BYTES[dtype] != end - begin:
                return "tensor %r: %s %s needs %d bytes, offsets give %d" % (tensor, dtype, shape, count * DTYPE_BYTES[dtype],
                                                                             end - begin)
        largest = max(largest, end)
    if largest != buffer_size:
        return "data buffer is %d bytes but the tensors cover %d (%s)" % (
            buffer_size, largest, "truncated" if largest > buffer_size else "trailing bytes")
    return None


def index_problems(root, files):
    """Shards named by model.safetensors.index.json that are not among ``files``."""
    problems = []
    for rel in files:
        if not rel.endswith(".safetensors.index.json"):
            continue
        try:
            weight_map = _fs.load_json(os.path.join(root, rel), "index").get("weight_map", {})
        except (OSError, ValueError, AttributeError) as exc:   # NotUtf8 names the byte offset
            problems.append({"file": rel, "reason": "index unreadable: %s" % exc})
            continue
        base = os.path.dirname(rel)
        for shard in sorted(set(weight_map.values())):
            shard_rel = os.path.join(base, shard).replace(os.sep, "/") if base else shard
            if shard_rel not in files:
                problems.append({"file": shard_rel, "reason": "named by %s but missing" % rel})
    return problems


# ---------------------------------------------------------------------------------------------------- verify


def load_stamp(path):
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
        return data if isinstance(data, dict) and isinstance(data.get("files"), dict) else None
    except (OSError, ValueError):
        return None


def verify_dir(root, manifest, stamp=None, strict=True, progress=None):
    """Check every file of ``manifest`` in ``root``.

    Returns ``{"ok", "errors": [{"file", "reason"}], "hashed": [rel], "trusted": [rel], "bytes_hashed",
    "total_bytes", "digest", "stamp", "computed": {rel: {"sha256", "git_sha1"}}}``. A file is trusted (not hashed)
    when ``stamp`` is for the same manifest digest and records the same (size, mtime_ns). Safetensors files are
    always checked structurally (header only). ``strict``: files in ``root`` not in the manifest are errors.
    """
    digest = manifest_digest(manifest)
    present = list_files(root)
    usable = stamp and stamp.get("manifest_digest") == digest and stamp.get("path") in (None, root)
    stamp_files = stamp["files"] if usable else {}
    errors, hashed, trusted, computed = [], [], [], {}
    bytes_hashed = 0
    total = 0
    for rel in sorted(manifest["files"]):
        want = manifest["files"][rel]
        total += want["size"]
        if rel not in present:
            errors.append({"file": rel, "reason": "missing"})
            continue
        size, mtime = present[rel]
        if size != want["size"]:
            errors.append({"file": rel, "reason": "size %d, manifest says %d%s" % (
                size, want["size"], " (truncated)" if size < want["size"] else "")})
            continue
        path = os.path.join(root, rel)
        if rel.endswith(".safetensors"):
            problem = safetensors_problem(path, size)
            if problem:
                errors.append({"file": rel, "reason": problem})
                continue
        if list(stamp_files.get(rel, [])) == [size, mtime]:
            trusted.append(rel)
            continue
        sha, git = hash_file(path, progress)
        bytes_hashed += size
        hashed.append(rel)
        computed[rel] = {"sha256": sha, "git_sha1": git}
        if want.get("sha256") and sha != want["sha256"]:
            errors.append({"file": rel, "reason": "sha256 %s, manifest says %s" % (sha, want["sha256"])})
        elif not want.get("sha256") and want.get("git_sha1") and git != want["git_sha1"]:
            errors.append({"file": rel, "reason": "git blob id %s, the repository says %s" % (git, want["git_sha1"])})
    if strict:
        for rel in sorted(set(present) - set(manifest["files"])):
            errors.append({"file": rel, "reason": "not in the manifest"})
    errors.extend(e for e in index_problems(root, manifest["files"]) if e["file"] not in manifest["files"])
    new_stamp = None
    if not errors:
        new_stamp = {"format": 1, "path": root, "manifest_digest": digest,
                     "files": {rel: list(present[rel]) for rel in manifest["files"]}}
    return {"ok": not errors, "errors": errors, "hashed": hashed, "trusted": trusted, "bytes_hashed": bytes_hashed,
            "total_bytes": total, "digest": digest, "stamp": new_stamp, "computed": computed}


def manifest_from_dir(root, name, revision, source, progress=None):
    """Hash every file below root (sha256 + git blob id) and return a manifest; structural errors raise."""
    files = {}
    for rel, (size, _mtime) in sorted(list_files(root).items()):
        path = os.path.join(root, rel)
        if rel.endswith(".safetensors"):
            problem = safetensors_problem(path, size)
            if problem:
                raise ModelError("%s: %s" % (os.path.join(root, rel), problem))
        sha, _git = hash_file(path, progress)
        files[rel] = {"size": size, "sha256": sha}
    if not files:
        raise ModelError("%s holds no files" % root)
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
    """
    for dirpath, _dirnames, filenames in os.walk(root):
        os.chmod(dirpath, stat.S_IMODE(os.lstat(dirpath).st_mode) | 0o755)
        for name in filenames:
            path = os.path.join(dirpath, name)
            mode = os.lstat(path).st_mode
            if stat.S_ISREG(mode):
                os.chmod(path, stat.S_IMODE(mode) | 0o444)


def promote(staging, target):
    """Rename the verified staging directory to the target (same filesystem: atomic), readable by the service user
    (``make_readable``). Never replaces a target."""
    if os.path.exists(target):
        raise ModelError("%s already exists; refusing to replace it (remove it or verify it in place)" % target)
    cache = os.path.join(staging, HF_LOCAL_CACHE)
    if os.path.isdir(cache):
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
        if os.path.isfile(path) and err["reason"] != "not in the manifest":
            os.unlink(path)
            removed.append(path)
            meta = os.path.join(staging, HF_LOCAL_CACHE, "huggingface", "download", err["file"] + ".metadata")
            if os.path.isfile(meta):
                os.unlink(meta)
    return removed
