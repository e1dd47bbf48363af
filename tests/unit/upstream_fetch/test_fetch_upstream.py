"""tests/sandbox/fetch_upstream.py (`make upstream`): the bundle when it is there, else the same trees from GitHub.

Nothing here leaves the machine: ``curl`` is a stand-in first on PATH that serves files from a directory (or fails
like curl without network), and logs every call. The upstream repositories are small git repositories made here;
the "GitHub" archives are ``git archive --prefix=<repo>-<commit>/ <commit> | gzip -n`` of them, as GitHub serves
them. The bundle is made from the same repositories the way the real one was (MANIFEST.md: git archive with the
bundle's prefix, a CUTLASS tree trimmed, a submodule merged in, a blob left out), with a manifest.json in the real
schema, and the lock is generated from it by the script's own ``--write-lock``.
The real lock and bundle are checked too: the checked-in lock must be what ``--write-lock`` derives from the bundle
(skipped without it), and without bundle and network the real lock's failure names its twelve files.
"""

import gzip
import hashlib
import io
import json
import os
import pathlib
import subprocess
import sys
import tarfile
import time

import pytest

from ansible_collections.blackwell.sglang.plugins.module_utils import _sgl_kernel_sources as S

REPO = pathlib.Path(__file__).resolve().parents[3]
SCRIPT = REPO / "tests" / "sandbox" / "fetch_upstream.py"
REAL_LOCK = REPO / "tests" / "sandbox" / "upstream.lock.json"
REAL_BUNDLE = pathlib.Path(os.environ.get("BLACKWELL_UPSTREAM") or REPO.parent / "shared" / "upstream")
# the project's bundle itself, not a cache that `make upstream` fetched (BLACKWELL_UPSTREAM=.cache/upstream)
HAVE_BUNDLE = (REAL_BUNDLE / "manifest.json").is_file() and not (REAL_BUNDLE / ".blackwell-fetch.json").exists()
NO_BUNDLE = ("%s is not the upstream source bundle (absent, or a cache that make upstream fetched; set "
             "BLACKWELL_UPSTREAM)" % REAL_BUNDLE)

FAKE_CURL = r'''#!%s
"""Stand-in for curl: never touches the network. Serves https://github.com/<path> from $FAKE_CURL_ROOT/<path>."""
import json, os, shutil, sys
args = sys.argv[1:]
with open(os.environ["FAKE_CURL_LOG"], "a") as f:
    f.write(json.dumps(args) + "\n")
out, head, url, i = None, False, None, 0
while i < len(args):
    if args[i] == "-o":
        out = args[i + 1]; i += 2; continue
    if args[i] in ("--retry", "--retry-delay", "--connect-timeout", "--max-time"):
        i += 2; continue
    if args[i] == "-I":
        head = True
    elif not args[i].startswith("-"):
        url = args[i]
    i += 1
if os.environ.get("FAKE_CURL_OFFLINE"):
    sys.stderr.write("curl: (6) Could not resolve host: github.com\n")
    sys.exit(6)
if head:
    sys.exit(0)
src = os.path.join(os.environ["FAKE_CURL_ROOT"], url.split("https://github.com/", 1)[1])
if not os.path.isfile(src):
    sys.stderr.write("curl: (22) The requested URL returned error: 404\n")
    sys.exit(22)
shutil.copyfile(src, out)
'''

GIT_ENV = dict(GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.invalid", GIT_COMMITTER_NAME="t",
               GIT_COMMITTER_EMAIL="t@example.invalid", GIT_AUTHOR_DATE="2026-01-02T03:04:05Z",
               GIT_COMMITTER_DATE="2026-01-02T03:04:05Z", GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL="/dev/null")


def git(cwd, *args, data=None):
    return subprocess.run(["git", "-c", "init.defaultBranch=main"] + list(args), cwd=str(cwd),
                          env=dict(os.environ, **GIT_ENV), input=data, capture_output=True, check=True,
                          timeout=60).stdout


