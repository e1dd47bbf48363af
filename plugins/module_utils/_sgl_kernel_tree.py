# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang contributors
# Apache-2.0 (see LICENSE)
"""SM120 source patches for an SGLang kernel tree (sgl-kernel), applied by content anchors.

The logic behind the ``blackwell.sglang.sgl_kernel_patch`` module; pure Python (standard library only), so it is
unit-tested without Ansible. Facts are from ``shared/domain/sglang-sm120.md`` (cited as "facts 1.x"/"facts 2")
and ``field-reports.md`` (B01-B07).

Patches (each is idempotent, recognised by content, never by line number):

``cmake_policy_guards`` (facts 1.2, B01)
    Wrap every unguarded ``cmake_policy(SET CMPxxxx ...)`` in ``if(POLICY CMPxxxx)``. Upstream sets CMP0169
    (CMake 3.30) and CMP0177 (3.31) unconditionally while declaring ``cmake_minimum_required(3.26)``, so CMake
    3.26-3.30 aborts at configure ("Policy ... is not known"). Not needed when the file sets no policy.
``cccl_include`` (facts 1.5, B03)
    After ``project(... CUDA ...)``, on CUDA >= 13 add ``<toolkit include>/cccl`` (found with ``find_path`` for
    ``cuda/std/utility``) to the include path of host (C/C++) translation units of this directory and its
    sub-projects. Harmless on CUDA 12 (the block does nothing). Not needed when the CMakeLists already handles
    CCCL (mentions ``include/cccl`` or ``CCCL::CCCL``).
``fa3_soft_fallback`` (facts 2, B06)
    ``python/sgl_kernel/flash_attn.py``: the eager ``from sgl_kernel import flash_ops`` with the bare ``except``
    that re-raises becomes a soft import (logs the original error, ``flash_ops = None``, ``FA3_AVAILABLE``),
    ``is_fa3_supported()`` returns False first thing when FA3 is unavailable (no CUDA query), and the entry points
    (``flash_attn_with_kvcache``, ``flash_attn_varlen_func``, ``get_scheduler_metadata`` when present) raise a
    clear RuntimeError at call time. Not needed when the module loads FA3 lazily (no module-level import).
``skip_fa3_build`` (optional; facts 1.7)
    Do not compile FA3 (its cubins are sm_90a only): remove the forced ``set(SGL_KERNEL_ENABLE_FA3 ON)`` (present
    up to 2026-06-08) and make the ``option(SGL_KERNEL_ENABLE_FA3 ...)`` default OFF (2026-06-17 on).
``drop_sparse_attn`` (needed while sgl-attn is a placeholder)
    Stop building sgl-attn's sparse FlashAttention (``flash_fwd_sparse_*_sm80.cu``, ``flash_sparse_api.cpp`` in the
    ``common_ops`` sources) and put the ``fwd_sparse`` / ``varlen_fwd_sparse`` registrations of
    ``csrc/common_extension.cc`` under ``#if 0``. Without the sources, the registrations leave
    ``flash::mha_fwd_sparse`` and ``flash::mha_varlen_fwd_sparse`` undefined in ``common_ops.abi3.so``, and Python
    loads extensions with ``RTLD_NOW``: ``import sgl_kernel`` fails. Only SGLang's ``dual_chunk_flash_attn``
    attention backend calls these ops (``sgl_kernel.sparse_flash_attn``); it then raises at call time
    (``torch.ops.sgl_kernel`` has no ``fwd_sparse``). Not needed when the tree registers neither op.
``sm120_only`` (optional; facts 1.6, 7)
    Keep only the target gencodes (default ``sm_120a``; plain ``sm_120`` lacks FP4 MMA) in
    ``SGL_KERNEL_CUDA_FLAGS`` and put the ``common_ops_sm90_build`` target behind an option that defaults OFF
    (SM120 loads ``sgl_kernel/sm100``).

Errors: :class:`PatchError` names the patch, the file and the anchor that was looked for. Planning never writes;
:func:`commit` writes only after every requested patch planned cleanly (all-or-nothing).
"""

from __future__ import annotations

import difflib
import os
import re
import shutil
import tempfile
import time

from ansible_collections.blackwell.sglang.plugins.module_utils import _fs
from ansible_collections.blackwell.sglang.plugins.module_utils import _sgl_kernel_cmake as cm

PATCHES = ("cmake_policy_guards", "cccl_include", "fa3_soft_fallback", "drop_sparse_attn", "skip_fa3_build",
           "sm120_only")
DEFAULT_PATCHES = ("cmake_policy_guards", "cccl_include", "fa3_soft_fallback")
OPTIONAL_PATCHES = ("drop_sparse_attn", "skip_fa3_build", "sm120_only")
MARK = "blackwell.sglang"

LAYOUT_LEGACY = "sgl-kernel"             # <checkout>/sgl-kernel (until 2026-07-29)
LAYOUT_AOT = "python/sglang/kernels/aot"  # <checkout>/python/sglang/kernels/aot (from c32c4ef79c, 2026-07-29)
LAYOUTS = (LAYOUT_AOT, LAYOUT_LEGACY)

CMAKE_FILE = "CMakeLists.txt"
FLASH_ATTN_FILE = os.path.join("python", "sgl_kernel", "flash_attn.py")
SPARSE_OPS = ("fwd_sparse", "varlen_fwd_sparse")
FA3_ENTRY_POINTS = ("flash_attn_with_kvcache", "flash_attn_varlen_func", "get_scheduler_metadata")
SM90_COMMON_OPS = "common_ops_sm90_build"
SM90_OPTION = "SGL_KERNEL_BUILD_SM90_COMMON_OPS"
_ARCH_RE = re.compile(r"^sm_[0-9]{2,3}[af]?$")


class PatchError(Exception):
    """A requested patch cannot be applied; nothing was written.

    Attributes ``patch``, ``path`` and ``looked_for`` say which patch, which file and what anchor was missing.
    """

    def __init__(self, patch, path, looked_for, hint=None):
        self.patch = patch
        self.path = path
        self.looked_for = looked_for
        self.hint = hint
        msg = "%s: %s: could not find %s" % (patch, path, looked_for)
        if hint:
            msg += " (%s)" % hint
        super(PatchError, self).__init__(msg)


class LayoutError(Exception):
    """``src`` is neither an SGLang checkout with a kernel tree nor a kernel directory."""


