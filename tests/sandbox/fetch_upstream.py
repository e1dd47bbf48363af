"""The pinned upstream sources of the sandbox and the tests: the project's bundle, or the same trees from GitHub.

  python3 tests/sandbox/fetch_upstream.py                 # `make upstream` (first step of make sandbox / make test)
  python3 tests/sandbox/fetch_upstream.py --write-lock    # regenerate tests/sandbox/upstream.lock.json from the bundle

The upstream source bundle (``../shared/upstream`` on the project's machines; ``MANIFEST.md`` there) holds the two
SGLang trees of the stack pins and the kernel's FetchContent dependencies as tarballs, plus ``manifest.json``. The
lock ``tests/sandbox/upstream.lock.json`` is derived from it (``--write-lock``) and checked in: per tarball the
bundle's sha256, the GitHub archives it was made of (``https://github.com/<owner>/<repo>/archive/<commit>.tar.gz``,
one per repository, one more per submodule it includes) and the digests of its content.

Which directory, and what happens (``BLACKWELL_UPSTREAM``; default ``<repo>/../shared/upstream`` when that holds a
``manifest.json``, else ``<repo>/.cache/upstream``):

* **The bundle** (a ``manifest.json`` and no ``.blackwell-fetch.json``): every tarball of the lock must be there with
  the lock's sha256; nothing is downloaded, GitHub is never asked. A difference is an error.
* **Otherwise a fetch cache** (absent, empty, or made by this script). Complete and unchanged: nothing to do, no
  network. Else one HEAD request (5 s) tells whether GitHub answers; without it the script fails at once, naming
  the command (``BLACKWELL_FETCH_FOR``), the missing files and the fixes. With it, each archive is downloaded with
  curl (progress bar, ``--max-time``, retries) and verified, and each tarball is rebuilt in the bundle's layout (same
  name, same top-level directory, the bundle's file set) and renamed into place only when whole and verified.
  ``manifest.json`` (the bundle's, with the new files' sha256) is written last, so the tests see a complete set or
  none.

How a fetched archive is verified (GitHub's archive bytes differ from the bundle's repacked tarballs, and GitHub's
sha256 is not known here for most of them):

1. it is a tar.gz whose pax header names the pinned commit (what ``git get-tar-commit-id`` reads; GitHub writes its
   archives with ``git archive``). This catches a wrong revision, an error page and a truncated download; a
   deliberate forgery could fake it, which step 2 catches;
2. the content: the files kept (the bundle's file set: the same top-level entries, and ``examples/``, ``tools/``
   one level deeper where the bundle trimmed a CUTLASS tree) must hash, group by group, to the digests recorded
   from the bundle (path, executable bit and sha256 of every file; a symlink's target). A fetched tarball therefore
   has exactly the bundle's files, byte for byte; only the tar and gzip framing differ;
3. where upstream itself pins the archive's sha256 (``URL_HASH`` in SGLang's CMake), that is compared too and a
   difference reported; it does not refuse the archive on its own (GitHub has changed its compression before),
   step 2 decides.

Env: BLACKWELL_UPSTREAM (above), BLACKWELL_GITHUB_URL (default https://github.com: where the archives and the HEAD
check go; an internal GitHub mirror with the same paths works), BLACKWELL_FETCH_MAX_TIME (seconds per download,
default 1800), BLACKWELL_FETCH_FOR (the command named in errors, default ``make upstream``).
Exit status: 0 ready, 1 error (nothing half-written is left), 2 usage.
"""

import argparse
import contextlib
import fcntl
import gzip
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
import zlib

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LOCK = os.path.join(REPO, "tests", "sandbox", "upstream.lock.json")
STAMP = ".blackwell-fetch.json"
GITHUB = "https://github.com"
# Where the bundle trimmed a CUTLASS tree (manifest "trimmed": "examples/* except common, ..., tools/* except util"),
# these directories are kept per subdirectory, so the digests say which of them the bundle has.
SPLIT = {"NVIDIA/cutlass": ["examples", "tools"]}
_URL_HASH = re.compile(r"URL https://\$\{GITHUB_ARTIFACTORY\}/([\w.-]+/[\w.-]+)/archive/([0-9a-f]{40})\.tar\.gz")
_START = time.time()