def make_repo(path, files, gitlinks=None):
    """A git repository with ``files`` ({path: text, or ("x", text) executable, or ("l", target) a symlink}) and
    submodule gitlinks ({path: commit}). -> its commit id."""
    path.mkdir(parents=True)
    git(path, "init", "-q")
    for rel, spec in files.items():
        kind, text = spec if isinstance(spec, tuple) else ("-", spec)
        p = path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        if kind == "l":
            os.symlink(text, str(p))
        else:
            p.write_text(text)
            if kind == "x":
                p.chmod(0o755)
    git(path, "add", "-A")
    for rel, commit in (gitlinks or {}).items():
        git(path, "update-index", "--add", "--cacheinfo", "160000,%s,%s" % (commit, rel))
    git(path, "commit", "-q", "-m", "upstream")
    return git(path, "rev-parse", "HEAD").decode().strip()


def github_archive(root, repo_dir, owner_repo, commit):
    """What https://github.com/<owner_repo>/archive/<commit>.tar.gz serves: git archive, prefix <repo>-<commit>/."""
    tar = git(repo_dir, "archive", "--format=tar", "--prefix=%s-%s/" % (owner_repo.split("/")[1], commit), commit)
    assert git(repo_dir, "get-tar-commit-id", data=tar).decode().strip() == commit  # the header the script reads
    dest = root / owner_repo / "archive" / ("%s.tar.gz" % commit)
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_bytes(gzip.compress(tar, mtime=0))
    return dest


def bundle_tarball(dest, pieces):
    """Merge git archives into one tar.gz, the bundle's way: pieces = [(tar bytes, keep(name) -> bool)]."""
    seen = set()
    with tarfile.open(str(dest), "w:gz", format=tarfile.PAX_FORMAT) as out:
        for data, keep in pieces:
            with tarfile.open(fileobj=io.BytesIO(data)) as src:
                for m in src:
                    if m.name in seen or not keep(m.name):
                        continue
                    seen.add(m.name)
                    out.addfile(m, src.extractfile(m) if m.isreg() else None)


def sha256(path):
    return hashlib.sha256(pathlib.Path(path).read_bytes()).hexdigest()


def tree(path):
    """{member path: (kind, content or link target, exec bit)} of a tarball, directories as ("d",)."""
    res = {}
    with tarfile.open(str(path)) as tf:
        for m in tf:
            if m.isdir():
                res[m.name.rstrip("/")] = ("d",)
            elif m.issym():
                res[m.name] = ("l", m.linkname)
            else:
                res[m.name] = ("f", tf.extractfile(m).read(), bool(m.mode & 0o111))
    return res


def files_of(t):
    return {k: v for k, v in t.items() if v[0] != "d"}