# --------------------------------------------------------------------------------------------------------------
# Layout
# --------------------------------------------------------------------------------------------------------------

def _is_kernel_dir(path):
    return os.path.isfile(os.path.join(path, CMAKE_FILE)) and os.path.isdir(os.path.join(path, "python", "sgl_kernel"))


def find_kernel_dir(src):
    """Locate the kernel tree.

    ``src`` may be the checkout root (``sgl-kernel/`` or, from 2026-07-29, ``python/sglang/kernels/aot/``; facts
    1.1) or the kernel directory itself (it has ``CMakeLists.txt`` and ``python/sgl_kernel/``).

    :returns: ``(kernel_dir, layout)``; layout is ``"sgl-kernel"`` or ``"python/sglang/kernels/aot"``.
    :raises LayoutError: when neither shape is found (the message lists the paths tried).
    """
    src = os.path.abspath(src)
    if not os.path.isdir(src):
        raise LayoutError("src %s is not a directory" % src)
    if _is_kernel_dir(src):
        norm = src.replace(os.sep, "/")
        return src, (LAYOUT_AOT if norm.endswith("/" + LAYOUT_AOT) else LAYOUT_LEGACY)
    for layout in LAYOUTS:
        cand = os.path.join(src, *layout.split("/"))
        if _is_kernel_dir(cand):
            return cand, layout
    raise LayoutError(
        "no SGLang kernel tree under %s: looked for %s (a directory with %s and python/sgl_kernel/)"
        % (src, " and ".join("%s/%s" % (layout, CMAKE_FILE) for layout in LAYOUTS), CMAKE_FILE))


# --------------------------------------------------------------------------------------------------------------
# File handling (newline style preserved)
# --------------------------------------------------------------------------------------------------------------

class SourceFile(object):
    """A text file read with its newline style; edits work on ``\\n`` text and are written back in that style."""

    def __init__(self, path, rel):
        self.path = path
        self.rel = rel
        with open(path, "rb") as fh:
            raw = fh.read()
        self.raw = raw
        # a source to patch: bytes that are not UTF-8 are refused (file and offset), never replaced
        text = _fs.decode_source(raw, path, "source file to patch")
        self.newline = "\r\n" if "\r\n" in text else "\n"
        self.original = text.replace("\r\n", "\n")
        self.text = self.original

    @property
    def changed(self):
        return self.text != self.original

    def encoded(self):
        return self.text.replace("\n", self.newline).encode("utf-8")


def _splice(text, edits):
    """Apply non-overlapping ``(start, end, replacement)`` edits."""
    for start, end, rep in sorted(edits, key=lambda e: e[0], reverse=True):
        text = text[:start] + rep + text[end:]
    return text


# --------------------------------------------------------------------------------------------------------------
# CMake patches. Each returns "applied" (text changed), "already_applied" or "not_needed", or raises PatchError.
# --------------------------------------------------------------------------------------------------------------

def _norm(cond):
    return " ".join(cond.replace("(", " ").replace(")", " ").split()).upper()


def patch_cmake_policy_guards(f):
    cmds = cm.scan(f.text)
    policies = [c for c in cmds if c.name == "cmake_policy" and len(c.words) >= 2 and c.words[0].upper() == "SET"]
    if not policies:
        return "not_needed", "no cmake_policy(SET ...) in the file"
    edits = []
    names = []
    for c in policies:
        pol = c.words[1].upper()
        if any(_norm(cond) == "POLICY " + pol for cond in c.conditions):
            continue
        ls, le = cm.line_bounds(f.text, c.start, c.end)
        ind = cm.indent_at(f.text, c.start)
        body = f.text[ls:le].rstrip("\n")
        inner = "\n".join(("  " + line if line.strip() else line) for line in body.split("\n"))
        rep = "%sif(POLICY %s)  # %s: cmake_policy_guards (a CMake that does not know %s skips it)\n%s\n%sendif()\n" % (
            ind, pol, MARK, pol, inner, ind)
        edits.append((ls, le, rep))
        names.append(pol)
    if not edits:
        return "already_applied" if MARK in f.text else "not_needed", "every policy is guarded"
    f.text = _splice(f.text, edits)
    return "applied", "guarded %s" % ", ".join(names)


_CCCL_BEGIN = "# >>> %s: cccl_include" % MARK
_CCCL_END = "# <<< %s: cccl_include" % MARK
_CCCL_BLOCK = """%(begin)s
# CUDA 13 (CCCL 3) keeps cuda/, cub/ and thrust/ under <toolkit>/include/cccl. nvcc adds that directory itself,
# host-compiled C/C++ translation units do not ("cuda/std/utility: No such file"). Added by the deployment tool.
if(CMAKE_CUDA_COMPILER_VERSION VERSION_GREATER_EQUAL 13.0)
  find_path(SGL_KERNEL_CCCL_INCLUDE_DIR NAMES cuda/std/utility
    HINTS ${CMAKE_CUDA_TOOLKIT_INCLUDE_DIRECTORIES} PATH_SUFFIXES cccl NO_DEFAULT_PATH)
  if(SGL_KERNEL_CCCL_INCLUDE_DIR)
    include_directories(SYSTEM "$<$<COMPILE_LANGUAGE:C,CXX>:${SGL_KERNEL_CCCL_INCLUDE_DIR}>")
  endif()
endif()
%(end)s
""" % {"begin": _CCCL_BEGIN, "end": _CCCL_END}


def _check_block(patch, f, begin, end, block):
    """A file that carries a marker must carry the whole block between both markers (a half-patched file whose begin
    marker survived but whose block is gone must not count as applied)."""
    has_begin, has_end = begin in f.text, end in f.text
    if not (has_begin or has_end):
        return False
    if not (has_begin and has_end and block.rstrip("\n") in f.text):
        raise PatchError(patch, f.rel, "the complete block between %r and %r" % (begin, end),
                         "the file is half-patched (a marker without its block, or an edited block): restore it "
                         "from the source and run again")
    return True


