"""blackwell.sglang.sgl_kernel_sources on synthetic kernel trees of other shapes and dates, and on the real bundle.

The synthetic trees vary what real upstream trees vary: both declaration styles, quoted and unquoted arguments,
variables in tags and URLs, GITHUB_ARTIFACTORY, declarations in cmake/*.cmake files that are or are not
include()d, a sub-project declaring its own dependencies under options the parent sets, a tree placed inside another
(SOURCE_DIR ${other_SOURCE_DIR}/sub), and every cache layout (bundle manifest, <name>/ directories with source info
or a placeholder mark, <name>.tar.gz).
"""

import io
import json
import os
import tarfile

import pytest

import ansible_run
from ansible_collections.blackwell.sglang.plugins.module_utils import _sgl_kernel_sources as S
from upstream import CURRENT, ORIGINAL, SKIP_REASON, UPSTREAM, have_bundle

SHA_A = "a" * 40
SHA_B = "b" * 40


def _kernel(tmp_path, cmake, extra=None, name="k"):
    """A kernel dir: CMakeLists.txt + python/sgl_kernel/ + optional cmake/<file> texts."""
    k = tmp_path / name
    (k / "python" / "sgl_kernel").mkdir(parents=True)
    (k / "CMakeLists.txt").write_text(cmake)
    for rel, text in (extra or {}).items():
        (k / rel).parent.mkdir(parents=True, exist_ok=True)
        (k / rel).write_text(text)
    return str(k)


def _names(result):
    return [d["name"] for d in result["dependencies"]]


def _dep(result, name):
    return next(d for d in result["dependencies"] if d["name"] == name)


GIT_STYLE = """cmake_minimum_required(VERSION 3.26)
include(FetchContent)
set(MY_TAG v2.0.1)
FetchContent_Declare(
    repo-alpha   # a comment
    GIT_REPOSITORY "https://github.com/example/alpha.git"
    GIT_TAG        %s
    GIT_SHALLOW    OFF
)
FetchContent_Populate(repo-alpha)
fetchcontent_declare(Repo-Beta GIT_REPOSITORY https://github.com/example/beta GIT_TAG ${MY_TAG})
include(${CMAKE_CURRENT_LIST_DIR}/cmake/gamma.cmake)
""" % SHA_A

GAMMA = "FetchContent_Declare(repo-gamma GIT_REPOSITORY https://github.com/example/gamma GIT_TAG main)\n"

URL_STYLE = """cmake_minimum_required(VERSION 3.26)
include(FetchContent)
set(GITHUB_ARTIFACTORY "github.com" CACHE STRING "GitHub mirror URL")
FetchContent_Declare(
    repo-alpha
    URL      https://${GITHUB_ARTIFACTORY}/example/alpha/archive/%s.tar.gz
    URL_HASH SHA256=0123
)
FetchContent_Declare(repo-host URL https://${GITHUB_ARTIFACTORY}/example/host/archive/refs/tags/v1.2.tar.gz)
FetchContent_Declare(
    repo-inner
    URL https://${GITHUB_ARTIFACTORY}/example/inner/archive/%s.tar.gz
    SOURCE_DIR ${repo-host_SOURCE_DIR}/csrc/inner
)
""" % (SHA_A, SHA_B)


def test_git_style_names_variables_refs_and_included_files(tmp_path):
    k = _kernel(tmp_path, GIT_STYLE, {"cmake/gamma.cmake": GAMMA,
                                      "cmake/unused.cmake": "FetchContent_Declare(repo-unused URL https://x/y.tgz)\n"})
    r = S.kernel_sources(k)
    assert _names(r) == ["repo-alpha", "Repo-Beta", "repo-gamma", "repo-unused"]
    alpha, beta = _dep(r, "repo-alpha"), _dep(r, "Repo-Beta")
    assert alpha["variable"] == "FETCHCONTENT_SOURCE_DIR_REPO-ALPHA"
    assert beta["variable"] == "FETCHCONTENT_SOURCE_DIR_REPO-BETA"
    assert (alpha["style"], alpha["repository"], alpha["ref"]) == ("git", "https://github.com/example/alpha.git", SHA_A)
    assert beta["ref"] == "v2.0.1"  # ${MY_TAG} expanded
    assert _dep(r, "repo-gamma")["declared_in"] == "cmake/gamma.cmake:1" and _dep(r, "repo-gamma")["used"]
    assert _dep(r, "repo-unused")["used"] is False  # nothing includes cmake/unused.cmake
    assert r["missing"] == [] and r["complete"] is False  # no cache: nothing judged