class Refused(Exception):
    """A download or a directory that does not hold what the lock says (the message names it and why)."""


def log(msg):
    sys.stdout.write("[upstream %s +%3ds] %s\n" % (time.strftime("%H:%M:%S"), time.time() - _START, msg))
    sys.stdout.flush()


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def default_dir():
    shared = os.path.join(os.path.dirname(REPO), "shared", "upstream")
    if os.path.isfile(os.path.join(shared, "manifest.json")):
        return shared
    return os.path.join(REPO, ".cache", "upstream")


# --- the content digests ------------------------------------------------------------------------------------------

def part_of(path, parts):
    """The part (main tree or included submodule) a path inside a tarball belongs to: the deepest one holding it."""
    best = None
    for part in parts:
        if not part["path"] or path.startswith(part["path"] + "/"):
            if best is None or len(part["path"]) > len(best["path"]):
                best = part
    return best


def group_of(path, part):
    """The digest group of ``path``: its first component under the part's root (two for the part's split dirs)."""
    rel = path[len(part["path"]) + 1:] if part["path"] else path
    comps = rel.split("/")
    depth = 2 if comps[0] in part.get("split", []) and len(comps) > 1 else 1
    return "/".join(([part["path"]] if part["path"] else []) + comps[:depth])


def digest_line(path, kind, sha):
    return "%s\t%s\t%s\n" % (path, kind, sha)


def digests(lines_by_group):
    """{group: [line]} -> ({group: {"files": n, "sha256": hex}}, {"files": n, "sha256": hex} over every line)."""
    groups, every = {}, []
    for name, lines in lines_by_group.items():
        lines = sorted(lines)
        every.extend(lines)
        groups[name] = {"files": len(lines), "sha256": hashlib.sha256("".join(lines).encode()).hexdigest()}
    every.sort()
    return groups, {"files": len(every), "sha256": hashlib.sha256("".join(every).encode()).hexdigest()}


def kind_of(member):
    if member.issym():
        return "l"
    return "x" if member.mode & 0o111 else "-"


# --- --write-lock: the lock from the bundle ------------------------------------------------------------------------

def github_url(repo, commit, base=GITHUB):
    return "%s/%s/archive/%s.tar.gz" % (base.rstrip("/"), repo, commit)


def repo_of(url):
    m = re.match(r"https://github\.com/([\w.-]+/[\w.-]+?)(\.git)?/?$", url or "")
    if not m:
        raise Refused("not a GitHub repository URL: %r" % url)
    return m.group(1)


def lock_entry(bundle, t, known):
    """One lock entry from a manifest ``tarballs[]`` item and the bundle's tarball (read for the digests)."""
    path = os.path.join(bundle, t["file"])
    sha = sha256_file(path)
    if sha != t["sha256"]:
        raise Refused("%s: sha256 %s, but the bundle's manifest.json says %s" % (path, sha, t["sha256"]))
    top = t["top_level_dir"].strip("/")
    parts = [{"path": "", "repo": repo_of(t["upstream_repo"]), "commit": t["commit"]}]
    parts += [{"path": s["path"].strip("/"), "repo": repo_of(s["upstream"]), "commit": s["commit"]}
              for s in t.get("submodules_included") or []]
    for part in parts:
        if t.get("trimmed") and part["repo"] in SPLIT:
            part["split"] = SPLIT[part["repo"]]
        part["url"] = github_url(part["repo"], part["commit"])
        part["github_sha256"] = known.get((part["repo"], part["commit"]))
    lines, dirs, files = {}, set(), set()
    with tarfile.open(path) as tf:
        for m in tf:
            name = m.name.rstrip("/")
            if name != top and not name.startswith(top + "/"):
                raise Refused("%s: member %s is outside its top-level directory %s/" % (path, m.name, top))
            rel = name[len(top) + 1:]
            if not rel:
                continue
            if m.isdir():
                dirs.add(rel)
                continue
            if m.isreg():
                sha_m = hashlib.sha256(tf.extractfile(m).read()).hexdigest()
            elif m.issym():
                sha_m = hashlib.sha256(m.linkname.encode()).hexdigest()
            else:
                raise Refused("%s: %s is neither a file, a symlink nor a directory" % (path, m.name))
            files.add(rel)
            lines.setdefault(group_of(rel, part_of(rel, parts)), []).append(digest_line(rel, kind_of(m), sha_m))
    parents = {p.rsplit("/", i)[0] for p in files for i in range(1, p.count("/") + 1)}
    groups, tree = digests(lines)
    return {
        "file": t["file"], "top_level_dir": top + "/", "bundle_sha256": sha, "bundle_size": os.path.getsize(path),
        "files": tree["files"], "tree_sha256": tree["sha256"], "parts": parts,
        "exclude": sorted(x["path"] for x in t.get("left_out_missing_from_mirror") or []),
        "empty_dirs": sorted(dirs - parents), "groups": dict(sorted(groups.items())),
    }


