"""playbooks/kernel_sources.yml (sgl_kernel_sm120 entry point `cache`) filling a source cache, for real.

GitHub is out of reach here, so the upstream servers are stood in for by local repositories and files: a bare git
repository (file://, cloned by ansible.builtin.git at a commit) and an archive (file://, downloaded by
ansible.builtin.get_url and checked against its URL_HASH) that is a CMake sub-project declaring one more git source,
which only the second round can find. The cache must end complete, and a wrong URL_HASH must fail the download.
"""

import hashlib
import io
import json
import os
import subprocess
import sys
import tarfile

import ansible_run
from upstream import ROOT


def _git(*args, cwd=None):
    env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t", GIT_COMMITTER_NAME="t",
               GIT_COMMITTER_EMAIL="t@t")
    return subprocess.run(["git"] + list(args), cwd=cwd, env=env, check=True, capture_output=True,
                          text=True).stdout.strip()


def _repo(tmp_path, name, files):
    work = tmp_path / ("work-" + name)
    work.mkdir()
    _git("init", "-q", str(work))
    for rel, text in files.items():
        (work / rel).parent.mkdir(parents=True, exist_ok=True)
        (work / rel).write_text(text)
    _git("add", "-A", cwd=str(work))
    _git("commit", "-qm", "x", cwd=str(work))
    bare = tmp_path / (name + ".git")
    _git("clone", "-q", "--bare", str(work), str(bare))
    return "file://" + str(bare), _git("rev-parse", "HEAD", cwd=str(work))


def _archive(path, top, files):
    with tarfile.open(path, "w:gz") as tf:
        for rel, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo("%s/%s" % (top, rel))
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def _tree(tmp_path, bad_hash=False):
    alpha_url, alpha_sha = _repo(tmp_path, "alpha", {"include/alpha.h": "// alpha\n"})
    nested_url, nested_sha = _repo(tmp_path, "nested", {"nested.h": "// nested\n"})
    sub = str(tmp_path / "sub.tar.gz")
    digest = _archive(sub, "sub-1.0", {
        "CMakeLists.txt": "include(FetchContent)\nFetchContent_Declare(nested GIT_REPOSITORY %s GIT_TAG %s)\n"
                          % (nested_url, nested_sha)})
    k = tmp_path / "checkout" / "sgl-kernel"
    (k / "python" / "sgl_kernel").mkdir(parents=True)
    (k / "CMakeLists.txt").write_text(
        "include(FetchContent)\n"
        "FetchContent_Declare(repo-alpha GIT_REPOSITORY %s GIT_TAG %s)\n"
        "FetchContent_Declare(repo-sub URL file://%s URL_HASH SHA256=%s)\n"
        "add_subdirectory(${repo-sub_SOURCE_DIR} ${CMAKE_CURRENT_BINARY_DIR}/sub)\n"
        % (alpha_url, alpha_sha, sub, "0" * 64 if bad_hash else digest))
    return str(tmp_path / "checkout")


def _play(tmp_path, src):
    cache = str(tmp_path / "cache")
    extra = {"sglang_stack_source_dir": src, "sgl_kernel_sm120_source_cache": cache,
             "kernel_sources_hosts": "localhost", "ansible_python_interpreter": sys.executable}
    proc = ansible_run.playbook(os.path.join(ROOT, "playbooks", "kernel_sources.yml"), tmp_path, extra_vars=extra,
                                timeout=600)
    return proc, cache


def test_two_rounds_fill_the_cache_with_git_url_and_nested_sources(tmp_path):
    proc, cache = _play(tmp_path, _tree(tmp_path))
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    assert "holds all 3 sources" in out
    assert sorted(os.listdir(cache)) == ["nested", "repo-alpha", "repo-sub.tar.gz"]
    assert os.path.isfile(os.path.join(cache, "repo-alpha", "include", "alpha.h"))
    with open(os.path.join(cache, "nested", ".blackwell-source.json")) as f:
        assert len(json.load(f)["ref"]) == 40


def test_a_wrong_url_hash_fails_the_download(tmp_path):
    proc, cache = _play(tmp_path, _tree(tmp_path, bad_hash=True))
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert "checksum" in out.lower() and "repo-sub" in out
    assert not os.path.exists(os.path.join(cache, "repo-sub.tar.gz"))