def patch_cccl_include(f):
    if _check_block("cccl_include", f, _CCCL_BEGIN, _CCCL_END, _CCCL_BLOCK):
        return "already_applied", "CCCL include block present"
    cmds = cm.scan(f.text)
    handles = [c for c in cmds if re.search(r"/cccl\b|CCCL::CCCL|cuda/std/utility", c.raw_args)]
    if handles:
        return "not_needed", "the CMakeLists already handles CCCL (line %d)" % handles[0].line
    project = [c for c in cmds if c.name == "project" and "CUDA" in [w.upper() for w in c.words]]
    if not project:
        raise PatchError("cccl_include", f.rel, "a project(... CUDA ...) command",
                         "the CCCL block must follow the command that enables CUDA")
    ls, le = cm.line_bounds(f.text, project[0].start, project[0].end)
    f.text = f.text[:le] + "\n" + _CCCL_BLOCK + f.text[le:]
    return "applied", "CCCL include block after project() (line %d)" % project[0].line


def _fa3_option_default(cmds):
    for c in cmds:
        if c.name == "option" and c.words and c.words[0] == "SGL_KERNEL_ENABLE_FA3":
            return c
    return None


def patch_skip_fa3_build(f):
    cmds = cm.scan(f.text)
    opt = _fa3_option_default(cmds)
    forced = [c for c in cmds if c.name == "set" and len(c.words) >= 2 and c.words[0] == "SGL_KERNEL_ENABLE_FA3"
              and c.words[1].upper() in ("ON", "TRUE", "1", "YES") and "CACHE" not in c.words]
    if opt is None and not forced:
        raise PatchError("skip_fa3_build", f.rel, "option(SGL_KERNEL_ENABLE_FA3 ...) or set(SGL_KERNEL_ENABLE_FA3 ON)",
                         "the FA3 switch is gone; check the kernel tree revision")
    edits = []
    for c in forced:
        ls, le = cm.line_bounds(f.text, c.start, c.end)
        ind = cm.indent_at(f.text, c.start)
        body = f.text[ls:le].strip()
        edits.append((ls, le, "%s# %s: skip_fa3_build removed the forced FA3 switch: %s\n" % (ind, MARK, body)))
    if opt is not None:
        words = opt.words
        default = words[2] if len(words) > 2 else "OFF"
        if default.upper() not in ("OFF", "FALSE", "0", "NO"):
            ls, le = cm.line_bounds(f.text, opt.start, opt.end)
            ind = cm.indent_at(f.text, opt.start)
            doc = words[1] if len(words) > 1 else "Enable FA3"
            edits.append((ls, le, '%s# %s: skip_fa3_build (FA3 cubins are sm_90a only) was: %s\n%soption(SGL_KERNEL_ENABLE_FA3 "%s" OFF)\n'
                          % (ind, MARK, f.text[ls:le].strip(), ind, doc)))
    if not edits:
        if "%s: skip_fa3_build" % MARK in f.text:
            return "already_applied", "FA3 is off by default and not forced"
        return "not_needed", "FA3 is off by default and not forced"
    f.text = _splice(f.text, edits)
    return "applied", "FA3 no longer forced on; option default OFF"


def _flag_lists(cmds, var="SGL_KERNEL_CUDA_FLAGS"):
    out = []
    for c in cmds:
        w = c.words
        if c.name == "set" and w and w[0] == var:
            out.append(c)
        elif c.name == "list" and len(w) >= 2 and w[0].upper() in ("APPEND", "PREPEND") and w[1] == var:
            out.append(c)
    return out


def _gencode(arch):
    """``sm_121a`` -> ``-gencode=arch=compute_121a,code=sm_121a``."""
    return "-gencode=arch=compute_%s,code=%s" % (arch[3:], arch)


def _in_family(code):
    """A gencode of the SM12x family (sm_120a, sm_121a, sm_120f): an extension compiling for one of them is meant to
    run on the family, so it gets every target of the family and loses the rest."""
    return re.match(r"^sm_12[0-9][af]?$", code) is not None


def _host_dependent(cmd):
    """The command only runs on some build hosts: upstream adds sm_121a (and sm_110a, sm_101a, sm_87) only inside
    ``if (CMAKE_SYSTEM_PROCESSOR STREQUAL "aarch64")``, so an x86_64 host never compiles it."""
    return any("SYSTEM_PROCESSOR" in cond.upper() for cond in cmd.conditions)


def _block_end(cmds, cmd):
    """Offset just past the ``endif()`` that closes the outermost ``if()`` around ``cmd`` (its end when top-level)."""
    depth = len(cmd.conditions)
    if depth == 0:
        return cmd.end
    started = False
    for c in cmds:
        if c is cmd:
            started = True
            continue
        if not started:
            continue
        if c.name == "if":
            depth += 1
        elif c.name == "endif":
            depth -= 1
            if depth == 0:
                return c.end
    return cmd.end


def _missing_targets(var_cmds, target_archs):
    """Targets a flag list does not compile on every build host: absent, or only under a processor condition."""
    everywhere = cm.gencodes_in([c.raw_args for c in var_cmds if not _host_dependent(c)])
    return [a for a in target_archs if a not in everywhere]