def write_lock(bundle, lock_path):
    manifest_path = os.path.join(bundle, "manifest.json")
    with open(manifest_path) as f:
        manifest = json.load(f)
    known = {}
    for t in manifest["tarballs"]:
        for fc in t.get("fetchcontent") or []:
            m = _URL_HASH.search(fc.get("declared_in") or "")
            if m and (fc.get("url_hash") or "").startswith("SHA256="):
                known[(m.group(1), m.group(2))] = fc["url_hash"][len("SHA256="):].lower()
    lock = {
        "comment": ("The pinned upstream sources (tests/sandbox/fetch_upstream.py says how they are used and "
                    "verified). Generated by `python3 tests/sandbox/fetch_upstream.py --write-lock` from the bundle's "
                    "manifest.json and tarballs: do not edit by hand."),
        "format": 1,
        "manifest_sha256": sha256_file(manifest_path),
        "github_sha256_source": ("github_sha256: the archive's sha256 where upstream SGLang pins that exact URL "
                                 "(URL_HASH in its CMake, manifest.json fetchcontent[].url_hash); "
                                 "null: not known here"),
        "entries": [lock_entry(bundle, t, known) for t in manifest["tarballs"]],
        "manifest": manifest,
    }
    tmp = lock_path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(lock, f, indent=1, sort_keys=False)
        f.write("\n")
    os.replace(tmp, lock_path)
    log("wrote %s: %d tarballs, %d archives" % (lock_path, len(lock["entries"]),
                                                len({(p["repo"], p["commit"]) for e in lock["entries"]
                                                     for p in e["parts"]})))


# --- the bundle ----------------------------------------------------------------------------------------------------

def check_bundle(lock, where, lock_path):
    bad = []
    for e in lock["entries"]:
        path = os.path.join(where, e["file"])
        if not os.path.isfile(path):
            bad.append("%s: missing" % e["file"])
        elif sha256_file(path) != e["bundle_sha256"]:
            bad.append("%s: sha256 %s, the lock says %s" % (e["file"], sha256_file(path), e["bundle_sha256"]))
    if sha256_file(os.path.join(where, "manifest.json")) != lock["manifest_sha256"]:
        bad.append("manifest.json: not the one the lock was made from")
    if bad:
        raise Refused("the upstream source bundle at %s (BLACKWELL_UPSTREAM) does not match %s:\n  %s\n"
                      "Nothing is fetched while a bundle is there. If the bundle was updated on purpose, regenerate "
                      "the lock (python3 tests/sandbox/fetch_upstream.py --write-lock) and commit it; otherwise "
                      "restore the bundle." % (where, lock_path, "\n  ".join(bad)))
    log("the upstream source bundle at %s: %d tarballs, sha256 as in the lock; nothing to fetch"
        % (where, len(lock["entries"])))


# --- the fetch cache -----------------------------------------------------------------------------------------------