@pytest.fixture(name="world")
def fixture_world(tmp_path):
    """Two upstream repositories (one with a CUTLASS submodule), their GitHub archives, a bundle and its lock."""
    src, served, bundle = tmp_path / "git", tmp_path / "github", tmp_path / "bundle"
    bundle.mkdir()
    kernel = make_repo(src / "kernel", {
        "python/pyproject.toml": "[project]\nname = 'kern'\n", "python/kern/__init__.py": "",
        "kernel/CMakeLists.txt": "project(k)\n", "kernel/build.sh": ("x", "#!/bin/sh\n"),
        "kernel/link.txt": ("l", "CMakeLists.txt"), "docs/guide.md": "not in the bundle\n", "README.md": "hi\n"})
    cut = make_repo(src / "cutlass", {
        "include/c.h": "// c\n", "include/big.bin": "a blob the bundle lacks\n", "CMakeLists.txt": "project(c)\n",
        "examples/common/e.h": "// e\n", "examples/99_other/x.cu": "// trimmed\n", "examples/CMakeLists.txt": "#\n",
        "tools/util/u.h": "// u\n", "tools/profiler/p.cpp": "// trimmed\n", "docs/d.md": "trimmed\n"})
    noise = "".join(hashlib.sha256(b"%d" % i).hexdigest() + "\n" for i in range(4000))  # a download to cut short
    lib = make_repo(src / "lib", {"CMakeLists.txt": "project(l)\n", "src/a.c": "int a;\n", "src/z.txt": noise,
                                  ".gitmodules": "[submodule]\n"},
                    gitlinks={"third-party/cutlass": cut, "third-party/spdlog": "1" * 40})
    archives = {"acme/kernel": github_archive(served, src / "kernel", "acme/kernel", kernel),
                "NVIDIA/cutlass": github_archive(served, src / "cutlass", "NVIDIA/cutlass", cut),
                "acme/lib": github_archive(served, src / "lib", "acme/lib", lib)}

    k_file, l_file = "kernel-2026-01-02-%s.tar.gz" % kernel[:10], "dep-lib-%s.tar.gz" % lib[:10]
    bundle_tarball(bundle / k_file, [(git(src / "kernel", "archive", "--prefix=kernel/", kernel, "python", "kernel"),
                                      lambda n: True)])
    kept = ("include/", "examples/common/", "tools/util/", "CMakeLists.txt")  # the trimmed CUTLASS, less big.bin
    sub = "lib/third-party/cutlass/"
    bundle_tarball(bundle / l_file, [
        (git(src / "lib", "archive", "--prefix=lib/", lib), lambda n: True),
        (git(src / "cutlass", "archive", "--prefix=" + sub, cut),
         lambda n: n == sub or n[len(sub):].startswith(kept) and not n.endswith("big.bin"))])
    manifest = {"generated": "test", "pins": {"original": {"commit": kernel, "tarball": k_file}}, "tarballs": [
        {"file": k_file, "sha256": sha256(bundle / k_file), "size": (bundle / k_file).stat().st_size,
         "top_level_dir": "kernel/", "upstream_repo": "https://github.com/acme/kernel", "commit": kernel,
         "submodules_included": [], "left_out_missing_from_mirror": [], "fetchcontent": []},
        {"file": l_file, "sha256": sha256(bundle / l_file), "size": (bundle / l_file).stat().st_size,
         "top_level_dir": "lib/", "upstream_repo": "https://github.com/acme/lib.git", "commit": lib,
         "submodules_included": [{"path": "third-party/cutlass", "upstream": "https://github.com/NVIDIA/cutlass",
                                  "commit": cut}],
         "left_out_missing_from_mirror": [{"path": "third-party/cutlass/include/big.bin"}],
         "trimmed": "left out: docs/, examples/* except common, tools/* except util",
         "fetchcontent": [{"name": "repo-lib", "variable": "FETCHCONTENT_SOURCE_DIR_REPO-LIB",
                           "declared_in": "CMakeLists.txt: URL https://${GITHUB_ARTIFACTORY}/acme/lib/archive/%s.tar.gz"
                                          % lib, "url_hash": "SHA256=%s" % sha256(archives["acme/lib"])}]}]}
    (bundle / "manifest.json").write_text(json.dumps(manifest, indent=1))
    lock = tmp_path / "upstream.lock.json"
    proc = run(tmp_path, bundle, "--write-lock", "--lock", str(lock))
    assert proc.returncode == 0, proc.stderr
    return {"tmp": tmp_path, "bundle": bundle, "served": served, "lock": lock, "files": [k_file, l_file],
            "archives": archives, "commits": {"kernel": kernel, "lib": lib, "cutlass": cut}, "src": src}


def run(tmp_path, upstream, *args, offline=False, path=None, **env):
    bindir = tmp_path / "bin"
    if not bindir.exists():
        bindir.mkdir()
        (bindir / "curl").write_text(FAKE_CURL % sys.executable)
        (bindir / "curl").chmod(0o755)
    full = dict(os.environ, BLACKWELL_UPSTREAM=str(upstream), FAKE_CURL_LOG=str(tmp_path / "curl.log"),
                FAKE_CURL_ROOT=str(tmp_path / "github"), PATH=path if path is not None else str(bindir), **env)
    full.pop("BLACKWELL_GITHUB_URL", None)
    if offline:
        full["FAKE_CURL_OFFLINE"] = "1"
    return subprocess.run([sys.executable, str(SCRIPT)] + list(args), env=full, capture_output=True, text=True,
                          timeout=300, check=False)