def patch_sm120_only(f, target_archs=("sm_120a",)):
    cmds = cm.scan(f.text)
    lists = _flag_lists(cmds)
    all_codes = cm.gencodes_in([c.raw_args for c in lists])
    if not any(code in target_archs or _in_family(code) for code in all_codes):
        raise PatchError("sm120_only", f.rel, "-gencode=arch=compute_%s,code=%s in SGL_KERNEL_CUDA_FLAGS"
                         % (target_archs[0][3:], target_archs[0]),
                         "the tree compiles for no SM12x arch; refusing to drop the other gencodes")
    # every other per-extension flag list (e.g. INFLLM_FLASH_CUDA_FLAGS from 2026-08) that also compiles for the
    # family: its off-target gencodes go too and its missing targets are added (a list with no family gencode is
    # left alone: see the includes below)
    by_var = {"SGL_KERNEL_CUDA_FLAGS": lists}
    for c in cmds:
        w = c.words
        if "-gencode" not in c.raw_args or not w:
            continue
        if c.name == "set" and w[0] != "SGL_KERNEL_CUDA_FLAGS":
            by_var.setdefault(w[0], []).append(c)
        elif (c.name == "list" and len(w) >= 2 and w[0].upper() in ("APPEND", "PREPEND")
              and w[1] != "SGL_KERNEL_CUDA_FLAGS"):
            by_var.setdefault(w[1], []).append(c)
    on_target = {}
    for var, var_cmds in by_var.items():
        codes = cm.gencodes_in([c.raw_args for c in var_cmds])
        if var == "SGL_KERNEL_CUDA_FLAGS" or any(code in target_archs or _in_family(code) for code in codes):
            on_target[var] = var_cmds
    lists = [c for var_cmds in on_target.values() for c in var_cmds]
    edits = []
    dropped = []
    added = []
    # targets the tree lacks on this build host: appended once after the list's last change, guarded by IN_LIST so
    # that a host where upstream adds them already (aarch64) does not compile them twice
    for var, var_cmds in sorted(on_target.items()):
        missing = _missing_targets(var_cmds, target_archs)
        if not missing:
            continue
        modifiers = [c for c in cmds if (c.name == "set" and c.words and c.words[0] == var)
                     or (c.name == "list" and len(c.words) >= 2 and c.words[1] == var)]
        last = max(modifiers or var_cmds, key=lambda c: c.start)
        end = _block_end(cmds, last)
        le = cm.line_bounds(f.text, end - 1, end)[1]
        ind = cm.indent_at(f.text, cmds[0].start) if cmds else ""
        block = ["%s# >>> %s: sm120_only (every target arch on any build host: upstream compiles %s only on "
                 "some build hosts or not at all)\n" % (ind, MARK, ", ".join(missing))]
        for arch in missing:
            block.append('%sif(NOT "%s" IN_LIST %s)\n%s  list(APPEND %s "%s")\n%sendif()\n'
                         % (ind, _gencode(arch), var, ind, var, _gencode(arch), ind))
        block.append("%s# <<< %s: sm120_only\n" % (ind, MARK))
        prefix = "" if f.text[:le].endswith("\n") else "\n"
        edits.append((le, le, prefix + "".join(block)))
        added.extend("%s (%s)" % (a, var) if var != "SGL_KERNEL_CUDA_FLAGS" else a for a in missing)
    for c in lists:
        # find gencode tokens inside the command text, line by line
        seg_start = c.start
        seg = f.text[seg_start:c.end]
        for m in re.finditer(r'"?(-gencode[= ]arch=compute_[0-9a-z]+,code=\[?[a-z_0-9,]+\]?)"?', seg):
            codes = cm.gencodes_in([m.group(1)])
            if any(code in target_archs for code in codes):
                continue
            a, b = seg_start + m.start(), seg_start + m.end()
            ls, le = cm.line_bounds(f.text, a, b)
            if "#" in f.text[ls:a]:
                continue  # commented out already (by us or by hand)
            rest = (f.text[ls:a] + f.text[b:le]).strip()
            if rest == "":
                ind = cm.indent_at(f.text, a)
                edits.append((ls, le, "%s# %s  # %s: sm120_only\n" % (ind, f.text[a:b], MARK)))
            else:
                # shares its line with other arguments: drop just the token (a comment would swallow the rest)
                edits.append((a, b, ""))
            dropped.extend(codes)
    # the sm90 common_ops target: wrap runs of consecutive commands naming it
    runs = []
    cur = []
    for c in cmds:
        if SM90_COMMON_OPS in c.words:
            guarded = any(_norm(cond) == SM90_OPTION for cond in c.conditions)
            if guarded:
                continue
            cur.append(c)
        elif cur:
            runs.append(cur)
            cur = []
    if cur:
        runs.append(cur)
    option_added = ("option(%s" % SM90_OPTION) in f.text
    for run in runs:
        ls = cm.line_bounds(f.text, run[0].start, run[0].start)[0]
        le = cm.line_bounds(f.text, run[-1].end - 1, run[-1].end)[1]
        ind = cm.indent_at(f.text, run[0].start)
        body = f.text[ls:le]
        inner = "".join(("  " + line if line.strip() else line) for line in body.splitlines(True))
        head = "%s# >>> %s: sm120_only (SM120 loads sgl_kernel/sm100; the sm90 common_ops build is optional)\n" % (ind, MARK)
        if not option_added:
            head += '%soption(%s "Also build the sm90 (-use_fast_math) common_ops variant" OFF)\n' % (ind, SM90_OPTION)
            option_added = True
        rep = "%s%sif(%s)\n%s%sendif()\n%s# <<< %s: sm120_only\n" % (head, ind, SM90_OPTION, inner, ind, ind, MARK)
        edits.append((ls, le, rep))
    # included cmake/*.cmake extensions (FlashMLA) whose gencodes are all off-target: their kernels can never run on
    # the target, so the include goes behind an OFF option (the Python side imports them softly: flash_mla.py)
    skipped_ext = []
    for c in cmds:
        if c.name != "include" or not c.words or not c.words[0].endswith(".cmake"):
            continue
        inc = c.words[0].replace("${CMAKE_CURRENT_LIST_DIR}", "").replace("${CMAKE_CURRENT_SOURCE_DIR}", "").lstrip("/")
        inc_path = os.path.join(os.path.dirname(f.path), inc)
        if "${" in inc or not os.path.isfile(inc_path):
            continue
        stem = os.path.splitext(os.path.basename(inc))[0]
        option = "SGL_KERNEL_BUILD_%s" % re.sub(r"[^A-Z0-9]", "_", stem.upper())
        if any(option in _norm(cond) for cond in c.conditions):
            continue
        inc_cmds = cm.scan(_fs.read_source(inc_path, "CMake file"))
        codes = cm.gencodes_in([x.raw_args for x in inc_cmds if "-gencode" in x.raw_args])
        if not codes or any(code in target_archs for code in codes):
            continue
        ls = cm.line_bounds(f.text, c.start, c.start)[0]
        le = cm.line_bounds(f.text, c.end - 1, c.end)[1]
        ind = cm.indent_at(f.text, c.start)
        body = f.text[ls:le]
        edits.append((ls, le, (
            "%(ind)s# >>> %(mark)s: sm120_only (%(inc)s compiles only for %(codes)s, never for %(targets)s)\n"
            '%(ind)soption(%(opt)s "Build the %(stem)s extension (its kernels cannot run on %(targets)s)" OFF)\n'
            "%(ind)sif(%(opt)s)\n%(body)s%(ind)sendif()\n%(ind)s# <<< %(mark)s: sm120_only\n") % dict(
                ind=ind, mark=MARK, inc=os.path.basename(inc), codes=", ".join(sorted(set(codes))),
                targets=", ".join(target_archs), opt=option, stem=stem,
                body="".join(("  " + line if line.strip() else line) for line in body.splitlines(True)))))
        skipped_ext.append("%s (%s)" % (os.path.basename(inc), ", ".join(sorted(set(codes)))))
    if not edits:
        if "%s: sm120_only" % MARK in f.text:
            return "already_applied", "only %s left" % ", ".join(target_archs)
        return "not_needed", "only %s in SGL_KERNEL_CUDA_FLAGS and no sm90 common_ops target" % ", ".join(target_archs)
    f.text = _splice(f.text, edits)
    detail = []
    if added:
        detail.append("added gencodes %s" % ", ".join(added))
    if dropped:
        detail.append("dropped gencodes %s" % ", ".join(sorted(set(dropped))))
    if runs:
        detail.append("%s behind %s=OFF" % (SM90_COMMON_OPS, SM90_OPTION))
    if skipped_ext:
        detail.append("not built for %s: %s" % (", ".join(target_archs), ", ".join(skipped_ext)))
    return "applied", "; ".join(detail)