def entry_key(e):
    return hashlib.sha256(json.dumps(e, sort_keys=True).encode()).hexdigest()


def load_stamp(where):
    try:
        with open(os.path.join(where, STAMP)) as f:
            return json.load(f)
    except FileNotFoundError:
        return None


def save_stamp(where, stamp):
    tmp = os.path.join(where, STAMP + ".tmp")
    with open(tmp, "w") as f:
        json.dump(stamp, f, indent=1)
        f.write("\n")
    os.replace(tmp, os.path.join(where, STAMP))


def have(where, e, stamp):
    rec = (stamp or {}).get("entries", {}).get(e["file"])
    path = os.path.join(where, e["file"])
    return bool(rec and rec.get("entry") == entry_key(e) and os.path.isfile(path)
                and sha256_file(path) == rec["sha256"])


def curl(args, timeout):
    return subprocess.run(["curl"] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          timeout=timeout, check=False)


def no_fetch(why, where, missing, command, base):
    """The error when the sources can be neither read nor fetched: what is missing and every way to fix it."""
    shared = os.path.join(os.path.dirname(REPO), "shared", "upstream")
    return Refused(
        "%s needs the pinned upstream sources (SGLang trees and kernel dependencies, "
        "tests/sandbox/upstream.lock.json) and can get them neither way:\n"
        "  - no upstream source bundle: none at %s (where the project's machines have it), and "
        "BLACKWELL_UPSTREAM=%s is not one;\n"
        "  - no download: %s.\n"
        "  Missing in %s (%d of the lock's tarballs): %s\n"
        "Fix, one of:\n"
        "  - give this machine HTTPS access to %s (curl honours https_proxy), then re-run "
        "%s: it fetches whole repositories at the pinned commits and keeps the bundle's files (35 MB) in %s;\n"
        "  - put the bundle (its tarballs and manifest.json) in a directory and run %s BLACKWELL_UPSTREAM=<dir>;\n"
        "  - run `make upstream` in a clone on a machine with network and copy its .cache/upstream/ here."
        % (command, shared, where, why, where, len(missing), ", ".join(missing),
           base + (" and codeload.github.com" if base == GITHUB else ""), command, where, command))


def download(part, base, dest, max_time):
    """curl the part's archive to dest; refuse it unless its pax header names the pinned commit.

    -> ``{"url", "commit", "sha256", "github_sha256", "github_sha256_matches"}`` (the last two None when unknown)."""
    url = github_url(part["repo"], part["commit"], base)
    log("downloading %s" % url)
    t0 = time.time()
    try:
        # --max-time bounds each attempt; --retry repeats only transient failures (timeouts, 5xx, 429)
        rc = subprocess.run(["curl", "-fL", "--retry", "3", "--retry-delay", "2", "--connect-timeout", "20",
                             "--max-time", str(max_time), "--progress-bar", "-o", dest, url],
                            timeout=max_time * 4 + 60, check=False).returncode
    except subprocess.TimeoutExpired:
        rc = "timeout"
    if rc != 0:
        raise Refused("download failed (curl exit %s): %s" % (rc, url))
    try:
        with tarfile.open(dest, "r|gz") as tf:
            commit = tf.pax_headers.get("comment")
    except (tarfile.TarError, OSError, EOFError) as e:
        raise Refused("%s is not a tar.gz archive (%s)" % (url, e)) from None
    if commit != part["commit"]:
        raise Refused("%s: the archive's commit id (pax header, as git get-tar-commit-id reads it) is %s, not the "
                      "pinned %s" % (url, commit, part["commit"]))
    sha = sha256_file(dest)
    log("  %.1f MB in %.0f s, commit %s (pax header) as pinned"
        % (os.path.getsize(dest) / 1e6, time.time() - t0, commit[:10]))
    if part.get("github_sha256") and sha != part["github_sha256"]:
        log("  note: sha256 %s differs from upstream's URL_HASH %s (GitHub's compression changed?); the content "
            "check below decides" % (sha, part["github_sha256"]))
    return {"url": url, "commit": commit, "sha256": sha, "github_sha256": part.get("github_sha256"),
            "github_sha256_matches": (sha == part["github_sha256"]) if part.get("github_sha256") else None}