def curl_calls(tmp_path):
    log = tmp_path / "curl.log"
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def test_the_lock_records_the_bundle_and_how_to_verify_a_fetch(world):
    lock = json.loads(world["lock"].read_text())
    k, lib = lock["entries"]
    assert k["bundle_sha256"] == sha256(world["bundle"] / k["file"])
    assert [p["url"] for p in k["parts"]] == ["https://github.com/acme/kernel/archive/%s.tar.gz"
                                              % world["commits"]["kernel"]]
    assert sorted(k["groups"]) == ["kernel", "python"] and k["files"] == 5  # docs/, README.md: not in the bundle
    assert [(p["path"], p["repo"], p.get("split")) for p in lib["parts"]] == [
        ("", "acme/lib", None), ("third-party/cutlass", "NVIDIA/cutlass", ["examples", "tools"])]
    assert lib["parts"][0]["github_sha256"] == sha256(world["archives"]["acme/lib"])  # upstream's URL_HASH
    assert lib["parts"][1]["github_sha256"] is None
    assert lib["exclude"] == ["third-party/cutlass/include/big.bin"]
    assert lib["empty_dirs"] == ["third-party/spdlog"]
    assert "third-party/cutlass/examples/common" in lib["groups"]
    assert not [g for g in lib["groups"] if "99_other" in g or "profiler" in g or "docs" in g]


def test_bundle_present_nothing_is_fetched(world):
    proc = run(world["tmp"], world["bundle"], "--lock", str(world["lock"]))
    assert proc.returncode == 0, proc.stderr
    assert "the upstream source bundle at %s: 2 tarballs, sha256 as in the lock; nothing to fetch" % world["bundle"] \
        in proc.stdout
    assert curl_calls(world["tmp"]) == []  # not even the HEAD request
    assert not (world["bundle"] / ".blackwell-fetch.json").exists()


def test_bundle_present_but_changed_is_an_error_and_still_no_fetch(world):
    victim = world["bundle"] / world["files"][1]
    victim.chmod(0o644)
    victim.write_bytes(victim.read_bytes() + b"\0")
    proc = run(world["tmp"], world["bundle"], "--lock", str(world["lock"]))
    assert proc.returncode == 1
    assert "does not match" in proc.stderr and world["files"][1] in proc.stderr and "--write-lock" in proc.stderr
    assert curl_calls(world["tmp"]) == []


