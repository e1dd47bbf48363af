# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang contributors
# Apache-2.0 (see LICENSE)
"""The dynamic linking facts of ELF shared libraries, and whether every undefined symbol of one is resolved.

Pure Python (standard library): a build host or a fleet host has no pyelftools, and binutils' text output is not a
stable interface. What is read follows the System V gABI and the glibc loader (``man 8 ld.so``):

* ``DT_NEEDED``, ``DT_RPATH``, ``DT_RUNPATH``, ``DT_SONAME`` from the section of type ``SHT_DYNAMIC``;
* the symbols of the section of type ``SHT_DYNSYM`` (the ones the dynamic loader sees): a symbol is *undefined* when
  ``st_shndx`` is ``SHN_UNDEF``; an undefined ``STB_WEAK`` symbol may stay unresolved (the loader binds it to 0);
  a symbol is *defined* (can resolve another object's reference) when its section index is not ``SHN_UNDEF``, its
  binding is ``STB_GLOBAL``, ``STB_WEAK`` or ``STB_GNU_UNIQUE`` and its visibility is default or protected.

Symbol versions are not compared (a reference to ``memcpy@GLIBC_2.14`` counts as resolved by any ``memcpy``): the
check is about symbols no library provides at all, as a placeholder source tree leaves them.

Errors: :class:`ElfError` names the file and what could not be read (not ELF, truncated, no section headers).
"""

from __future__ import annotations

import csv
import fnmatch
import glob
import mmap
import os
import re
import struct

from ansible_collections.blackwell.sglang.plugins.module_utils._venv_metadata import canonicalize_name

SHT_DYNAMIC = 6
SHT_DYNSYM = 11
DT_NEEDED, DT_SONAME, DT_RPATH, DT_RUNPATH = 1, 14, 15, 29
STB_GLOBAL, STB_WEAK, STB_GNU_UNIQUE = 1, 2, 10
SHN_UNDEF = 0

# the directories the glibc loader searches last (x86_64 and aarch64 Debian/Ubuntu, and the generic ones)
DEFAULT_DIRS = ("/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib/aarch64-linux-gnu",
                "/usr/lib/aarch64-linux-gnu", "/lib64", "/usr/lib64", "/lib", "/usr/lib")


class ElfError(Exception):
    """A file that should be an ELF shared object cannot be read as one; the message names the file."""


def is_elf(path):
    try:
        with open(path, "rb") as fh:
            return fh.read(4) == b"\x7fELF"
    except OSError:
        return False