class _Hashing:
    """A file object that hashes what is read through it (tarfile.addfile copies from it)."""

    def __init__(self, f):
        self.f, self.h = f, hashlib.sha256()

    def read(self, n=-1):
        data = self.f.read(n)
        self.h.update(data)
        return data


def _safe(rel, url):
    if rel.startswith("/") or ".." in rel.split("/"):
        raise Refused("%s: unsafe member path %r" % (url, rel))


def assemble(e, archives, out_path):
    """Rebuild the bundle's tarball ``e`` from the downloaded archives ({part path: file}) into out_path; verify it.

    Keeps the files of the lock's groups (less ``exclude``), under the bundle's top-level directory, and refuses
    unless every group hashes to the lock's digest."""
    top = e["top_level_dir"].strip("/")
    exclude = set(e["exclude"])
    deeper = [p["path"] for p in e["parts"] if p["path"]]
    lines, written, dir_members, dropped = {}, set(), {}, 0
    raw = open(out_path, "wb")
    gz = gzip.GzipFile(filename="", mode="wb", compresslevel=6, fileobj=raw, mtime=0)
    out = tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT)

    def add_dir(rel):
        if rel in written:
            return
        if rel:
            add_dir(rel.rsplit("/", 1)[0] if "/" in rel else "")
        like = dir_members.get(rel)
        ti = tarfile.TarInfo("%s/%s" % (top, rel) if rel else top)
        ti.type, ti.mode, ti.mtime = tarfile.DIRTYPE, like.mode if like else 0o775, like.mtime if like else 0
        ti.uname = ti.gname = "root"
        out.addfile(ti)
        written.add(rel)

    try:
        add_dir("")
        for part in e["parts"]:
            url = part["url"]
            inner = [d for d in deeper
                     if d != part["path"] and (not part["path"] or d.startswith(part["path"] + "/"))]
            try:
                with tarfile.open(archives[part["path"]], "r|gz") as src:
                    prefix = None
                    for m in src:
                        first, rel = (m.name.split("/", 1) + [""])[:2]
                        prefix = first if prefix is None else prefix
                        if first != prefix:
                            raise Refused("%s: more than one top-level directory (%s, %s)" % (url, prefix, first))
                        rel = rel.rstrip("/")
                        if not rel:
                            continue
                        _safe(rel, url)
                        full = "%s/%s" % (part["path"], rel) if part["path"] else rel
                        if m.isdir():
                            dir_members.setdefault(full, m)
                            continue
                        if full in exclude or any(full.startswith(d + "/") for d in inner):
                            dropped += 1
                            continue
                        group = group_of(full, part)
                        if group not in e["groups"]:
                            dropped += 1
                            continue
                        if not (m.isreg() or m.issym()):
                            raise Refused("%s: %s is neither a file nor a symlink" % (url, m.name))
                        add_dir(full.rsplit("/", 1)[0] if "/" in full else "")
                        ti = tarfile.TarInfo("%s/%s" % (top, full))
                        ti.mode, ti.mtime, ti.uname, ti.gname = m.mode, m.mtime, "root", "root"
                        if m.issym():
                            ti.type, ti.linkname = tarfile.SYMTYPE, m.linkname
                            out.addfile(ti)
                            sha = hashlib.sha256(m.linkname.encode()).hexdigest()
                        else:
                            ti.size = m.size
                            reader = _Hashing(src.extractfile(m))
                            out.addfile(ti, reader)
                            sha = reader.h.hexdigest()
                        lines.setdefault(group, []).append(digest_line(full, kind_of(m), sha))
            except (tarfile.TarError, OSError, EOFError, zlib.error) as err:
                raise Refused("%s: unreadable archive (%s)" % (url, err)) from None
        for d in e["empty_dirs"]:
            add_dir(d)
        out.close()
        gz.close()
    finally:
        raw.close()
    got, tree = digests(lines)
    wrong = []
    for name, want in e["groups"].items():
        have_g = got.get(name, {"files": 0, "sha256": None})
        if have_g != want:
            wrong.append("%s (%d files, the bundle has %d)" % (name, have_g["files"], want["files"]))
    if wrong or tree["sha256"] != e["tree_sha256"]:
        raise Refused("%s: the downloaded trees are not the bundle's content in %s" % (e["file"], ", ".join(wrong)))
    return dropped