def test_no_bundle_with_network_fetches_verifies_and_a_rerun_downloads_nothing(world):
    cache = world["tmp"] / "cache" / "upstream"
    proc = run(world["tmp"], cache, "--lock", str(world["lock"]))
    assert proc.returncode == 0, proc.stderr
    calls = curl_calls(world["tmp"])
    assert calls[0][:2] == ["-sS", "-I"] and "--max-time" in calls[0]  # the cheap check first
    downloads = calls[1:]
    assert len(downloads) == 3  # kernel, lib, cutlass: one archive each
    for c in downloads:
        assert {"-fL", "--max-time", "--retry", "--progress-bar", "--connect-timeout"} <= set(c)
    assert sorted(c[-1].rsplit("/", 3)[1] for c in downloads) == ["cutlass", "kernel", "lib"]

    # the bundle's layout: same names, same top-level directories, the same files byte for byte
    assert sorted(p.name for p in cache.iterdir() if not p.name.startswith(".")) == sorted(
        world["files"] + ["MANIFEST.md", "manifest.json"])
    for name in world["files"]:
        want, got = tree(world["bundle"] / name), tree(cache / name)
        assert files_of(got) == files_of(want)
        assert {k for k, v in got.items() if v[0] == "d"} >= {k for k, v in want.items() if v[0] == "d"}
    assert ("d",) == tree(cache / world["files"][1])["lib/third-party/spdlog"]  # the bundle's empty directory
    out = world["tmp"] / "extract"  # what build_sglang_mirror.sh does with an SGLang tarball
    out.mkdir()
    subprocess.run(["tar", "-xzf", str(cache / world["files"][0]), "-C", str(out), "--strip-components=1",
                    "--no-same-owner", "kernel/python", "kernel/kernel"], check=True, timeout=60)
    assert sorted(p.name for p in out.iterdir()) == ["kernel", "python"]
    assert os.readlink(str(out / "kernel" / "link.txt")) == "CMakeLists.txt"
    assert os.access(str(out / "kernel" / "build.sh"), os.X_OK)
    manifest = json.loads((cache / "manifest.json").read_text())
    bundle_manifest = json.loads((world["bundle"] / "manifest.json").read_text())
    for t, b in zip(manifest["tarballs"], bundle_manifest["tarballs"]):
        assert t["sha256"] == sha256(cache / t["file"]) and t["bundle_sha256"] == b["sha256"]
        assert t["fetchcontent"] == b["fetchcontent"] and t["top_level_dir"] == b["top_level_dir"]
    assert manifest["pins"] == bundle_manifest["pins"]
    sources = manifest["fetched"]["sources"][world["files"][1]]
    assert [s["commit"] for s in sources] == [world["commits"]["lib"], world["commits"]["cutlass"]]
    assert sources[0]["github_sha256_matches"] is True and sources[1]["github_sha256_matches"] is None
    assert not [p for p in cache.iterdir() if p.name.startswith(".partial-")]

    again = run(world["tmp"], cache, "--lock", str(world["lock"]))
    assert again.returncode == 0, again.stderr
    assert "2 tarballs fetched earlier and verified" in again.stdout
    assert curl_calls(world["tmp"]) == calls  # no download, no HEAD

    (cache / world["files"][0]).write_bytes(b"damaged")  # a damaged cache file is fetched again, alone
    third = run(world["tmp"], cache, "--lock", str(world["lock"]))
    assert third.returncode == 0, third.stderr
    assert [c[-1] for c in curl_calls(world["tmp"])[len(calls):]] == [
        "https://github.com/", str(calls[1][-1])]
    assert files_of(tree(cache / world["files"][0])) == files_of(tree(world["bundle"] / world["files"][0]))


@pytest.mark.slow
def test_real_lock_fetch_of_the_kernel_dependencies_serves_sgl_kernel_sources(tmp_path):
    """The real lock's ten dependency tarballs end to end (the submodules merged in, the trimmed CUTLASS trees, the
    left-out blob, the empty spdlog directory), GitHub played by archives cut from the real bundle: each part on its
    own, prefix <repo>-<commit>/, the commit in the pax header, plus a file the bundle left out. sgl_kernel_sources
    must then find in the fetched cache exactly what it finds in the bundle. (The two SGLang trees are single
    archives, the case the synthetic tests cover; GitHub itself cannot be asked: no traffic leaves the machine.)"""
    if not HAVE_BUNDLE:
        pytest.skip(NO_BUNDLE)

    real = json.loads(REAL_LOCK.read_text())
    deps = [e for e in real["entries"] if e["file"].startswith("dep-")]
    assert len(deps) == 10
    for e in deps:
        _served_from_bundle(tmp_path / "github", e, REAL_BUNDLE / e["file"])
    names = {e["file"] for e in deps}
    lock = dict(real, entries=deps, manifest=dict(real["manifest"], tarballs=[
        t for t in real["manifest"]["tarballs"] if t["file"] in names]))
    (tmp_path / "lock.json").write_text(json.dumps(lock))
    cache = tmp_path / "cache"
    proc = run(tmp_path, cache, "--lock", str(tmp_path / "lock.json"))
    assert proc.returncode == 0, proc.stderr
    assert "all 10 tarballs in place, verified" in proc.stdout
    for name in ("dep-deepgemm-ffe2b6b974.tar.gz", "dep-flashinfer-bc29697ba2.tar.gz"):  # two parts or more each
        assert files_of(tree(cache / name)) == files_of(tree(REAL_BUNDLE / name)), name
    assert tree(cache / "dep-flashinfer-bc29697ba2.tar.gz")["flashinfer/3rdparty/spdlog"] == ("d",)

    sglang = tmp_path / "src"
    with tarfile.open(str(REAL_BUNDLE / "sglang-2026-03-07-d28f35240a.tar.gz")) as tf:
        tf.extractall(str(sglang))
    results = [S.kernel_sources(str(sglang / "sglang"), cache=str(c), scratch=str(tmp_path / ("scratch%d" % i)))
               for i, c in enumerate((REAL_BUNDLE, cache))]
    for r in results:
        for d in r["dependencies"]:
            d["cache_path"] = d["cache_path"] and os.path.basename(d["cache_path"])  # the same file names
    for key in ("layout", "dependencies", "missing", "mismatched"):
        assert results[0][key] == results[1][key], key
    assert results[1]["missing"] == ["repo-triton", "repo-flash-attention"]  # the two the bundle lacks too


