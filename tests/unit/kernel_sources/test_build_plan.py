"""blackwell.sglang.sgl_kernel_build_plan's logic (plugins/module_utils/_sgl_kernel_plan.py): the build key of the
sgl_kernel_sm120 role and where the wheel comes from. A key that changes for the same tree and settings orphans every
cached wheel, so the pinned value below was computed by the role's earlier Jinja (to_json(sort_keys=true) | hash)."""

import hashlib
import json

from ansible_collections.blackwell.sglang.plugins.module_utils import _sgl_kernel_plan as P

SETTINGS = {"patches": ["cmake_policy_guards", "sm120_only"], "target_archs": ["sm_120a", "sm_121a"],
            "enable_below_sm90": False, "github_artifactory": "", "extra_cmake_args": ["-DFOO=1"],
            "cmake_requirement": "cmake>=3.31,<4"}


def _run(commit_rc=0, diff="", digest="abc  CMakeLists.txt\n"):
    calls = []

    def run(argv, cwd):
        calls.append(argv)
        if argv[-2:] == ["rev-parse", "HEAD"]:
            return commit_rc, "0123456789abcdef0123456789abcdef01234567\n", ""
        if argv[-2:] == ["diff", "HEAD"]:
            return commit_rc, diff, ""
        return 0, digest, ""
    return run, calls


def test_key_of_a_checkout_is_the_sha256_of_its_sorted_inputs():
    run, calls = _run(diff="--- a\n+++ b\n")
    tree = P.tree_identity(run, "/src/sgl-kernel")
    assert tree == {"commit": "0123456789abcdef0123456789abcdef01234567",
                    "tree_changes": hashlib.sha256(b"--- a\n+++ b").hexdigest()}
    assert not any(a[0] == "sha256sum" for a in calls)
    inputs = P.key_inputs(tree, SETTINGS, "13.0.88", "2.12.0.dev20260307+cu130", "3.12.3", [], "x86_64")
    assert inputs["python"] == "3.12" and "machine" not in inputs and "source_placeholders" not in inputs
    assert P.build_key(inputs) == hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()[:16]
    assert P.build_key(inputs) == "42d02c8e28422212"


def test_a_tree_without_git_is_named_by_its_build_files_and_extras_only_when_they_apply():
    run, calls = _run(commit_rc=128)
    tree = P.tree_identity(run, "/src/sgl-kernel")
    assert tree["commit"] == "tree-" + hashlib.sha256(b"abc  CMakeLists.txt").hexdigest()
    assert tree["tree_changes"] == hashlib.sha256(b"").hexdigest()
    assert ["sha256sum"] + list(P.TREE_FILES) in calls
    inputs = P.key_inputs(tree, SETTINGS, "13.0.88", None, "3.12.3", ["repo-b", "repo-a"], "aarch64")
    assert inputs["torch"] == "none" and inputs["source_placeholders"] == ["repo-a", "repo-b"]
    assert inputs["machine"] == "aarch64"


def test_the_wheel_comes_from_the_host_cache_then_a_prebuilt_wheel_then_a_build():
    assert P.wheel_source(["/w/k/a.whl"], "/c/p.whl", "", False) == "cache"
    assert P.wheel_source([], "/c/p.whl", "", False) == "prebuilt"
    assert P.wheel_source([], "", "/fetch/k/a.whl", False) == "prebuilt"
    assert P.wheel_source([], "", "", False) == "build"
    assert P.wheel_source(["/w/k/a.whl"], "/c/p.whl", "", True) == "build"


def test_cached_wheels_are_regular_files_sorted(tmp_path):
    (tmp_path / "b.whl").write_text("")
    (tmp_path / "a.whl").write_text("")
    (tmp_path / "c.whl").mkdir()
    (tmp_path / "d.whl").symlink_to(tmp_path / "a.whl")
    (tmp_path / "BUILD_KEY").write_text("k\n")
    assert P.wheels_in(str(tmp_path)) == [str(tmp_path / "a.whl"), str(tmp_path / "b.whl")]
    assert P.wheels_in(str(tmp_path / "missing")) == []