def write_manifest(lock, where, stamp):
    manifest = json.loads(json.dumps(lock["manifest"]))
    for t in manifest["tarballs"]:
        rec = stamp["entries"][t["file"]]
        t["bundle_sha256"], t["bundle_size"] = t["sha256"], t["size"]
        t["sha256"], t["size"] = rec["sha256"], rec["size"]
    manifest["fetched"] = {
        "by": "tests/sandbox/fetch_upstream.py from the GitHub archives of tests/sandbox/upstream.lock.json",
        "verified": ("per archive: the commit id in its pax header is the pinned one; per tarball: every file "
                     "(path, executable bit, sha256) equals the bundle's, by the lock's digests; sha256/size "
                     "describe these files, bundle_sha256/bundle_size the bundle's"),
        "sources": {f: rec["archives"] for f, rec in stamp["entries"].items()},
    }
    for name, text in (("manifest.json", json.dumps(manifest, indent=1) + "\n"), ("MANIFEST.md", (
            "# Upstream sources fetched from GitHub (not the project's bundle)\n\n"
            "Written by `tests/sandbox/fetch_upstream.py` (`make upstream`) from the archives named in "
            "`tests/sandbox/upstream.lock.json`. Same file names, top-level directories and files as the bundle's "
            "tarballs: each file was checked against the digests recorded from the bundle (manifest.json, "
            "`fetched`). The tar/gzip framing differs, so the sha256 of the tarballs are not the bundle's. What "
            "the bundle's own MANIFEST.md says about each tarball holds here; `manifest.json` has the same facts.\n"))):
        tmp = os.path.join(where, name + ".tmp")
        with open(tmp, "w") as f:
            f.write(text)
        os.replace(tmp, os.path.join(where, name))