# --------------------------------------------------------------------------------------------------------------
# drop_sparse_attn: sgl-attn's sparse FlashAttention out of common_ops (CMakeLists.txt + csrc/common_extension.cc)
# --------------------------------------------------------------------------------------------------------------

_SPARSE_SRC_RE = re.compile(r"flash_fwd_sparse_[A-Za-z0-9_]*\.cu|flash_sparse_api\.cpp")
_SPARSE_TAG = "%s: drop_sparse_attn" % MARK
_SPARSE_IF = "#if 0  // >>> %s (sgl-attn's sparse FlashAttention is not built)" % _SPARSE_TAG
_SPARSE_ENDIF = "#endif  // <<< %s" % _SPARSE_TAG


def _statement_end(text, start):
    """Offset just past the ``;`` that ends the C++ statement starting at ``start`` (strings and parentheses
    respected), or -1."""
    depth = 0
    i, n = start, len(text)
    while i < n:
        c = text[i]
        if c == '"':
            i += 1
            while i < n and text[i] != '"':
                i += 2 if text[i] == "\\" else 1
        elif c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif c == ";" and depth == 0:
            return i + 1
        i += 1
    return -1


def _sparse_registrations(text):
    """``(name, line_start, line_end)`` of every ``m.def("<sparse op>(...")`` / ``m.impl("<sparse op>", ...)``
    statement that is not already under the patch's ``#if 0``."""
    guarded = []
    for m in re.finditer(re.escape(_SPARSE_IF) + r".*?" + re.escape(_SPARSE_ENDIF), text, re.S):
        guarded.append((m.start(), m.end()))
    out = []
    for m in re.finditer(r'\bm\.(?:def|impl)\(\s*"(%s)\b' % "|".join(SPARSE_OPS), text):
        if any(a <= m.start() < b for a, b in guarded):
            continue
        end = _statement_end(text, m.start())
        if end < 0:
            continue
        ls = cm.line_bounds(text, m.start(), m.start())[0]
        le = cm.line_bounds(text, end - 1, end)[1]
        out.append((m.group(1), ls, le))
    return out


def patch_drop_sparse_attn_cmake(f):
    edits = []
    for m in _SPARSE_SRC_RE.finditer(f.text):
        ls, le = cm.line_bounds(f.text, m.start(), m.end())
        line = f.text[ls:le]
        if line.lstrip().startswith("#"):
            continue
        ind = re.match(r"[ \t]*", line).group(0)
        if any(e[0] == ls for e in edits):
            continue
        edits.append((ls, le, "%s# %s  # %s\n" % (ind, line.strip(), _SPARSE_TAG)))
    if not edits:
        return ("already_applied" if _SPARSE_TAG in f.text else "not_needed"), "no sparse FlashAttention source"
    f.text = _splice(f.text, edits)
    return "applied", "%d sparse FlashAttention source(s) out of the build" % len(edits)


def patch_drop_sparse_attn_extension(f):
    regs = _sparse_registrations(f.text)
    if not regs:
        return ("already_applied" if _SPARSE_TAG in f.text else "not_needed"), "no sparse op registered"
    # consecutive registrations (the def/impl pairs, with the comments and blank lines between) share one #if 0
    blocks = []
    for _name, ls, le in sorted(regs, key=lambda r: r[1]):
        if blocks and f.text[blocks[-1][1]:ls].strip() == "":
            blocks[-1][1] = le
        else:
            blocks.append([ls, le])
    edits = [(ls, le, "%s\n%s%s\n" % (_SPARSE_IF, f.text[ls:le], _SPARSE_ENDIF)) for ls, le in blocks]
    f.text = _splice(f.text, edits)
    return "applied", "unregistered %s" % ", ".join(sorted(set(r[0] for r in regs)))


def patch_drop_sparse_attn(files):
    """The sources out of the CMakeLists and the registrations out of every extension source that has them (at both
    pins: ``csrc/common_extension.cc``), so that neither half is left without the other."""
    results = [patch_drop_sparse_attn_cmake(files["cmake"])]
    results += [patch_drop_sparse_attn_extension(f) for key, f in sorted(files.items()) if key.startswith("ext:")]
    if any(st == "applied" for st, _d in results):
        return "applied", "; ".join(d for st, d in results if st == "applied")
    if any(st == "already_applied" for st, _d in results):
        return "already_applied", "sparse FlashAttention neither built nor registered"
    return "not_needed", "the tree neither builds nor registers sparse FlashAttention"


# --------------------------------------------------------------------------------------------------------------
# flash_attn.py: FA3 soft fallback (facts 2)
# --------------------------------------------------------------------------------------------------------------

_FA3_BEGIN = "# >>> %s: fa3_soft_fallback" % MARK
_FA3_END = "# <<< %s: fa3_soft_fallback" % MARK
_FA3_GUARD_TAG = "# %s: fa3_soft_fallback" % MARK
_IMPORT_LINE_RE = re.compile(r"^[ \t]+from[ \t]+(?:sgl_kernel|\.)[ \t]+import[ \t]+flash_ops\b[^\n]*$")
_TOP_IMPORT_RE = re.compile(r"^from[ \t]+(?:sgl_kernel|\.)[ \t]+import[ \t]+flash_ops\b[^\n]*$", re.M)

