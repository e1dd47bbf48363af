#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang contributors
# Apache-2.0 (see LICENSE)

from __future__ import annotations

DOCUMENTATION = r"""
module: library_symbols
short_description: Check that every undefined symbol of a distribution's libraries is provided by what they link
version_added: 0.1.0
description:
  - Reads the C(RECORD) of each named distribution installed in a Python environment, and every ELF shared library
    it lists (C(*.so), C(*.so.N)).
  - For each library, finds the libraries it needs (C(DT_NEEDED)) as the glibc loader does (its C(DT_RPATH) or
    C(DT_RUNPATH) with C($ORIGIN), then O(library_dirs) and the library directories of torch and of NVIDIA's CUDA
    wheels in the environment, which C(import torch) loads first, then C(ldconfig)'s cache and the system
    directories), and checks that every non-weak undefined dynamic symbol is defined by one of them or by the
    interpreter (the Python C API) or, in an environment with torch, by what torch loads with C(RTLD_GLOBAL)
    (C(torch/lib/libtorch_global_deps.so) and its libraries).
  - Python loads extensions with C(RTLD_NOW), so a library with an unresolved symbol makes the import fail on every
    host. A symbol is unresolved, for example, when a source tree of the build was a placeholder
    (docs/sgl-kernel.md). This check needs no GPU and no driver, so it also runs on a build host whose GPU the
    wheel does not target.
  - Fails naming each library and its unresolved symbols (demangled when C(c++filt) is there) or the libraries it
    needs that are found nowhere. Read-only.
author:
  - blackwell.sglang maintainers (@blackwell-sglang)
options:
  python:
    description:
      - The environment's interpreter (C(<venv>/bin/python)). Its C(sys.path) says where distributions are installed.
    type: path
    required: true
  distributions:
    description:
      - Distribution names to check (as pip names them; C(-), C(_) and C(.) are the same). Names not installed are
        skipped; the module fails when none is installed.
    type: list
    elements: str
    required: true
  library_dirs:
    description:
      - More directories searched for needed libraries after each library's own run path, e.g. the CUDA toolkit's
        C(lib64).
      - A C(stubs) directory directly under one of them (CUDA's C(lib64/stubs)) stands for a library only the GPU
        driver installs (C(libcuda.so.1)) when the host has no driver; the result lists such libraries in C(stubs).
    type: list
    elements: path
    default: []
  ignore:
    description:
      - Shell-style patterns of symbol names (mangled) that may stay unresolved. Empty by default; each entry needs
        a reason next to it in the inventory.
    type: list
    elements: str
    default: []
attributes:
  check_mode:
    support: full
    description: Read-only; runs the same in check mode.
  diff_mode:
    support: none
    description: Nothing is changed, so there is no diff.
  platform:
    support: full
    platforms: posix
    description: Linux hosts (ELF, glibc loader rules).
notes:
  - Symbol versions are not compared; the check finds symbols that no library provides at all.
  - The interpreter is run once to print its C(sys.path); nothing is imported.
"""

EXAMPLES = r"""
- name: Every symbol of the kernel wheel's libraries resolves
  blackwell.sglang.library_symbols:
    python: /opt/sglang/releases/abc123/venv/bin/python
    distributions: [sgl-kernel, sglang-kernel]
    library_dirs: [/usr/local/cuda/lib64]
  register: kernel_symbols
"""

RETURN = r"""
distributions:
  description: The distributions found, name -> version.
  returned: always
  type: dict
  sample: {"sgl-kernel": "0.3.21"}
libraries:
  description:
    - One entry per library checked, C(path) relative to the site-packages directory; C(needed) (sonames),
      C(undefined) (count of undefined symbols), C(unresolved) (mangled names), C(unresolved_demangled),
      C(missing_libraries), C(stubs).
  returned: always
  type: list
  elements: dict
checked:
  description: How many libraries were checked.
  returned: always
  type: int
  sample: 6
unresolved:
  description: How many undefined symbols no linked library provides, over all libraries.
  returned: always
  type: int
  sample: 0
"""

import json
import os
import shutil
import subprocess

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.blackwell.sglang.plugins.module_utils import _elf

_PATH_PROBE = "import json, sys; print(json.dumps({'path': sys.path, 'executable': sys.executable}))"