def test_url_style_artifactory_and_a_tree_inside_another(tmp_path):
    k = _kernel(tmp_path, URL_STYLE)
    r = S.kernel_sources(k, github_artifactory="mirror.example.org")
    alpha = _dep(r, "repo-alpha")
    assert alpha["url"] == "https://mirror.example.org/example/alpha/archive/%s.tar.gz" % SHA_A
    assert (alpha["repository"], alpha["ref"], alpha["url_hash"]) == ("https://github.com/example/alpha", SHA_A, "SHA256=0123")
    assert _dep(r, "repo-host")["ref"] == "v1.2"
    inner = _dep(r, "repo-inner")
    assert inner["inside"] == {"name": "repo-host", "subdir": "csrc/inner"}
    assert inner["source_dir"] == "${repo-host_SOURCE_DIR}/csrc/inner"
    assert _dep(r, "repo-host")["writes_into"] == "configure"  # something is placed inside it


def test_an_option_off_leaves_an_included_extension_unused_unless_defined(tmp_path):
    cmake = ("include(FetchContent)\noption(BUILD_EXT \"ext\" OFF)\nif(BUILD_EXT)\n"
             "  include(${CMAKE_CURRENT_LIST_DIR}/cmake/ext.cmake)\nendif()\n")
    k = _kernel(tmp_path, cmake, {"cmake/ext.cmake": "FetchContent_Declare(repo-ext GIT_REPOSITORY https://e/x GIT_TAG %s)\n"
                                  "file(WRITE ${repo-ext_SOURCE_DIR}/gen.h \"x\")\n" % SHA_A})
    off = S.kernel_sources(k)
    assert _dep(off, "repo-ext")["used"] is False
    on = S.kernel_sources(k, defines={"BUILD_EXT": "ON"})
    assert _dep(on, "repo-ext")["used"] is True
    assert _dep(on, "repo-ext")["writes_into"] == "configure"


def _tar(path, top, files):
    with tarfile.open(path, "w:gz") as tf:
        for rel, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo("%s/%s" % (top, rel))
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))


SUBPROJECT = """include(FetchContent)
option(SUB_BUILD_TESTS "tests" ON)
option(SUB_PY "py" ON)
FetchContent_Declare(json URL https://github.com/nlohmann/json/releases/download/v3.11.3/json.tar.xz)
if(SUB_BUILD_TESTS)
  add_subdirectory(test)
endif()
if(SUB_PY)
  add_subdirectory(python)
endif()
"""


def test_subproject_declarations_follow_the_parent_options_and_the_cache(tmp_path):
    cmake = ("include(FetchContent)\nFetchContent_Declare(repo-sub GIT_REPOSITORY https://github.com/x/sub GIT_TAG %s)\n"
             "FetchContent_Populate(repo-sub)\nset(SUB_BUILD_TESTS OFF)\n"
             "add_subdirectory(${repo-sub_SOURCE_DIR} ${CMAKE_CURRENT_BINARY_DIR}/sub)\n" % SHA_A)
    k = _kernel(tmp_path, cmake)
    cache = tmp_path / "cache"
    cache.mkdir()
    _tar(str(cache / "repo-sub.tar.gz"), "sub-%s" % SHA_A, {
        "CMakeLists.txt": SUBPROJECT,
        "test/CMakeLists.txt": "FetchContent_Declare(googletest URL https://github.com/google/googletest/archive/v1.zip)\n",
        "python/CMakeLists.txt": "FetchContent_Declare(nanobind GIT_REPOSITORY https://github.com/wjakob/nanobind.git GIT_TAG v1.4.0)\n"
                                 "FetchContent_Declare(json URL https://other/json.tar.xz)\n",
    })
    r = S.kernel_sources(k, cache=str(cache), scratch=str(tmp_path / "scratch"))
    assert _names(r) == ["repo-sub", "json", "nanobind"]  # no googletest: SUB_BUILD_TESTS is OFF in the parent
    assert _dep(r, "repo-sub")["writes_into"] == "build"
    assert _dep(r, "json")["url"].startswith("https://github.com/nlohmann/")  # first declaration wins
    assert _dep(r, "nanobind")["parent"] == "repo-sub"
    assert r["missing"] == ["json", "nanobind"] and not r["complete"]
    lines = S.describe_missing(r)
    assert any(line.startswith("nanobind (missing): https://github.com/wjakob/nanobind.git v1.4.0") for line in lines)