_FA3_BLOCK = '''%(begin)s
# FA3 (flash_ops) is compiled for sm_90a only and may be absent or fail to load (not built, torch ABI mismatch).
# Importing this module must still work: the error is logged, FA3 is reported unsupported and the entry points
# raise at call time. Added by the deployment tool.
try:
    from sgl_kernel import flash_ops
    _FA3_IMPORT_ERROR = None
except Exception as _fa3_exc:  # noqa: BLE001 - any load failure only disables FA3
    flash_ops = None
    _FA3_IMPORT_ERROR = _fa3_exc
    import logging as _fa3_logging

    _fa3_logging.getLogger(__name__).warning(
        "sgl_kernel FA3 extension (flash_ops) unavailable, FA3 disabled: %%r", _fa3_exc
    )
FA3_AVAILABLE = flash_ops is not None


def _require_fa3(name):
    if not FA3_AVAILABLE:
        raise RuntimeError(
            "sgl_kernel.flash_attn.%%s needs the FA3 extension sgl_kernel.flash_ops, which is not available "
            "(%%r); FA3 runs only on SM80-SM90, use another attention backend" %% (name, _FA3_IMPORT_ERROR)
        )


%(end)s
''' % {"begin": _FA3_BEGIN, "end": _FA3_END}


def _find_eager_import(lines):
    """Return (start, end) line indexes of the module-level ``try: from sgl_kernel import flash_ops / except`` block."""
    for i, line in enumerate(lines):
        if not re.match(r"^try[ \t]*:[ \t]*(#.*)?$", line):
            continue
        j = i + 1
        body = []
        while j < len(lines) and (lines[j].startswith((" ", "\t")) or not lines[j].strip()):
            body.append(lines[j])
            j += 1
        if not any(_IMPORT_LINE_RE.match(b) for b in body):
            continue
        if j >= len(lines) or not re.match(r"^except\b[^\n]*:[ \t]*(#.*)?$", lines[j]):
            return i, None
        k = j + 1
        while k < len(lines) and (lines[k].startswith((" ", "\t")) or not lines[k].strip()):
            k += 1
        while k > j + 1 and not lines[k - 1].strip():
            k -= 1
        return i, k
    return None, None


def _def_body_insert_point(text, name):
    """Offset where a guard goes in module-level ``def name(...)`` (after the docstring) and the body indent."""
    m = re.search(r"^def[ \t]+%s[ \t]*\(" % re.escape(name), text, re.M)
    if not m:
        return None, None, None
    i = m.end()
    depth = 1
    n = len(text)
    quote = None
    while i < n:
        c = text[i]
        if quote:
            if c == "\\":
                i += 2
                continue
            if c == quote:
                quote = None
        elif c in "\"'":
            quote = c
        elif c == "#":
            j = text.find("\n", i)
            i = n if j < 0 else j
            continue
        elif c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif c == ":" and depth == 0:
            break
        i += 1
    eol = text.find("\n", i)
    pos = n if eol < 0 else eol + 1
    # first statement line
    m2 = re.compile(r"([ \t]*)(\S[^\n]*)").search(text, pos)
    if not m2:
        return None, None, None
    indent = m2.group(1)
    stmt_start = m2.start()
    first = m2.group(2)
    dm = re.match(r'[rRuUbB]?("""|\'\'\')', first)
    if dm:
        q = dm.group(1)
        close = text.find(q, m2.start(2) + dm.end())
        if close >= 0:
            eol = text.find("\n", close + 3)
            return (n if eol < 0 else eol + 1), indent, m.start()
    dm = re.match(r'[rRuUbB]?("|\')', first)
    if dm and first.rstrip().endswith(dm.group(1)) and len(first.strip()) > 1:
        eol = text.find("\n", m2.start(2))
        return (n if eol < 0 else eol + 1), indent, m.start()
    return stmt_start, indent, m.start()


def _function_region(text, def_start):
    nxt = re.compile(r"^(?:def|class|@)[^\n]*", re.M).search(text, def_start + 1)
    return text[def_start:nxt.start() if nxt else len(text)]


def patch_fa3_soft_fallback(f):
    text = f.text
    lines = text.split("\n")
    has_block = _check_block("fa3_soft_fallback", f, _FA3_BEGIN, _FA3_END, _FA3_BLOCK)
    if not has_block:
        start, end = _find_eager_import(lines)
        bare = _TOP_IMPORT_RE.search(text)
        if start is None and bare is None:
            if re.search(r"\bflash_ops\b", text):
                return "not_needed", "flash_ops is loaded lazily (no module-level import)"
            raise PatchError("fa3_soft_fallback", f.rel, "a module-level 'from sgl_kernel import flash_ops'",
                             "the file no longer mentions flash_ops")
        if start is not None and end is None:
            raise PatchError("fa3_soft_fallback", f.rel,
                             "the 'except:' clause right after 'try: from sgl_kernel import flash_ops'")
        if start is not None:
            except_body = "\n".join(lines[start:end])
            if "raise" not in except_body:
                return "not_needed", "the flash_ops import is already soft (its except clause does not raise)"
            new_lines = lines[:start] + _FA3_BLOCK.rstrip("\n").split("\n") + lines[end:]
        else:
            ln = text[:bare.start()].count("\n")
            new_lines = lines[:ln] + _FA3_BLOCK.rstrip("\n").split("\n") + lines[ln + 1:]
        text = "\n".join(new_lines)
    # guards
    guards = [("is_fa3_supported", "if not FA3_AVAILABLE:  %s\n%s    return False\n")]
    guards += [(ep, "_require_fa3(%r)  %s\n" % (ep, "%s")) for ep in FA3_ENTRY_POINTS]
    edits = []
    found = []
    for name, tmpl in guards:
        pos, indent, def_start = _def_body_insert_point(text, name)
        if pos is None:
            continue
        found.append(name)
        if _FA3_GUARD_TAG in _function_region(text, def_start):
            continue
        if name == "is_fa3_supported":
            snippet = indent + tmpl % (_FA3_GUARD_TAG, indent)
        else:
            snippet = indent + tmpl % _FA3_GUARD_TAG
        edits.append((pos, pos, snippet))
    if "is_fa3_supported" not in found:
        raise PatchError("fa3_soft_fallback", f.rel, "def is_fa3_supported(...)",
                         "it must return False when FA3 is unavailable")
    if not any(ep in found for ep in FA3_ENTRY_POINTS):
        raise PatchError("fa3_soft_fallback", f.rel, "any FA3 entry point (%s)" % ", ".join(FA3_ENTRY_POINTS))
    text = _splice(text, edits)
    if text == f.text:
        return "already_applied", "soft import and guards present"
    f.text = text
    return "applied", "soft flash_ops import; guarded %s" % ", ".join(found)