class ElfObject(object):
    """One ELF file's dynamic facts.

    Attributes: ``path``; ``machine`` (``e_machine``, an int) and ``elf_class`` (32 or 64), which must match for one
    object to load another; ``needed`` (list of sonames); ``rpath``/``runpath`` (lists of directories, unexpanded);
    ``soname``; ``undefined`` (set of names of non-weak undefined symbols); ``weak_undefined`` (set);
    ``defined`` (set of names this object can resolve for others).
    """

    def __init__(self, path):
        self.path = path
        self.needed, self.rpath, self.runpath, self.soname = [], [], [], None
        self.undefined, self.weak_undefined, self.defined = set(), set(), set()
        try:
            with open(path, "rb") as fh:
                size = os.fstat(fh.fileno()).st_size
                if size < 64:
                    raise ElfError("%s: %d bytes, too short for an ELF header" % (path, size))
                data = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
        except OSError as exc:
            raise ElfError("%s: cannot read: %s" % (path, exc))
        try:
            self._parse(data)
        except (struct.error, IndexError, ValueError) as exc:
            raise ElfError("%s: malformed ELF (%s)" % (path, exc))
        finally:
            data.close()

    def _parse(self, d):
        if d[:4] != b"\x7fELF":
            raise ElfError("%s: not an ELF file" % self.path)
        cls, enc = d[4], d[5]
        if cls not in (1, 2) or enc not in (1, 2):
            raise ElfError("%s: unknown ELF class %d / data encoding %d" % (self.path, cls, enc))
        e = "<" if enc == 1 else ">"
        self.elf_class = 64 if cls == 2 else 32
        if cls == 2:
            self.machine, = struct.unpack_from(e + "H", d, 18)
            shoff, = struct.unpack_from(e + "Q", d, 0x28)
            shentsize, shnum, shstrndx = struct.unpack_from(e + "HHH", d, 0x3A)
            sh_fmt, sym_fmt, dyn_fmt = e + "IIQQQQIIQQ", e + "IBBHQQ", e + "qQ"
        else:
            self.machine, = struct.unpack_from(e + "H", d, 18)
            shoff, = struct.unpack_from(e + "I", d, 0x20)
            shentsize, shnum, shstrndx = struct.unpack_from(e + "HHH", d, 0x2E)
            sh_fmt, sym_fmt, dyn_fmt = e + "IIIIIIIIII", e + "IIIBBH", e + "iI"
        if shoff == 0 or shnum == 0:
            raise ElfError("%s: no section headers (stripped to program headers only); cannot list its symbols"
                           % self.path)
        if shoff + shnum * shentsize > len(d):
            raise ElfError("%s: section headers beyond the end of the file (truncated?)" % self.path)
        sections = []
        for i in range(shnum):
            f = struct.unpack_from(sh_fmt, d, shoff + i * shentsize)
            # (type, offset, size, link, entsize), the same order for both classes
            sections.append((f[1], f[4], f[5], f[6], f[9]))

        def strtab(index):
            _t, off, size, _l, _e = sections[index]
            if off + size > len(d):
                raise ElfError("%s: string table beyond the end of the file (truncated?)" % self.path)
            return off, off + size

        def cstr(tab, offset):
            start = tab[0] + offset
            end = d.find(b"\0", start, tab[1])
            if end < 0:
                raise ElfError("%s: unterminated string in a string table" % self.path)
            return d[start:end].decode("utf-8", "replace")

        for typ, off, size, link, entsize in sections:
            if typ == SHT_DYNAMIC:
                tab = strtab(link)
                step = entsize or struct.calcsize(dyn_fmt)
                for pos in range(off, off + size - step + 1, step):
                    tag, val = struct.unpack_from(dyn_fmt, d, pos)
                    if tag == 0:
                        break
                    if tag == DT_NEEDED:
                        self.needed.append(cstr(tab, val))
                    elif tag == DT_SONAME:
                        self.soname = cstr(tab, val)
                    elif tag == DT_RPATH:
                        self.rpath.extend(p for p in cstr(tab, val).split(":") if p)
                    elif tag == DT_RUNPATH:
                        self.runpath.extend(p for p in cstr(tab, val).split(":") if p)
            elif typ == SHT_DYNSYM:
                tab = strtab(link)
                step = entsize or struct.calcsize(sym_fmt)
                if off + size > len(d):
                    raise ElfError("%s: dynamic symbol table beyond the end of the file (truncated?)" % self.path)
                for pos in range(off + step, off + size - step + 1, step):  # entry 0 is the null symbol
                    f = struct.unpack_from(sym_fmt, d, pos)
                    if self.elf_class == 64:
                        name_off, info, other, shndx = f[0], f[1], f[2], f[3]
                    else:
                        name_off, info, other, shndx = f[0], f[3], f[4], f[5]
                    if not name_off:
                        continue
                    bind = info >> 4
                    name = cstr(tab, name_off)
                    if shndx == SHN_UNDEF:
                        if bind == STB_WEAK:
                            self.weak_undefined.add(name)
                        elif bind == STB_GLOBAL:
                            self.undefined.add(name)
                    elif bind in (STB_GLOBAL, STB_WEAK, STB_GNU_UNIQUE) and (other & 3) in (0, 3):
                        self.defined.add(name)


def _expand(directory, origin):
    for token in ("${ORIGIN}", "$ORIGIN"):
        directory = directory.replace(token, origin)
    return directory


def ldconfig_cache(text):
    """``soname -> [paths]`` from the output of ``ldconfig -p`` (lines ``\\tlibz.so.1 (libc6,x86-64) => /path``)."""
    out = {}
    for line in text.splitlines():
        if "=>" not in line:
            continue
        left, path = line.rsplit("=>", 1)
        name = left.strip().split(" ", 1)[0]
        out.setdefault(name, []).append(path.strip())
    return out


class Resolver(object):
    """Finds the libraries an object needs, the way the glibc loader does, and the symbols they provide.

    ``search_dirs``: directories searched after the object's own ``DT_RPATH``/``DT_RUNPATH`` and before the system
    ones (the libraries ``import torch`` loads first, the CUDA toolkit's); ``system``: ``soname -> [paths]`` (from
    :func:`ldconfig_cache`) tried before :data:`DEFAULT_DIRS`; ``stub_dirs``: where a link-time stub stands for a
    library only a driver installs (``libcuda.so.1`` -> ``stubs/libcuda.so`` of the CUDA toolkit).
    """

    def __init__(self, search_dirs=(), system=None, stub_dirs=()):
        self.search_dirs = [d for d in search_dirs if os.path.isdir(d)]
        self.system = system or {}
        self.stub_dirs = [d for d in stub_dirs if os.path.isdir(d)]
        self._objects = {}

    def load(self, path):
        real = os.path.realpath(path)
        if real not in self._objects:
            self._objects[real] = ElfObject(real)
        return self._objects[real]

    def _compatible(self, path, like):
        try:
            other = self.load(path)
        except ElfError:
            return False
        return other.machine == like.machine and other.elf_class == like.elf_class

    def find(self, soname, obj):
        """``(path, how)`` of the library ``obj`` needs by ``soname``, or ``(None, None)``; how is ``rpath``,
        ``search``, ``system`` or ``stub``."""
        origin = os.path.dirname(obj.path)
        if "/" in soname:
            return (soname, "path") if os.path.isfile(soname) else (None, None)
        dirs = []
        if not obj.runpath:
            dirs += [("rpath", _expand(p, origin)) for p in obj.rpath]
        dirs += [("rpath", _expand(p, origin)) for p in obj.runpath]
        dirs += [("search", p) for p in self.search_dirs]
        for how, d in dirs:
            cand = os.path.join(d, soname)
            if os.path.isfile(cand) and self._compatible(cand, obj):
                return cand, how
        for cand in self.system.get(soname, []):
            if os.path.isfile(cand) and self._compatible(cand, obj):
                return cand, "system"
        for d in DEFAULT_DIRS:
            cand = os.path.join(d, soname)
            if os.path.isfile(cand) and self._compatible(cand, obj):
                return cand, "system"
        stem = soname.split(".so", 1)[0] + ".so"
        for d in self.stub_dirs:
            cand = os.path.join(d, stem)
            if os.path.isfile(cand) and self._compatible(cand, obj):
                return cand, "stub"
        return None, None

    def closure(self, obj):
        """Every library ``obj`` loads (breadth first, as the loader orders them) and the sonames not found.

        :returns: ``(list of (soname, path, how), list of (needed by, soname))``.
        """
        seen, found, missing = set(), [], []
        queue = [obj]
        while queue:
            cur = queue.pop(0)
            for soname in cur.needed:
                if soname in seen:
                    continue
                seen.add(soname)
                path, how = self.find(soname, cur)
                if path is None:
                    missing.append((os.path.basename(cur.path), soname))
                    continue
                found.append((soname, path, how))
                try:
                    queue.append(self.load(path))
                except ElfError:
                    missing.append((os.path.basename(cur.path), soname))
        return found, missing


