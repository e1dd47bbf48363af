"""tests/sandbox/build_sglang_mirror.sh and the scenario runner's skip: the sandbox's SGLang mirror of the real trees.

With the upstream source bundle (``BLACKWELL_UPSTREAM``, default ``<repo>/../shared/upstream``) the script is run
for real into a temporary directory; without it, only the skip path is tested (the bundle tests skip, saying why).
"""

import os
import pathlib
import shutil
import subprocess
import tarfile

import pytest

REPO = pathlib.Path(__file__).resolve().parents[3]
SCRIPT = REPO / "tests" / "sandbox" / "build_sglang_mirror.sh"
UPSTREAM = pathlib.Path(os.environ.get("BLACKWELL_UPSTREAM") or REPO.parent / "shared" / "upstream")
TARBALL_0307 = UPSTREAM / "sglang-2026-03-07-d28f35240a.tar.gz"


def build(out, upstream, **env):
    full = dict(os.environ, BLACKWELL_UPSTREAM=str(upstream), SGLANG_MIRROR_OUT=str(out), **env)
    return subprocess.run(["bash", str(SCRIPT)], env=full, capture_output=True, text=True, timeout=600, check=False)


def git(bare, *args):
    return subprocess.run(["git", "--git-dir", str(bare)] + list(args), capture_output=True, text=True, check=True,
                          timeout=120).stdout.strip()


def test_without_the_bundle_nothing_is_built_and_the_reason_is_written(tmp_path):
    proc = build(tmp_path / "out", tmp_path / "no-bundle")
    assert proc.returncode == 0, proc.stderr
    reason = (tmp_path / "out" / "sglang.skip").read_text()
    assert "the upstream source bundle is not at %s" % (tmp_path / "no-bundle") in reason
    assert "sglang-2026-03-07-d28f35240a.tar.gz" in reason and "BLACKWELL_UPSTREAM" in reason
    assert "SKIP: " + reason.strip() in proc.stdout
    assert not (tmp_path / "out" / "sglang.git").exists()


def test_without_the_bundle_ci_can_require_it(tmp_path):
    proc = build(tmp_path / "out", tmp_path / "no-bundle", SGLANG_MIRROR_REQUIRE_UPSTREAM="1")
    assert proc.returncode == 1
    assert "the upstream source bundle is not at" in proc.stderr