# --------------------------------------------------------------------------------------------------------------
# Reports: fetched dependencies / dlpack (facts 1.3, 1.4) and build cost
# --------------------------------------------------------------------------------------------------------------

def dependency_report(cmake_text, extra_texts=()):
    """What the tree fetches at configure time and whether it pulls mscclpp (and with it dlpack) as a sub-project.

    mscclpp added with ``add_subdirectory`` and without ``MSCCLPP_BUILD_PYTHON_BINDINGS=OFF`` fetches dlpack v1.1,
    whose ``cmake_minimum_required(3.2)`` CMake >= 4 rejects (facts 1.4, B02): the build needs
    ``CMAKE_POLICY_VERSION_MINIMUM=3.5`` and a fresh build directory.
    """
    names = []
    add_subdirs = []
    bindings_off = False
    for text in (cmake_text,) + tuple(extra_texts):
        for c in cm.scan(text):
            if c.name == "fetchcontent_declare" and c.words:
                names.append(c.words[0])
            elif c.name == "add_subdirectory" and c.words:
                add_subdirs.append(c.raw_args)
            elif c.name in ("set", "option") and c.words and c.words[0] == "MSCCLPP_BUILD_PYTHON_BINDINGS":
                bindings_off = len(c.words) > 1 and c.words[1].upper() in ("OFF", "FALSE", "0", "NO")
    mscclpp = any("mscclpp" in n.lower() for n in names) and any("mscclpp" in s.lower() for s in add_subdirs)
    dlpack = mscclpp and not bindings_off
    return {
        "fetched": names,
        "mscclpp_subproject": mscclpp,
        "mscclpp_python_bindings": mscclpp and not bindings_off,
        "dlpack_via_mscclpp": dlpack,
        "needs_policy_version_minimum": dlpack,
        "remedy": ("export CMAKE_POLICY_VERSION_MINIMUM=3.5 and configure into a fresh build directory (dlpack v1.1 "
                   "declares cmake_minimum_required 3.2, rejected by CMake >= 4)") if dlpack else None,
    }


def _cost_summary(est):
    return {
        "total_units_x_gencodes": est["total"],
        "extensions": dict((k, {"cuda_units": v["cuda_units"], "host_units": v["host_units"],
                                "gencodes": v["gencodes"], "units_x_gencodes": v["units_x_gencodes"],
                                "unresolved_globs": v["unresolved_globs"]})
                           for k, v in est["extensions"].items()),
    }


def build_cost(before_text, after_text, kernel_dir, cuda_version, optional_all_text=None):
    """Build-cost estimate before / after the requested patches (and with every optional patch, for comparison)."""
    out = {}
    for key, text in (("before", before_text), ("after", after_text), ("with_all_optional", optional_all_text)):
        if text is None:
            continue
        try:
            est = cm.estimate_build_cost(text, cuda_version=cuda_version, source_dir=kernel_dir)
        except ValueError as exc:
            return {"error": "cannot model the CMakeLists: %s" % exc}
        out[key] = _cost_summary(est)
        out["assumptions"] = est["assumptions"]
    b, a = out["before"]["total_units_x_gencodes"], out["after"]["total_units_x_gencodes"]
    out["saved_percent"] = round(100.0 * (b - a) / b, 1) if b else 0.0
    return out


def format_build_cost(cost):
    """One line per extension, for the play output: ``flash_ops: 3 units x 1 gencodes = 3 -> (not built)``."""
    if "error" in cost:
        return [cost["error"]]
    lines = []
    before = cost["before"]["extensions"]
    after = cost["after"]["extensions"]
    for name, b in before.items():
        a = after.get(name)
        right = "%d" % a["units_x_gencodes"] if a else "not built"
        lines.append("%s: %d CUDA units x %d gencodes (%s) + %d host units = %d -> %s"
                     % (name, b["cuda_units"], len(b["gencodes"]), ",".join(b["gencodes"]) or "-",
                        b["host_units"], b["units_x_gencodes"], right))
    lines.append("total: %d -> %d units x gencodes (%s%% saved)" % (
        cost["before"]["total_units_x_gencodes"], cost["after"]["total_units_x_gencodes"], cost["saved_percent"]))
    if "with_all_optional" in cost:
        lines.append("with skip_fa3_build + sm120_only: %d" % cost["with_all_optional"]["total_units_x_gencodes"])
    return lines


# --------------------------------------------------------------------------------------------------------------
# Plan and commit
# --------------------------------------------------------------------------------------------------------------

def validate(patches, target_archs):
    """:raises ValueError: on an unknown patch name or a target arch that is not ``sm_NNN[a|f]``/is plain sm_120."""
    unknown = [p for p in patches if p not in PATCHES]
    if unknown:
        raise ValueError("unknown patch(es) %s; known: %s" % (", ".join(unknown), ", ".join(PATCHES)))
    for arch in target_archs:
        if not _ARCH_RE.match(arch):
            raise ValueError("target arch %r is not of the form sm_NNN[a|f]" % arch)
        if arch in ("sm_120", "sm_121"):
            raise ValueError("target arch %s lacks FP4 MMA and the e2m1 cvt; use %sa (sglang-sm120.md section 7)"
                             % (arch, arch))


def _apply(patch, files, target_archs):
    if patch == "cmake_policy_guards":
        return "cmake", patch_cmake_policy_guards(files["cmake"])
    if patch == "cccl_include":
        return "cmake", patch_cccl_include(files["cmake"])
    if patch == "skip_fa3_build":
        return "cmake", patch_skip_fa3_build(files["cmake"])
    if patch == "sm120_only":
        return "cmake", patch_sm120_only(files["cmake"], target_archs)
    if patch == "fa3_soft_fallback":
        return "flash_attn", patch_fa3_soft_fallback(files["flash_attn"])
    if patch == "drop_sparse_attn":
        return "cmake", patch_drop_sparse_attn(files)
    raise ValueError(patch)