def test_no_bundle_no_network_fails_in_seconds_naming_the_fix(world):
    cache = world["tmp"] / "cache"
    start = time.monotonic()
    proc = run(world["tmp"], cache, "--lock", str(world["lock"]), offline=True, BLACKWELL_FETCH_FOR="make sandbox")
    took = time.monotonic() - start
    assert proc.returncode == 1 and took < 30
    err = proc.stderr
    assert err.startswith("fetch_upstream: make sandbox needs the pinned upstream sources")
    assert "BLACKWELL_UPSTREAM=%s" % cache in err and "Could not resolve host" in err
    assert all(name in err for name in world["files"]) and "Fix, one of:" in err
    assert "make sandbox BLACKWELL_UPSTREAM=<dir>" in err and "https://github.com" in err
    calls = curl_calls(world["tmp"])
    assert len(calls) == 1 and "-I" in calls[0] and calls[0][calls[0].index("--max-time") + 1] == "5"
    assert not [p for p in cache.iterdir() if p.suffix == ".gz" or p.name.startswith(".partial-")]


def test_no_bundle_no_curl_fails_naming_curl(world):
    empty = world["tmp"] / "nothing-on-path"
    empty.mkdir()
    proc = run(world["tmp"], world["tmp"] / "cache", "--lock", str(world["lock"]), path=str(empty))
    assert proc.returncode == 1
    assert "curl is not installed (apt-get install curl" in proc.stderr and world["files"][0] in proc.stderr


def test_real_lock_without_bundle_or_network_names_its_twelve_files(tmp_path):
    proc = run(tmp_path, tmp_path / "cache", offline=True, BLACKWELL_FETCH_FOR="make test")
    assert proc.returncode == 1
    real = json.loads(REAL_LOCK.read_text())
    assert len(real["entries"]) == 12
    assert all(e["file"] in proc.stderr for e in real["entries"]) and "make test needs" in proc.stderr
    assert len(curl_calls(tmp_path)) == 1