def test_runner_reports_mirror_scenarios_as_skipped(tmp_path):
    """molecule/_shared/run-scenarios.sh, copied with the scenario files into a scratch tree: with a skip reason the
    scenarios that install SGLang from the mirror are reported, not run (molecule is never called for them)."""
    root = tmp_path / "repo"
    shutil.copytree(REPO / "molecule", root / "molecule", ignore=shutil.ignore_patterns("__pycache__"))
    (root / ".cache" / "mirror").mkdir(parents=True)
    (root / ".cache" / "mirror" / "sglang.skip").write_text("no bundle here (test)\n")
    names = sorted(p.parent.name for p in (root / "molecule").glob("*/molecule.yml"))
    wanted = ["sgl_kernel_sm120", "sglang_service", "sglang_source", "site", "fleet"]
    env = dict(os.environ, MOLECULE_ALL=" ".join(names), MOLECULE_JOBS="1", PATH="/usr/bin:/bin")
    proc = subprocess.run(["bash", str(root / "molecule" / "_shared" / "run-scenarios.sh"), "10", ""] + wanted,
                          cwd=root, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for name in wanted:
        assert "molecule test -s %s: skipped: no SGLang mirror: no bundle here (test)" % name in proc.stdout
        assert (root / ".cache" / "molecule-logs" / (name + ".result")).read_text().split()[0] == "skipped"


@pytest.fixture(name="mirror", scope="module")
def fixture_mirror(tmp_path_factory):
    if not TARBALL_0307.is_file():
        pytest.skip("the upstream source bundle is not at %s (set BLACKWELL_UPSTREAM): the mirror is built from its "
                    "real SGLang trees" % UPSTREAM)
    out = tmp_path_factory.mktemp("mirror")
    proc = build(out, UPSTREAM)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return out


@pytest.mark.slow
def test_refs_hold_the_real_trees_and_the_fixture_ref_says_so(mirror):
    bare = mirror / "sglang.git"
    original, fixture_ref, current = ("original-20260307", "original-20260307-fixture-kernel", "current-20260818")
    # the real 0307 pyproject.toml, byte for byte
    with tarfile.open(TARBALL_0307) as tar:
        pyproject = tar.extractfile("sglang/python/pyproject.toml").read().decode()
    assert git(bare, "show", original + ":python/pyproject.toml") == pyproject.strip()
    assert "sgl-kernel" in git(bare, "show", original + ":sgl-kernel/pyproject.toml")
    assert "fixture" not in git(bare, "show", original + ":sgl-kernel/CMakeLists.txt").lower()[:2000]
    # the sandbox's ref: same python/ tree object, the fixture as sgl-kernel/, child of the real commit
    assert git(bare, "rev-parse", fixture_ref + ":python") == git(bare, "rev-parse", original + ":python")
    assert "TEST FIXTURE" in git(bare, "show", fixture_ref + ":sgl-kernel/README.md")
    assert git(bare, "rev-parse", fixture_ref + "^") == git(bare, "rev-parse", original)
    for alias in ("main", "sandbox"):
        assert git(bare, "rev-parse", alias) == git(bare, "rev-parse", fixture_ref)
    # the current pin's kernel tree is inside python/
    assert git(bare, "cat-file", "-t", current + ":python/sglang/kernels/aot/CMakeLists.txt") == "blob"
    assert "d55f1c28e223226575d40d4449266630eaf2a277" in git(bare, "log", "-1", "--format=%B", current)
    env = (mirror / "sglang.env").read_text()
    assert "SGLANG_MIRROR_BRANCH=%s\n" % fixture_ref in env
    assert "SGLANG_MIRROR_COMMIT=%s\n" % git(bare, "rev-parse", fixture_ref) in env


@pytest.mark.slow
def test_the_current_fixture_ref_puts_the_fixture_where_the_current_tree_keeps_its_kernel(mirror):
    bare = mirror / "sglang.git"
    current, fixture_ref, aot = "current-20260818", "current-20260818-fixture-kernel", "python/sglang/kernels/aot"
    assert git(bare, "rev-parse", fixture_ref + "^") == git(bare, "rev-parse", current)
    # only the kernel tree (and the mirror's own README) differ from the real tree
    changed = set(git(bare, "diff", "--name-only", current, fixture_ref).splitlines())
    assert changed and all(path.startswith(aot + "/") for path in changed - {"BLACKWELL-MIRROR.md"})
    assert "TEST FIXTURE" in git(bare, "show", fixture_ref + ":" + aot + "/README.md")
    # the fixture, named and versioned as the real kernel tree it replaces (SGLang pins and checks that distribution)
    real = git(bare, "show", current + ":" + aot + "/pyproject.toml")
    fixture = git(bare, "show", fixture_ref + ":" + aot + "/pyproject.toml")
    for line in ('name = "sglang-kernel"', 'version = "0.4.6.post1"'):
        assert line in real.splitlines() and line in fixture.splitlines()
    assert "scikit_build_core" in fixture and "TEST FIXTURE" in fixture
    assert '__version__ = "0.4.6.post1"' in git(bare, "show", fixture_ref + ":" + aot + "/python/sgl_kernel/__init__.py")
    readme = git(bare, "show", fixture_ref + ":BLACKWELL-MIRROR.md")
    assert "d55f1c28e223226575d40d4449266630eaf2a277" in readme and "sglang-kernel 0.4.6.post1" in readme
    # the original's fixture ref keeps the fixture's own name
    assert 'name = "sgl-kernel"' in git(bare, "show", "original-20260307-fixture-kernel:sgl-kernel/pyproject.toml")
    env = (mirror / "sglang.env").read_text()
    assert "SGLANG_MIRROR_CURRENT_20260818_FIXTURE_KERNEL_COMMIT=%s\n" % git(bare, "rev-parse", fixture_ref) in env


@pytest.mark.slow
def test_commit_ids_are_deterministic(mirror, tmp_path):
    again = build(tmp_path / "again", UPSTREAM, SGLANG_MIRROR_FORCE="1")
    assert again.returncode == 0, again.stderr
    for ref in ("original-20260307", "original-20260307-fixture-kernel", "current-20260818",
                "current-20260818-fixture-kernel"):
        assert git(tmp_path / "again" / "sglang.git", "rev-parse", ref) == git(mirror / "sglang.git", "rev-parse", ref)
    # unchanged inputs: nothing is rebuilt
    up_to_date = build(mirror, UPSTREAM)
    assert "is up to date" in up_to_date.stdout