def _load(kernel_dir):
    files = {}
    for key, rel in (("cmake", CMAKE_FILE), ("flash_attn", FLASH_ATTN_FILE)):
        path = os.path.join(kernel_dir, rel)
        if os.path.isfile(path):
            files[key] = SourceFile(path, rel)
    # the extension sources that register a sparse op (drop_sparse_attn), whatever their name
    csrc = os.path.join(kernel_dir, "csrc")
    for dirpath, _dirs, names in os.walk(csrc):
        for name in sorted(names):
            if not name.endswith((".cc", ".cpp", ".cu")):
                continue
            path = os.path.join(dirpath, name)
            with open(path, "rb") as fh:
                if not re.search(br'm\.(?:def|impl)\(\s*"(?:varlen_)?fwd_sparse\b', fh.read()):
                    continue
            rel = os.path.relpath(path, kernel_dir)
            files["ext:" + rel] = SourceFile(path, rel)
    return files


def plan(src, patches=DEFAULT_PATCHES, target_archs=("sm_120a",), cuda_version="13.0"):
    """Work out every requested patch in memory. Nothing is written.

    :returns: dict with ``kernel_dir``, ``layout``, ``applied``, ``already_applied``, ``not_needed`` (lists of patch
        names in request order), ``details`` (patch -> message), ``files`` (key -> :class:`SourceFile` with the new
        text), ``changed`` (bool), ``dependencies`` (:func:`dependency_report`), ``build_cost`` (:func:`build_cost`).
    :raises LayoutError: no kernel tree at ``src``.
    :raises PatchError: a requested patch's anchor is missing (the first one found; nothing is written).
    :raises ValueError: bad patch names / target archs, or a CMakeLists that cannot be parsed.
    """
    patches = list(dict.fromkeys(patches))
    validate(patches, target_archs)
    kernel_dir, layout = find_kernel_dir(src)
    files = _load(kernel_dir)
    need = {"cmake": CMAKE_FILE, "flash_attn": FLASH_ATTN_FILE}
    for p in patches:
        key = "flash_attn" if p == "fa3_soft_fallback" else "cmake"
        if key not in files:
            raise PatchError(p, os.path.join(kernel_dir, need[key]), "the file itself")
    result = {"kernel_dir": kernel_dir, "layout": layout, "applied": [], "already_applied": [],
              "not_needed": [], "details": {}, "files": files}
    before_cmake = files["cmake"].text if "cmake" in files else None
    for p in patches:
        snapshot = dict((k, f.text) for k, f in files.items())
        _key, (status, detail) = _apply(p, files, target_archs)
        if status == "applied" and all(files[k].text == v for k, v in snapshot.items()):
            status = "already_applied"
        result[status].append(p)
        result["details"][p] = detail
    result["changed"] = any(f.changed for f in files.values())
    extra = []
    cmake_dir = os.path.join(kernel_dir, "cmake")
    if os.path.isdir(cmake_dir):
        for name in sorted(os.listdir(cmake_dir)):
            if name.endswith(".cmake"):
                extra.append(_fs.read_source(os.path.join(cmake_dir, name), "CMake file"))
    if before_cmake is not None:
        result["dependencies"] = dependency_report(before_cmake, extra)
        all_opt = None
        try:
            probe = SourceFile.__new__(SourceFile)
            probe.rel, probe.text, probe.path = CMAKE_FILE, files["cmake"].text, files["cmake"].path
            patch_skip_fa3_build(probe)
            patch_sm120_only(probe, target_archs)
            all_opt = probe.text
        except PatchError:
            all_opt = None
        result["build_cost"] = build_cost(before_cmake, files["cmake"].text, kernel_dir, cuda_version, all_opt)
    return result


def diffs(result):
    """Ansible ``--diff`` entries (one per changed file) and a unified diff text."""
    out = []
    for f in result["files"].values():
        if not f.changed:
            continue
        out.append({"before_header": f.path, "after_header": f.path, "before": f.original, "after": f.text})
    return out


def unified_diff(result):
    chunks = []
    for f in result["files"].values():
        if f.changed:
            chunks.extend(difflib.unified_diff(f.original.splitlines(True), f.text.splitlines(True),
                                               "a/" + f.rel, "b/" + f.rel))
    return "".join(chunks)


def backup_path(path):
    """Ansible-style backup name: ``<file>.<pid>.<YYYY-MM-DD@HH:MM:SS>~``."""
    return "%s.%s.%s~" % (path, os.getpid(), time.strftime("%Y-%m-%d@%H:%M:%S", time.localtime()))


def commit(result, backup=False, _replace=os.replace):
    """Write the planned files all-or-nothing.

    Phase 1 writes every new text to a temp file next to its target (mode kept); phase 2 renames them all. A
    failure in phase 1 removes the temp files and leaves every target untouched; a failure in phase 2 puts back
    the original bytes of the targets already replaced, so the tree is never half-patched.

    :returns: dict path -> backup path (empty when ``backup`` is false or nothing changed).
    :raises OSError: after the rollback.
    """
    backups = {}
    changed = [f for f in result["files"].values() if f.changed]
    temps = []
    try:
        for f in changed:
            d = os.path.dirname(f.path)
            fd, tmp = tempfile.mkstemp(prefix=".%s." % os.path.basename(f.path), dir=d)
            temps.append(tmp)
            with os.fdopen(fd, "wb") as fh:
                fh.write(f.encoded())
            shutil.copymode(f.path, tmp)
        if backup:
            for f in changed:
                dest = backup_path(f.path)
                shutil.copy2(f.path, dest)
                backups[f.path] = dest
    except Exception:
        for tmp in temps:
            if os.path.exists(tmp):
                os.unlink(tmp)
        raise
    originals = {}
    done = []
    try:
        for f, tmp in zip(changed, temps):
            with open(f.path, "rb") as fh:
                originals[f.path] = fh.read()
            _replace(tmp, f.path)
            done.append(f.path)
    except Exception:
        for path in done:
            fd, back = tempfile.mkstemp(prefix=".%s.restore." % os.path.basename(path), dir=os.path.dirname(path))
            with os.fdopen(fd, "wb") as fh:
                fh.write(originals[path])
            shutil.copymode(path, back)
            os.replace(back, path)
        for tmp in temps:
            if os.path.exists(tmp):
                os.unlink(tmp)
        raise
    return backups
