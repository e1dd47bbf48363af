# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang contributors
# Apache-2.0 (see LICENSE)
"""What device code a library holds, from ``cuobjdump --list-elf`` / ``--list-ptx``, and whether it covers targets.

``cuobjdump --list-elf <lib>`` prints one line per embedded cubin, named ``<stem>.<n>.<arch>.cubin``::

    ELF file    1: common_ops.abi3.1.sm_120a.cubin

``--list-ptx`` the same for PTX (``PTX file    1: mscclpp.1.sm_90.ptx``: the PTX of virtual arch ``compute_90``). A
host-only library gives ``cuobjdump info    : File '<path>' does not contain device code``. A listing of several
libraries (``tests/gpu/run_kernel_build.sh``) separates them with ``## <path>`` header lines.

The coverage rule is :func:`_cuda_toolchain.arch_coverage` (the one CUDA binary-compatibility rule of the
collection): ``sm_121a`` only for 12.1, the family cubin ``sm_120f`` for 12.0 and 12.1, PTX through the driver JIT.
``sm_120a`` never counts for 12.1 (field report S13). Pure Python, standard library only.
"""

from __future__ import annotations

import re

from ansible_collections.blackwell.sglang.plugins.module_utils import _cuda_toolchain, _hardware_profile

_ELF_RE = re.compile(r"^\s*ELF file\s+\d+:\s*(\S+?)\.(sm_\d+[a-z]?)\.cubin\s*$")
_PTX_RE = re.compile(r"^\s*PTX file\s+\d+:\s*(\S+?)\.(sm_\d+[a-z]?)\.ptx\s*$")
_NO_CODE_RE = re.compile(r"does not contain device code")
_HEADER_RE = re.compile(r"^##\s+(\S.*?)\s*$")


def parse_listing(text):
    """One ``cuobjdump --list-elf`` (or ``--list-ptx``) output of one library.

    :returns: dict ``elf`` (sorted unique cubin archs, ``["sm_120a"]``), ``ptx`` (sorted unique virtual archs,
        ``["compute_90"]``), ``cubins`` (count of ELF lines), ``device_code`` (False when cuobjdump said the file
        holds none, True when it listed something, None when neither was said).
    """
    elf, ptx, cubins, device = set(), set(), 0, None
    for line in (text or "").splitlines():
        match = _ELF_RE.match(line)
        if match:
            elf.add(match.group(2))
            cubins += 1
            device = True
            continue
        match = _PTX_RE.match(line)
        if match:
            ptx.add("compute_" + match.group(2)[3:])
            device = True
            continue
        if _NO_CODE_RE.search(line) and device is None:
            device = False
    return {"elf": sorted(elf), "ptx": sorted(ptx), "cubins": cubins, "device_code": device}


def parse_multi(text):
    """A listing of several libraries, each introduced by a ``## <path>`` line.

    :returns: dict path -> :func:`parse_listing` result, in file order (a path seen twice is merged).
    """
    blocks, current, order = {}, None, []
    for line in (text or "").splitlines():
        match = _HEADER_RE.match(line)
        if match:
            current = match.group(1)
            if current not in blocks:
                blocks[current] = []
                order.append(current)
            continue
        if current is not None:
            blocks[current].append(line)
    return dict((path, parse_listing("\n".join(blocks[path]))) for path in order)


def coverage(listing, target_archs):
    """Which targets a library's device code covers.

    :param listing: :func:`parse_listing` result (``elf`` and ``ptx`` of one library, possibly merged from both
        listings). :param target_archs: e.g. ``["sm_120a", "sm_121a"]``.
    :returns: dict ``covered`` (target -> ``{via, kind}``), ``missing`` (targets nothing covers), ``ptx_only``
        (targets covered only by PTX, JIT-compiled at first load and without arch-specific features).
    """
    arch_list = list(listing.get("elf") or []) + list(listing.get("ptx") or [])
    covered, missing, ptx_only = {}, [], []
    for target in target_archs or []:
        cc = _hardware_profile.parse_capability(target)
        if cc is None:
            missing.append(target)
            continue
        result = _cuda_toolchain.arch_coverage(arch_list, cc)
        if not result["covered"]:
            missing.append(target)
            continue
        covered[target] = {"via": result["via"], "kind": result["kind"]}
        if result["kind"] == "ptx":
            ptx_only.append(target)
    return {"covered": covered, "missing": missing, "ptx_only": ptx_only}


def check_libraries(listings, target_archs):
    """Every library with device code must cover every target.

    :param listings: dict library path -> :func:`parse_listing` result. :param target_archs: the targets.
    :returns: dict ``libraries`` (list of ``{path, elf, ptx, cubins, device_code, covered, missing, ptx_only}``),
        ``failed`` (the entries with a missing target), ``message`` (one line naming each failed library and what it
        lacks, or what was checked).
    """
    rows, failed = [], []
    for path in sorted(listings):
        entry = dict(listings[path], path=path)
        if entry.get("device_code"):
            entry.update(coverage(entry, target_archs))
        else:
            entry.update({"covered": {}, "missing": [], "ptx_only": []})
        rows.append(entry)
        if entry["missing"]:
            failed.append(entry)
    with_code = [r for r in rows if r.get("device_code")]
    if failed:
        message = "; ".join("%s has no code for %s (it holds %s)" % (
            r["path"], ", ".join(r["missing"]), " ".join(r["elf"] + r["ptx"]) or "nothing") for r in failed)
    else:
        message = "%d of %d libraries hold device code, each covers %s" % (
            len(with_code), len(rows), ", ".join(target_archs or []) or "no target")
    return {"libraries": rows, "failed": failed, "message": message}