def test_cache_directories_source_info_placeholders_and_mismatches(tmp_path):
    k = _kernel(tmp_path, GIT_STYLE, {"cmake/gamma.cmake": GAMMA})
    cache = tmp_path / "cache"
    (cache / "repo-alpha").mkdir(parents=True)
    (cache / "repo-alpha" / S.SOURCE_INFO).write_text(json.dumps({"repository": "x", "ref": SHA_B}))
    (cache / "Repo-Beta").mkdir()
    (cache / "Repo-Beta" / S.SOURCE_INFO).write_text(json.dumps({"ref": "v2.0.1"}))
    (cache / "repo-gamma").mkdir()
    (cache / "repo-gamma" / S.PLACEHOLDER_MARK).write_text("stand-in\n")
    r = S.kernel_sources(k, cache=str(cache))
    assert r["mismatched"] == ["repo-alpha"]  # the cache records another commit
    assert _dep(r, "Repo-Beta")["present"] and _dep(r, "Repo-Beta")["ref_matches"] is True
    assert r["placeholders"] == ["repo-gamma"] and not _dep(r, "repo-gamma")["present"]
    assert r["missing"] == [] and r["complete"] is False


def test_errors_name_the_file(tmp_path):
    k = _kernel(tmp_path, "FetchContent_Declare(repo-x GIT_REPOSITORY a\n")  # unbalanced
    with pytest.raises(S.SourcesError, match="CMakeLists.txt"):
        S.kernel_sources(k)
    with pytest.raises(S.LayoutError):
        S.kernel_sources(str(tmp_path))
    with pytest.raises(S.SourcesError, match="not a directory"):
        S.kernel_sources(_kernel(tmp_path, GIT_STYLE, name="k2"), cache=str(tmp_path / "nope"))


def test_module_through_ansible(tmp_path):
    k = _kernel(tmp_path, URL_STYLE)
    res = ansible_run.module("blackwell.sglang.sgl_kernel_sources",
                             {"src": k, "cache": str(tmp_path), "github_artifactory": "bad/host"})
    assert res.get("failed") and "github_artifactory must be a host name" in res["msg"], res


@pytest.mark.skipif(not have_bundle(), reason=SKIP_REASON)
@pytest.mark.parametrize("tarball,layout,expected,missing", [
    (ORIGINAL, "sgl-kernel",
     ["repo-cutlass", "repo-deepgemm", "repo-fmt", "repo-triton", "repo-flashinfer", "repo-flash-attention",
      "repo-mscclpp", "repo-flashmla", "json", "nanobind", "dlpack"], ["repo-triton", "repo-flash-attention"]),
    (CURRENT, "python/sglang/kernels/aot",
     ["repo-cutlass", "repo-fmt", "repo-triton", "repo-flashinfer", "repo-flash-attention", "repo-flashmla",
      "repo-flashmla-cutlass"], ["repo-triton", "repo-flash-attention"]),
])
def test_real_trees_against_the_bundle(tmp_path, tarball, layout, expected, missing):
    with tarfile.open(os.path.join(UPSTREAM, tarball)) as tf:
        tf.extractall(str(tmp_path / "src"))
    r = S.kernel_sources(str(tmp_path / "src" / "sglang"), cache=UPSTREAM, scratch=str(tmp_path / "scratch"))
    assert r["layout"] == layout
    assert _names(r) == expected
    assert r["missing"] == missing
    assert r["mismatched"] == ([] if tarball == ORIGINAL else ["repo-flashmla"])  # the bundle's FlashMLA is 9804b120
    with open(os.path.join(UPSTREAM, "manifest.json")) as f:
        manifest = json.load(f)
    declared = {fc["name"]: fc["variable"] for t in manifest["tarballs"] for fc in t["fetchcontent"]}
    for d in r["dependencies"]:
        if d["name"] in declared:
            assert d["variable"] == declared[d["name"]]  # exactly the manifest's FETCHCONTENT_SOURCE_DIR_<NAME>