def demangle(names):
    tool = shutil.which("c++filt")
    if not names or not tool:
        return list(names)
    try:
        proc = subprocess.run([tool], input="\n".join(names), capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError):
        return list(names)
    lines = proc.stdout.splitlines()
    return lines if len(lines) == len(names) else list(names)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            python=dict(type="path", required=True),
            distributions=dict(type="list", elements="str", required=True),
            library_dirs=dict(type="list", elements="path", default=[]),
            ignore=dict(type="list", elements="str", default=[]),
        ),
        supports_check_mode=True,
    )
    p = module.params
    if not os.access(p["python"], os.X_OK):
        module.fail_json(msg="python: %s is not an executable interpreter" % p["python"])
    if not p["distributions"]:
        module.fail_json(msg="distributions: name at least one distribution")
    rc, out, err = module.run_command([p["python"], "-I", "-c", _PATH_PROBE])
    if rc != 0:
        module.fail_json(msg="%s could not print its sys.path (exit %d): %s" % (p["python"], rc, err.strip()[-500:]))
    try:
        probe = json.loads(out)
    except ValueError:
        module.fail_json(msg="%s printed no JSON for its sys.path: %r" % (p["python"], out[-300:]))
    site_dirs = [d for d in probe["path"] if d and os.path.isdir(d)]
    dists = _elf.find_distributions(site_dirs, p["distributions"])
    if not dists:
        module.fail_json(msg="none of the distributions %s is installed for %s (searched %s)"
                         % (", ".join(p["distributions"]), p["python"], ", ".join(site_dirs)))
    ldconfig = module.get_bin_path("ldconfig", opt_dirs=["/sbin", "/usr/sbin"])
    rc, ld_out, _err = module.run_command([ldconfig, "-p"]) if ldconfig else (1, "", "")
    resolver = _elf.Resolver(
        search_dirs=list(p["library_dirs"]) + _elf.package_library_dirs(site_dirs),
        system=_elf.ldconfig_cache(ld_out) if rc == 0 else {},
        stub_dirs=[os.path.join(d, "stubs") for d in p["library_dirs"]])
    # the global scope of an extension loaded after `import torch`: the interpreter, and torch's global-deps library,
    # which torch loads with RTLD_GLOBAL (torch/__init__.py, _load_global_deps) before anything else
    global_objects = [os.path.realpath(probe["executable"])]
    global_objects += [os.path.join(d, "torch", "lib", "libtorch_global_deps.so") for d in site_dirs
                       if os.path.isfile(os.path.join(d, "torch", "lib", "libtorch_global_deps.so"))][:1]
    libraries, total = [], 0
    try:
        for name in sorted(dists):
            site, dist_info, _version = dists[name]
            paths = _elf.record_libraries(site, dist_info)
            for entry in _elf.check(paths, resolver, global_objects=global_objects, ignore=p["ignore"]):
                entry["path"] = os.path.relpath(entry["path"], site)
                entry["distribution"] = name
                entry["unresolved_demangled"] = demangle(entry["unresolved"])
                total += len(entry["unresolved"])
                libraries.append(entry)
    except (_elf.ElfError, OSError) as exc:
        module.fail_json(msg="library check: %s" % exc)
    result = dict(changed=False, distributions=dict((n, v[2]) for n, v in dists.items()), libraries=libraries,
                  checked=len(libraries), unresolved=total)
    bad = [lib for lib in libraries if lib["unresolved"] or lib["missing_libraries"]]
    if bad:
        parts = []
        for lib in bad:
            bits = []
            if lib["missing_libraries"]:
                bits.append("needs %s, found nowhere" % ", ".join(lib["missing_libraries"]))
            if lib["unresolved"]:
                shown = lib["unresolved_demangled"][:8]
                more = len(lib["unresolved"]) - len(shown)
                bits.append("%d undefined symbol(s) no linked library provides: %s%s"
                            % (len(lib["unresolved"]), "; ".join(shown), " (+%d more)" % more if more else ""))
            parts.append("%s: %s" % (lib["path"], ", ".join(bits)))
        result["msg"] = ("%d of %d libraries of %s cannot load (Python loads extensions with RTLD_NOW, so the import "
                         "would fail): %s. A symbol nothing provides usually comes from a source tree that was a "
                         "placeholder or a patch that dropped sources but not their registrations "
                         "(docs/sgl-kernel.md); a missing library from a package not installed."
                         % (len(bad), len(libraries), ", ".join(sorted(dists)), " | ".join(parts)))
        module.fail_json(**result)
    result["msg"] = "%d libraries of %s: every undefined symbol resolves" % (len(libraries), ", ".join(sorted(dists)))
    module.exit_json(**result)


if __name__ == "__main__":
    main()