def _corrupt(world, how):
    """Replace the served lib archive (the second tarball's main part) by a bad one."""
    good = world["archives"]["acme/lib"]
    if how == "truncated":
        data = good.read_bytes()
        good.write_bytes(data[:len(data) // 2])
    elif how == "error page":
        good.write_bytes(b"<html>rate limited</html>\n")
    elif how == "another commit":  # a real archive, of the kernel repository's commit
        good.write_bytes(world["archives"]["acme/kernel"].read_bytes())
    elif how == "altered content":  # the pinned commit id in its header, one kept file changed
        tar = git(world["src"] / "lib", "archive", "--format=tar", "--prefix=lib-x/", world["commits"]["lib"])
        good.write_bytes(gzip.compress(tar.replace(b"int a;\n", b"int b;\n"), mtime=0))  # same length: a valid tar


@pytest.mark.parametrize("how,says", [
    ("truncated", "unreadable archive"),
    ("error page", "is not a tar.gz archive"),
    ("another commit", "is %s, not the pinned"),
    ("altered content", "not the bundle's content in src (2 files, the bundle has 2)"),
])
def test_corrupted_download_is_refused_and_nothing_is_left_half_written(world, how, says):
    cache = world["tmp"] / "cache"
    good = world["archives"]["acme/lib"].read_bytes()
    _corrupt(world, how)
    proc = run(world["tmp"], cache, "--lock", str(world["lock"]))
    assert proc.returncode == 1
    if "%s" in says:
        says = says % world["commits"]["kernel"]
    assert says in proc.stderr and (world["files"][1] in proc.stderr or "acme/lib" in proc.stderr), proc.stderr
    left = sorted(p.name for p in cache.iterdir())
    assert left == [".blackwell-fetch.json", ".blackwell-fetch.lock", world["files"][0]]  # the good one stays
    assert files_of(tree(cache / world["files"][0])) == files_of(tree(world["bundle"] / world["files"][0]))
    assert not (cache / "manifest.json").exists()  # the tests see a complete set or none

    world["archives"]["acme/lib"].write_bytes(good)
    n = len(curl_calls(world["tmp"]))
    proc = run(world["tmp"], cache, "--lock", str(world["lock"]))
    assert proc.returncode == 0, proc.stderr
    urls = [c[-1] for c in curl_calls(world["tmp"])[n:]]
    assert len(urls) == 3 and not [u for u in urls if "acme/kernel" in u]  # only what was missing
    assert (cache / "manifest.json").is_file()


def test_refuses_to_write_into_a_directory_it_did_not_make(world):
    other = world["tmp"] / "someones"
    other.mkdir()
    (other / "notes.txt").write_text("mine\n")
    proc = run(world["tmp"], other, "--lock", str(world["lock"]))
    assert proc.returncode == 1 and "refusing to write into it" in proc.stderr
    assert sorted(p.name for p in other.iterdir()) == ["notes.txt"] and curl_calls(world["tmp"]) == []


# --- the real lock and bundle -------------------------------------------------------------------------------------

def _served_from_bundle(served, entry, tarball):
    """GitHub-like archives (prefix <repo>-<commit>/, the commit in the pax header) of one real bundle tarball's
    parts, plus files the bundle left out (which the fetch must leave out again)."""
    top = entry["top_level_dir"].strip("/")
    inner = [p["path"] for p in entry["parts"] if p["path"]]
    with tarfile.open(str(tarball)) as tf:
        members = [(m, tf.extractfile(m).read() if m.isreg() else None) for m in tf]
    for part in entry["parts"]:
        repo, commit, path = part["repo"], part["commit"], part["path"]
        dest = served / repo / "archive" / ("%s.tar.gz" % commit)
        if dest.exists():
            continue
        dest.parent.mkdir(parents=True, exist_ok=True)
        prefix = "%s-%s" % (repo.split("/")[1], commit)
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT, pax_headers={"comment": commit}) as out:
            for m, data in members:
                rel = m.name[len(top) + 1:].rstrip("/")
                if path:
                    if not rel.startswith(path + "/"):
                        continue
                    rel = rel[len(path) + 1:]
                elif any(rel.startswith(d + "/") for d in inner):
                    continue
                out.addfile(_copy(m, "%s/%s" % (prefix, rel) if rel else prefix),
                            io.BytesIO(data) if data is not None else None)
            extra = tarfile.TarInfo("%s/docs-left-out-by-the-bundle/x.md" % prefix)
            extra.size = 2
            out.addfile(extra, io.BytesIO(b"x\n"))
        dest.write_bytes(gzip.compress(buf.getvalue(), compresslevel=1, mtime=0))


def _copy(m, name):
    ti = tarfile.TarInfo(name)
    ti.type, ti.mode, ti.mtime, ti.size, ti.linkname = m.type, m.mode, m.mtime, m.size, m.linkname
    return ti


def test_the_checked_in_lock_is_what_the_bundle_gives(tmp_path):
    if not HAVE_BUNDLE:
        pytest.skip(NO_BUNDLE)
    proc = run(tmp_path, REAL_BUNDLE, "--write-lock", "--lock", str(tmp_path / "lock.json"))
    assert proc.returncode == 0, proc.stderr
    assert json.loads((tmp_path / "lock.json").read_text()) == json.loads(REAL_LOCK.read_text()), (
        "tests/sandbox/upstream.lock.json is stale: python3 tests/sandbox/fetch_upstream.py --write-lock")
    check = run(tmp_path, REAL_BUNDLE)
    assert check.returncode == 0 and "12 tarballs, sha256 as in the lock; nothing to fetch" in check.stdout
    assert curl_calls(tmp_path) == []
