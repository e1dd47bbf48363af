# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.sglang contributors
# Apache License 2.0 (see LICENSE)
"""The FetchContent sources of an sgl-kernel tree, and where a source cache holds them (offline builds).

The kernel's CMake (``CMakeLists.txt`` and ``cmake/*.cmake``) declares its third-party trees with
``FetchContent_Declare``: until 2026-07-29 as ``GIT_REPOSITORY`` + ``GIT_TAG`` (then populated by git clone), later as
``URL https://${GITHUB_ARTIFACTORY}/<owner>/<repo>/archive/<sha>.tar.gz`` + ``URL_HASH`` (facts, sglang-sm120.md
sections 1.1 and 9). CMake skips the download of a dependency when ``FETCHCONTENT_SOURCE_DIR_<NAME>`` (``<NAME>`` the
declared name upper-cased, hyphens kept) points at a directory; ``FETCHCONTENT_FULLY_DISCONNECTED=ON`` forbids any
other download. A dependency that is itself a CMake sub-project (``add_subdirectory(${<name>_SOURCE_DIR} ...)``, e.g.
mscclpp) declares more (json, nanobind, dlpack): those are found by reading the sub-project's reachable CMake files
from the cache, which is why a complete list needs the cache.

Source cache layouts understood (``cache`` option):

* ``<cache>/manifest.json`` of the upstream bundle (``tarballs[]`` with ``file``, ``top_level_dir``, ``commit``,
  ``tag`` and ``fetchcontent[].name``): each name maps to its tarball.
* ``<cache>/<name>/``: an unpacked tree; an optional ``<cache>/<name>/.blackwell-source.json``
  (``{"repository": ..., "ref": ...}``) records what it is. A file ``.blackwell-placeholder`` in it marks a
  placeholder (an empty stand-in for a tree that configure reads nothing from): reported, never taken as the source.
* ``<cache>/<name>.tar.gz`` (or ``.tgz``/``.tar.xz``/``.tar``): a tarball with one top-level directory.

Everything here only reads files; nothing is downloaded or written.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import re
import tarfile

from ansible_collections.blackwell.sglang.plugins.module_utils import _fs
from ansible_collections.blackwell.sglang.plugins.module_utils._sgl_kernel_cmake import scan
from ansible_collections.blackwell.sglang.plugins.module_utils._sgl_kernel_tree import LayoutError, find_kernel_dir

# FetchContent_Declare keywords that take one value (the rest of the options are ignored here, but must not be
# mistaken for values). https://cmake.org/cmake/help/latest/module/FetchContent.html + ExternalProject options.
_ONE_VALUE = {
    "GIT_REPOSITORY", "GIT_TAG", "GIT_SHALLOW", "GIT_PROGRESS", "GIT_REMOTE_NAME", "GIT_SUBMODULES_RECURSE",
    "URL_HASH", "URL_MD5", "DOWNLOAD_NAME", "DOWNLOAD_NO_EXTRACT", "SOURCE_DIR", "BINARY_DIR", "SOURCE_SUBDIR",
    "SUBBUILD_DIR", "TLS_VERIFY", "TLS_CAINFO", "SVN_REPOSITORY", "SVN_REVISION", "HG_REPOSITORY", "HG_TAG",
    "DOWNLOAD_EXTRACT_TIMESTAMP", "EXCLUDE_FROM_ALL", "SYSTEM", "OVERRIDE_FIND_PACKAGE", "UPDATE_DISCONNECTED",
    "INACTIVITY_TIMEOUT", "TIMEOUT", "NETRC", "NETRC_FILE", "GIT_REMOTE_UPDATE_STRATEGY", "PREFIX", "TMP_DIR",
    "STAMP_DIR", "LOG_DIR", "DOWNLOAD_DIR", "INSTALL_DIR",
}
_MULTI_VALUE = {"URL", "GIT_SUBMODULES", "GIT_CONFIG", "PATCH_COMMAND", "UPDATE_COMMAND", "CONFIGURE_COMMAND",
                "BUILD_COMMAND", "INSTALL_COMMAND", "TEST_COMMAND", "HTTP_HEADER", "FIND_PACKAGE_ARGS", "CMAKE_ARGS"}
_KEYWORDS = _ONE_VALUE | _MULTI_VALUE
_HEX40 = re.compile(r"^[0-9a-fA-F]{40}$")
_ARCHIVE_REF = re.compile(r"/archive/(?:refs/(?:tags|heads)/)?([^/]+?)(?:\.tar\.gz|\.tgz|\.zip|\.tar\.xz|\.tar)$")
_GITHUB_ARCHIVE = re.compile(r"^https?://[^/]+/([^/]+)/([^/]+)/archive/")
_VAR = re.compile(r"\$\{([A-Za-z0-9_.+-]+)\}")
PLACEHOLDER_MARK = ".blackwell-placeholder"
SOURCE_INFO = ".blackwell-source.json"
_TAR_SUFFIXES = (".tar.gz", ".tgz", ".tar.xz", ".tar")
# A dependency whose CMake runs as a sub-project may write into its own source tree at build time (mscclpp's
# python bindings copy built .so files into <mscclpp>/python/...: upstream bundle MANIFEST.md); a configure step that
# file(WRITE)s below ${<name>_SOURCE_DIR} writes at configure time (flashmla.cmake rewrites csrc/utils.h on CUDA 13).
_WRITE_CMDS = ("file",)


class SourcesError(Exception):
    """A kernel tree or cache that cannot be read (message names the file)."""


def fetchcontent_variable(name):
    """``FETCHCONTENT_SOURCE_DIR_<NAME>`` for a declared name: upper-cased, every other character kept (CMake's
    ``string(TOUPPER)``; e.g. ``repo-flash-attention`` -> ``FETCHCONTENT_SOURCE_DIR_REPO-FLASH-ATTENTION``)."""
    return "FETCHCONTENT_SOURCE_DIR_" + name.upper()


def _words(cmd):
    return [text for text, _quoted in cmd.args]


def _expand(value, variables):
    """``${VAR}`` references replaced as CMake does (an unset variable expands to nothing); nested references are
    resolved up to 8 levels deep, so a self-referencing ``set(X "${X} ...")`` cannot loop."""
    for _level in range(8):
        if "${" not in value:
            break
        value = _VAR.sub(lambda m: variables.get(m.group(1), ""), value)
    return value


def _collect_sets(commands, variables):
    """``set(NAME value...)`` and ``option(NAME "doc" value)`` in file order (last wins; CACHE sets only when unset,
    as CMake does for a fresh cache)."""
    for cmd in commands:
        words = _words(cmd)
        if cmd.name == "set" and words:
            name, values = words[0], words[1:]
            cache = "CACHE" in values
            if cache:
                values = values[:values.index("CACHE")]
                if name in variables:
                    continue
            if "PARENT_SCOPE" in values:
                values = [v for v in values if v != "PARENT_SCOPE"]
            variables[name] = ";".join(_expand(v, variables) for v in values)
        elif cmd.name == "option" and len(words) >= 2:
            variables.setdefault(words[0], words[2] if len(words) > 2 else "OFF")


def _parse_declare(cmd, variables, rel, root_name=None):
    words = _words(cmd)
    if not words:
        raise SourcesError("%s:%d: FetchContent_Declare() without a name" % (rel, cmd.line))
    name = words[0]
    opts, key = {}, None
    for w in words[1:]:
        if w in _KEYWORDS:
            key = w
            opts.setdefault(key, [])
            continue
        if key is None:
            continue
        opts[key].append(_expand(w, variables))
        if key in _ONE_VALUE:
            key = None
    dep = {
        "name": name,
        "variable": fetchcontent_variable(name),
        "declared_in": "%s:%d" % (rel, cmd.line),
        "parent": root_name,
    }
    if "GIT_REPOSITORY" in opts:
        dep["repository"] = (opts["GIT_REPOSITORY"] or [""])[0]
        dep["ref"] = (opts.get("GIT_TAG") or [""])[0] or None
        dep["style"] = "git"
    if "URL" in opts:
        urls = opts["URL"]
        dep["url"] = urls[0] if urls else ""
        dep["url_hash"] = (opts.get("URL_HASH") or [None])[0]
        dep["style"] = "url"
        m = _GITHUB_ARCHIVE.match(dep["url"])
        if m and "repository" not in dep:
            dep["repository"] = "https://github.com/%s/%s" % (m.group(1), m.group(2))
        m = _ARCHIVE_REF.search(dep["url"])
        if m and not dep.get("ref"):
            dep["ref"] = m.group(1)
    if "style" not in dep:
        dep["style"] = "other"
    if opts.get("SOURCE_DIR"):
        dep["source_dir"] = opts["SOURCE_DIR"][0]
    return dep


def _read(path, rel):
    """A CMake file of the tree: refused (file and byte offset) when it is not UTF-8, never read with replacement."""
    try:
        return _fs.read_source(path, "CMake file")
    except _fs.NotUtf8 as e:
        raise SourcesError(str(e))
    except (IOError, OSError) as e:
        raise SourcesError("%s: cannot read: %s" % (rel, e))


def _scan_file(path, rel):
    try:
        return scan(_read(path, rel))
    except ValueError as e:
        raise SourcesError("%s: %s" % (rel, e))


def _kernel_files(kernel_dir):
    files = [os.path.join(kernel_dir, "CMakeLists.txt")]
    cmake_dir = os.path.join(kernel_dir, "cmake")
    if os.path.isdir(cmake_dir):
        files += sorted(os.path.join(cmake_dir, f) for f in os.listdir(cmake_dir) if f.endswith(".cmake"))
    return files


def _walk_kernel(kernel_dir, files, variables):
    """The kernel's CMake commands in execution order: ``CMakeLists.txt`` with every literal ``include(<x>.cmake)``
    inlined where it stands, then the ``cmake/*.cmake`` files nothing includes. Returns ``[(rel, cmd, used,
    conditional)]``: ``used`` is False for commands under an ``if()`` known to be false with the settings so far
    (option defaults, ``set()`` values, the caller's ``-D`` defines; e.g. an extension behind the ``sm120_only``
    patch's OFF option) and for files never included; ``conditional`` when a condition could not be evaluated
    (then the command counts as used). ``set()``/``option()`` of used commands update ``variables``."""
    out, seen = [], set()

    def walk(path, outer_used, outer_cond):
        seen.add(os.path.realpath(path))
        rel = os.path.relpath(path, kernel_dir)
        here = os.path.dirname(path)
        for cmd in _scan_file(path, rel):
            verdicts = [_truth(c, variables) for c in cmd.conditions]
            used = outer_used and not any(v is False for v in verdicts)
            conditional = outer_cond or any(v is None for v in verdicts)
            if used and cmd.name in ("set", "option"):
                _collect_sets([cmd], variables)
            out.append((rel, cmd, used, conditional))
            words = _words(cmd)
            if cmd.name == "include" and words and words[0].endswith(".cmake"):
                inc = _expand(words[0], dict(variables, CMAKE_CURRENT_LIST_DIR=here, CMAKE_CURRENT_SOURCE_DIR=here))
                inc = inc if os.path.isabs(inc) else os.path.join(here, inc)
                if os.path.isfile(inc) and os.path.realpath(inc) not in seen:
                    walk(inc, used, conditional)

    walk(files[0], True, False)
    for path in files[1:]:
        if os.path.realpath(path) not in seen:
            walk(path, False, False)
    return out


def _truth(cond, variables):
    """Evaluate a simple if() condition: ``VAR``, ``NOT VAR``, ``A AND B``, ``A OR B``. Anything else -> None."""
    toks = cond.replace("(", " ( ").replace(")", " ) ").split()
    if not toks or any(t in ("(", ")") for t in toks):
        return None

    def atom(tok):
        val = variables.get(tok, tok)
        if val.upper() in ("1", "ON", "YES", "TRUE", "Y"):
            return True
        if val.upper() in ("0", "OFF", "NO", "FALSE", "N", "IGNORE", "NOTFOUND", "") or val.upper().endswith("-NOTFOUND"):
            return False
        if tok in variables:
            return True
        return None

    result, op, neg = None, None, False
    for t in toks:
        if t == "NOT":
            neg = not neg
            continue
        if t in ("AND", "OR"):
            op = t
            continue
        v = atom(t)
        if v is None:
            return None
        v = (not v) if neg else v
        neg = False
        result = v if result is None else (result and v if op == "AND" else result or v)
    return result


def _subproject_declares(root, name, variables, seen_files):
    """FetchContent declarations reachable from ``<root>/CMakeLists.txt`` through literal add_subdirectory()/include()
    whose enclosing if() conditions are not known to be false (options take their defaults unless the parent set
    them). Returns ``[(dep, conditional)]``."""
    out = []
    local = dict(variables)

    def walk(path, rel_dir):
        real = os.path.realpath(path)
        if real in seen_files or not os.path.isfile(path):
            return
        seen_files.add(real)
        rel = os.path.relpath(path, root)
        cmds = _scan_file(path, "%s/%s" % (name, rel))
        here = os.path.dirname(path)
        for cmd in cmds:
            words = _words(cmd)
            if cmd.name in ("set", "option"):
                _collect_sets([cmd], local)
                continue
            verdicts = [_truth(c, local) for c in cmd.conditions]
            if any(v is False for v in verdicts):
                continue
            conditional = any(v is None for v in verdicts)
            if cmd.name == "fetchcontent_declare":
                out.append((_parse_declare(cmd, local, "%s/%s" % (name, rel), root_name=name), conditional))
            elif cmd.name == "add_subdirectory" and words and "${" not in words[0]:
                walk(os.path.join(here, words[0], "CMakeLists.txt"), rel_dir)
            elif cmd.name == "include" and words and words[0].endswith(".cmake"):
                inc = _expand(words[0], dict(local, PROJECT_SOURCE_DIR=root, CMAKE_CURRENT_LIST_DIR=here,
                                             CMAKE_CURRENT_SOURCE_DIR=here))
                if "${" not in inc:
                    walk(inc if os.path.isabs(inc) else os.path.join(here, inc), rel_dir)

    walk(os.path.join(root, "CMakeLists.txt"), "")
    return out


# ----------------------------------------------------------------------------------------------------------------
# The cache
# ----------------------------------------------------------------------------------------------------------------

class Cache(object):
    """Lookup of sources by FetchContent name in a cache directory (layouts: see the module docstring)."""

    def __init__(self, path):
        self.path = os.path.abspath(path)
        if not os.path.isdir(self.path):
            raise SourcesError("cache %s is not a directory" % self.path)
        self.bundle = {}
        manifest = os.path.join(self.path, "manifest.json")
        if os.path.isfile(manifest):
            try:
                data = _fs.load_json(manifest, "source bundle manifest")
                for t in data.get("tarballs", []):
                    for fc in t.get("fetchcontent") or []:
                        self.bundle.setdefault(fc["name"], t)
            except _fs.NotUtf8 as e:
                raise SourcesError(str(e))
            except (ValueError, KeyError, TypeError, AttributeError) as e:
                raise SourcesError("%s: not a source bundle manifest (tarballs[].fetchcontent[].name): %s" % (manifest, e))
        self._unpacked = {}

    def find(self, name):
        """``{"path", "kind": dir|tarball, "top": top-level dir in a tarball, "placeholder", "commit", "tag"}`` or
        None."""
        d = os.path.join(self.path, name)
        if os.path.isdir(d):
            info = {"path": d, "kind": "dir", "placeholder": os.path.exists(os.path.join(d, PLACEHOLDER_MARK))}
            meta = os.path.join(d, SOURCE_INFO)
            if os.path.isfile(meta):
                try:
                    m = _fs.load_json(meta, "source record")
                    info["commit"] = m.get("commit") or (m.get("ref") if _HEX40.match(m.get("ref") or "") else None)
                    info["tag"] = m.get("tag") or (None if _HEX40.match(m.get("ref") or "") else m.get("ref"))
                except _fs.NotUtf8 as e:
                    raise SourcesError(str(e))
                except (ValueError, AttributeError) as e:
                    raise SourcesError("%s: unreadable: %s" % (meta, e))
            return info
        for suffix in _TAR_SUFFIXES:
            t = os.path.join(self.path, name + suffix)
            if os.path.isfile(t):
                return {"path": t, "kind": "tarball", "top": None, "placeholder": False}
        t = self.bundle.get(name)
        if t:
            path = os.path.join(self.path, t["file"])
            if os.path.isfile(path):
                tag = t.get("tag")
                return {"path": path, "kind": "tarball", "top": (t.get("top_level_dir") or "").strip("/") or None,
                        "placeholder": False, "commit": t.get("commit"), "tag": tag}
        return None

    def tree(self, name, info, scratch):
        """A directory holding the unpacked source (tarballs are unpacked under ``scratch`` for reading only)."""
        if info["kind"] == "dir":
            return info["path"]
        if name in self._unpacked:
            return self._unpacked[name]
        dest = os.path.join(scratch, name)
        try:
            with tarfile.open(info["path"]) as tf:
                members = [m for m in tf.getmembers()
                           if (m.isfile() or m.isdir()) and not m.name.startswith("/") and ".." not in m.name.split("/")
                           and (m.name.endswith("CMakeLists.txt") or m.name.endswith(".cmake") or m.isdir())]
                tf.extractall(dest, members=members)  # CMake files only: enough to read the declarations
        except (tarfile.TarError, IOError, OSError) as e:
            raise SourcesError("%s: cannot read tarball: %s" % (info["path"], e))
        top = info.get("top")
        if not top:
            entries = [e for e in os.listdir(dest) if not e.startswith(".")]
            top = entries[0] if len(entries) == 1 else ""
        self._unpacked[name] = os.path.join(dest, top) if top else dest
        return self._unpacked[name]


def _ref_matches(dep, info):
    """False when the cache records a commit/tag that differs from the declared ref; True/None otherwise."""
    ref = dep.get("ref")
    if not ref:
        return None
    commit, tag = info.get("commit"), info.get("tag")
    if _HEX40.match(ref):
        if commit:
            return commit.lower() == ref.lower()
        return None
    if tag:
        return tag == ref
    if commit and info.get("kind") == "tarball" and not tag:
        return None
    return None


def _src_marker(name):
    return "\x00SRC:%s\x00" % name


_MARKER_RE = re.compile("^\x00SRC:([^\x00]+)\x00(/.*)?$")
_MARKER_ANY = re.compile("\x00SRC:([^\x00]+)\x00")


def _writes_into(commands, name, variables):
    """Whether the kernel's CMake writes below ``${name_SOURCE_DIR}`` (file(WRITE|APPEND|COPY ... ) at configure,
    also through variables) or builds it as a sub-project (add_subdirectory; its build may write into its source, as
    mscclpp's does)."""
    marker = _src_marker(name)
    for cmd in commands:
        words = [_expand(w, variables) for w in _words(cmd)]
        if cmd.name == "add_subdirectory" and words and words[0].startswith(marker):
            return "build"
        if cmd.name in _WRITE_CMDS and len(words) >= 2 and words[0] in ("WRITE", "APPEND", "COPY", "CONFIGURE"):
            target = words[1]
            if cmd.name == "file" and words[0] == "COPY":
                target = words[words.index("DESTINATION") + 1] if "DESTINATION" in words else ""
            if marker in target:
                return "configure"
    return None


def kernel_sources(src, cache=None, github_artifactory="github.com", scratch=None, defines=None):
    """List the FetchContent dependencies of the kernel tree at ``src`` (checkout root or kernel dir).

    :param cache: optional source-cache directory (see the module docstring).
    :param github_artifactory: value of the ``GITHUB_ARTIFACTORY`` cache variable for ``URL`` expansion.
    :param scratch: a writable directory for reading tarballs' CMake files (required with a tarball cache).
    :param defines: ``{NAME: value}`` given to CMake as ``-DNAME=value`` (they beat ``option()`` defaults).
    :returns: dict ``kernel_dir``, ``layout``, ``dependencies`` (list of dicts: ``name``, ``variable``,
        ``style`` git|url|other, ``repository``, ``ref``, ``url``, ``url_hash``, ``source_dir`` (declared SOURCE_DIR),
        ``declared_in`` ``file:line``, ``parent`` (the sub-project that declares it, or None), ``conditional``,
        ``used`` (False: declared in a file or branch the configure never runs, so not needed),
        ``writes_into`` (None|configure|build); with a cache also ``present``, ``placeholder``, ``ref_matches``,
        ``cache_path``, ``cache_kind``), ``missing`` / ``mismatched`` / ``placeholders`` (names), ``complete``.
    :raises SourcesError / LayoutError: unreadable tree, cache or CMake file.
    """
    kernel_dir, layout = find_kernel_dir(src)
    variables = dict(defines or {})
    variables.update({"GITHUB_ARTIFACTORY": github_artifactory, "CMAKE_CURRENT_LIST_DIR": kernel_dir,
                      "CMAKE_CURRENT_SOURCE_DIR": kernel_dir, "PROJECT_SOURCE_DIR": kernel_dir})
    files = _kernel_files(kernel_dir)
    if not os.path.isfile(files[0]):
        raise SourcesError("%s: not found (not a kernel tree?)" % files[0])
    # <name>_SOURCE_DIR of every declared name expands to a marker, so writes into a source tree and trees placed
    # inside another one (SOURCE_DIR ${other_SOURCE_DIR}/sub) are recognised through variables too
    for path in files:
        for cmd in _scan_file(path, os.path.relpath(path, kernel_dir)):
            if cmd.name == "fetchcontent_declare" and cmd.args:
                variables["%s_SOURCE_DIR" % cmd.args[0][0]] = _src_marker(cmd.args[0][0])
    all_cmds = _walk_kernel(kernel_dir, files, variables)
    cmds_only = [c for _r, c, used, _cond in all_cmds if used]
    deps, by_name = [], {}
    for rel, cmd, used, conditional in all_cmds:
        if cmd.name == "fetchcontent_declare":
            dep = _parse_declare(cmd, variables, rel)
            dep["conditional"] = conditional
            dep["used"] = used
            if dep["name"] not in by_name or (used and not by_name[dep["name"]]["used"]):
                if dep["name"] in by_name:  # an unused declaration seen first: the used one counts
                    deps.remove(by_name[dep["name"]])
                by_name[dep["name"]] = dep  # else the first declaration of a name wins (FetchContent semantics)
                deps.append(dep)
    for dep in deps:
        dep["writes_into"] = _writes_into(cmds_only, dep["name"], variables)
    # a dependency placed inside another (SOURCE_DIR ${other_SOURCE_DIR}/sub) makes the other one written into
    for dep in deps:
        m = _MARKER_RE.match(dep.get("source_dir") or "")
        if m and m.group(1) in by_name:
            dep["inside"] = {"name": m.group(1), "subdir": (m.group(2) or "/").lstrip("/")}
            by_name[m.group(1)]["writes_into"] = by_name[m.group(1)]["writes_into"] or "configure"
        if dep.get("source_dir"):
            dep["source_dir"] = _MARKER_ANY.sub(lambda mm: "${%s_SOURCE_DIR}" % mm.group(1), dep["source_dir"])

    result = {"kernel_dir": kernel_dir, "layout": layout, "dependencies": deps, "missing": [], "mismatched": [],
              "placeholders": [], "cache": None}
    if cache:
        c = Cache(cache)
        result["cache"] = c.path
        seen_files = set()
        queue = list(deps)
        while queue:
            dep = queue.pop(0)
            info = c.find(dep["name"])
            dep["present"] = bool(info) and not info["placeholder"]
            dep["placeholder"] = bool(info and info["placeholder"])
            dep["cache_path"] = info["path"] if info else None
            dep["cache_kind"] = info["kind"] if info else None
            dep["cache_top"] = info.get("top") if info else None
            dep["ref_matches"] = _ref_matches(dep, info) if info else None
            if not dep.get("used", True):
                continue  # never configured (e.g. behind the sm120_only option): not needed offline
            if not info:
                result["missing"].append(dep["name"])
                continue
            if dep["placeholder"]:
                result["placeholders"].append(dep["name"])
                continue
            if dep["ref_matches"] is False:
                result["mismatched"].append(dep["name"])
            if dep.get("writes_into") != "build":
                continue  # only sub-projects run their own CMake
            if info["kind"] == "tarball" and not scratch:
                raise SourcesError("a scratch directory is needed to read %s" % info["path"])
            root = c.tree(dep["name"], info, scratch or "")
            sub_vars = dict(variables)
            for nested, conditional in _subproject_declares(root, dep["name"], sub_vars, seen_files):
                if nested["name"] in by_name:
                    continue
                nested["conditional"] = conditional
                nested["used"] = True
                nested["writes_into"] = None
                by_name[nested["name"]] = nested
                deps.append(nested)
                queue.append(nested)
    for dep in deps:
        for key in ("repository", "ref", "url", "url_hash", "source_dir"):
            dep.setdefault(key, None)
    result["complete"] = bool(cache) and not (result["missing"] or result["mismatched"] or result["placeholders"])
    return result


def describe_missing(result):
    """One line per missing, mismatched or placeholder source: name, repository, ref (for error messages)."""
    lines = []
    for dep in result["dependencies"]:
        why = None
        if dep["name"] in result["missing"]:
            why = "missing"
        elif dep["name"] in result["mismatched"]:
            why = "cache holds another revision"
        elif dep["name"] in result["placeholders"]:
            why = "only a placeholder in the cache"
        if why:
            lines.append("%s (%s): %s %s%s, declared in %s" % (
                dep["name"], why, dep.get("repository") or dep.get("url") or "?", dep.get("ref") or "(no ref)",
                " [%s]" % dep["url_hash"] if dep.get("url_hash") else "", dep["declared_in"]))
    return lines


__all__ = ["kernel_sources", "describe_missing", "fetchcontent_variable", "Cache", "SourcesError", "LayoutError",
           "PLACEHOLDER_MARK", "SOURCE_INFO"]