def check(paths, resolver, global_objects=(), ignore=()):
    """Whether every non-weak undefined dynamic symbol of every file in ``paths`` is defined by an object in its
    load closure or in the global scope (``global_objects``: the interpreter and what it links, whose symbols such as
    the Python C API every extension may use).

    :returns: list of dicts, one per library: ``path``, ``needed``, ``missing_libraries`` (sonames found nowhere),
        ``stubs`` (sonames only a link-time stub provided), ``unresolved`` (sorted symbol names), ``undefined``
        (how many undefined symbols it has).
    :raises ElfError: a file of ``paths`` is not a readable ELF object.
    """
    scope = set()
    for path in global_objects:
        try:
            obj = resolver.load(path)
        except ElfError:
            continue
        scope |= obj.defined
        for _soname, lib, _how in resolver.closure(obj)[0]:
            scope |= resolver.load(lib).defined
    out = []
    for path in paths:
        obj = resolver.load(path)
        libs, missing = resolver.closure(obj)
        provided = set(scope) | obj.defined
        for _soname, lib, _how in libs:
            provided |= resolver.load(lib).defined
        unresolved = sorted(s for s in obj.undefined - provided
                            if not any(fnmatch.fnmatchcase(s, pat) for pat in ignore))
        out.append({"path": path, "needed": list(obj.needed), "undefined": len(obj.undefined),
                    "missing_libraries": sorted(set(name for _by, name in missing)),
                    "stubs": sorted(name for name, _lib, how in libs if how == "stub"),
                    "unresolved": unresolved})
    return out


def package_library_dirs(site_dirs):
    """The library directories of the packages whose libraries ``import torch`` loads before any extension (torch's
    own and NVIDIA's CUDA wheels), under each of ``site_dirs``."""
    out = []
    for site in site_dirs:
        out += [os.path.join(site, "torch", "lib")]
        out += sorted(glob.glob(os.path.join(site, "nvidia", "*", "lib")))
        out += sorted(glob.glob(os.path.join(site, "nvidia", "*", "lib64")))
    return [d for d in out if os.path.isdir(d)]


def find_distributions(site_dirs, names):
    """``{name: (site_dir, dist_info_dir, version)}`` for the distributions of ``names`` installed under
    ``site_dirs`` (the first site directory that has one wins; names compare by PEP 503, :func:`_venv_metadata.canonicalize_name`)."""
    wanted = dict((canonicalize_name(n), n) for n in names)
    out = {}
    for site in site_dirs:
        try:
            entries = os.listdir(site)
        except OSError:
            continue
        for entry in sorted(entries):
            if not entry.endswith(".dist-info"):
                continue
            stem = entry[:-len(".dist-info")]
            dist, _sep, version = stem.partition("-")
            name = wanted.get(canonicalize_name(dist))
            if name and name not in out:
                out[name] = (site, os.path.join(site, entry), version)
    return out


def record_libraries(site, dist_info):
    """Absolute paths of the ELF shared libraries (``*.so``, ``*.so.N``) the distribution's RECORD lists."""
    record = os.path.join(dist_info, "RECORD")
    with open(record, newline="", encoding="utf-8", errors="replace") as fh:
        rows = list(csv.reader(fh))
    out = []
    for row in rows:
        if not row:
            continue
        path = os.path.normpath(os.path.join(site, row[0]))
        if re.search(r"\.so(\.[0-9]+)*$", path) and is_elf(path):
            out.append(path)
    return sorted(set(out))