def fetch(lock, where, command, base, max_time):
    foreign = [n for n in (os.listdir(where) if os.path.isdir(where) else []) if not n.startswith(".blackwell-fetch")]
    if foreign and load_stamp(where) is None:
        raise Refused("%s (BLACKWELL_UPSTREAM) is neither the upstream source bundle (no manifest.json) nor a "
                      "directory this script fetched into (no %s): refusing to write into it. Point "
                      "BLACKWELL_UPSTREAM at the bundle, or at an empty or absent directory." % (where, STAMP))
    os.makedirs(where, exist_ok=True)
    with open(os.path.join(where, ".blackwell-fetch.lock"), "w") as lockf:
        fcntl.flock(lockf, fcntl.LOCK_EX)
        if load_stamp(where) is None:
            save_stamp(where, {"format": 1, "entries": {}})
        for stale in os.listdir(where):
            if stale.startswith(".partial-"):
                shutil.rmtree(os.path.join(where, stale), ignore_errors=True)
        stamp = load_stamp(where) or {"format": 1, "entries": {}}
        stamp["entries"] = {f: r for f, r in stamp["entries"].items() if f in {e["file"] for e in lock["entries"]}}
        missing = [e for e in lock["entries"] if not have(where, e, stamp)]
        if not missing:
            if not os.path.isfile(os.path.join(where, "manifest.json")):
                write_manifest(lock, where, stamp)
            log("%s: %d tarballs fetched earlier and verified (sha256 as recorded); nothing to fetch"
                % (where, len(lock["entries"])))
            return
        names = [e["file"] for e in missing]
        with contextlib.suppress(FileNotFoundError):
            os.remove(os.path.join(where, "manifest.json"))
        if shutil.which("curl") is None:
            raise no_fetch("curl is not installed (apt-get install curl; `make host` installs it)", where, names,
                           command, base)
        try:
            head = curl(["-sS", "-I", "-o", os.devnull, "--connect-timeout", "5", "--max-time", "5", base + "/"], 15)
            offline = head.returncode != 0 and "HEAD %s/ failed within 5 s (%s)" % (
                base, (head.stderr.strip().splitlines() or ["curl exit %d" % head.returncode])[-1])
        except subprocess.TimeoutExpired:
            offline = "HEAD %s/ did not answer within 5 s" % base
        if offline:
            raise no_fetch(offline, where, names, command, base)
        needed = {}
        for e in missing:
            for p in e["parts"]:
                needed.setdefault((p["repo"], p["commit"]), []).append(e["file"])
        log("no upstream source bundle: fetching %d tarballs (%d archives) from %s into %s"
            % (len(missing), len(needed), base, where))
        partial = tempfile.mkdtemp(prefix=".partial-", dir=where)
        try:
            got = {}
            for e in missing:
                archives, records = {}, []
                for p in e["parts"]:
                    key = (p["repo"], p["commit"])
                    if key not in got:
                        dest = os.path.join(partial, "%s-%s.tar.gz" % (p["repo"].replace("/", "-"), p["commit"]))
                        got[key] = (dest, download(p, base, dest, max_time))
                    archives[p["path"]] = got[key][0]
                    records.append(dict(got[key][1], path=p["path"]))
                tmp = os.path.join(partial, e["file"])
                dropped = assemble(e, archives, tmp)
                final = os.path.join(where, e["file"])
                os.replace(tmp, final)
                stamp["entries"][e["file"]] = {"entry": entry_key(e), "sha256": sha256_file(final),
                                               "size": os.path.getsize(final), "archives": records}
                save_stamp(where, stamp)
                log("%s: %d files, every one as in the bundle (%d of the archives' files left out, as the bundle "
                    "does)" % (e["file"], e["files"], dropped))
                for p in e["parts"]:
                    key = (p["repo"], p["commit"])
                    needed[key].remove(e["file"])
                    if not needed[key] and key in got:
                        os.remove(got.pop(key)[0])
        finally:
            shutil.rmtree(partial, ignore_errors=True)
        write_manifest(lock, where, stamp)
        log("%s: all %d tarballs in place, verified; manifest.json written" % (where, len(lock["entries"])))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--lock", default=LOCK, help="the lock file (default %(default)s)")
    ap.add_argument("--write-lock", action="store_true", help="regenerate the lock from the bundle")
    args = ap.parse_args(argv)
    where = os.path.abspath(os.environ.get("BLACKWELL_UPSTREAM") or default_dir())
    command = os.environ.get("BLACKWELL_FETCH_FOR") or "make upstream"
    base = (os.environ.get("BLACKWELL_GITHUB_URL") or GITHUB).rstrip("/")
    try:
        max_time = int(os.environ.get("BLACKWELL_FETCH_MAX_TIME") or 1800)
    except ValueError:
        sys.stderr.write("fetch_upstream: BLACKWELL_FETCH_MAX_TIME must be a number of seconds\n")
        return 2

    def on_term(signum, _frame):
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, on_term)
    try:
        if args.write_lock:
            if not os.path.isfile(os.path.join(where, "manifest.json")) or load_stamp(where) is not None:
                raise Refused("--write-lock reads the upstream source bundle; %s is not one (BLACKWELL_UPSTREAM)"
                              % where)
            write_lock(where, args.lock)
            return 0
        with open(args.lock) as f:
            lock = json.load(f)
        if os.path.isfile(os.path.join(where, "manifest.json")) and load_stamp(where) is None:
            check_bundle(lock, where, args.lock)
        else:
            fetch(lock, where, command, base, max_time)
    except Refused as e:
        sys.stderr.write("fetch_upstream: %s\n" % e)
        return 1
    except KeyboardInterrupt:
        sys.stderr.write("fetch_upstream: interrupted; nothing half-written is left\n")
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
