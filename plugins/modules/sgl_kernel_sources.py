#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang contributors
# Apache-2.0 (see LICENSE)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: sgl_kernel_sources
short_description: List the third-party sources an sgl-kernel tree fetches at configure time, and check a source cache
version_added: "0.1.0"
description:
  - Reads the kernel tree's CMake (C(CMakeLists.txt) and C(cmake/*.cmake)) and returns every C(FetchContent_Declare)
    dependency in both declaration styles, C(GIT_REPOSITORY)/C(GIT_TAG) (trees until 2026-07-29) and
    C(URL)/C(URL_HASH) (later trees; C(${GITHUB_ARTIFACTORY}) expanded), each with the exact
    C(FETCHCONTENT_SOURCE_DIR_<NAME>) variable that makes CMake use a local directory instead of downloading.
  - With O(cache), also reports which dependencies the cache holds (C(present)), whether the cached revision is the
    declared one, and, for dependencies that run as CMake sub-projects (C(add_subdirectory), e.g. mscclpp), the
    nested declarations in their own reachable CMake files (mscclpp's json, nanobind, dlpack; options such as
    C(MSCCLPP_BUILD_TESTS=OFF) set by the kernel are honoured).
  - The result is what an offline (air-gapped) build needs; the C(sgl_kernel_sm120) role refuses to build when
    RV(missing) or RV(mismatched) is not empty.
  - The logic lives in C(plugins/module_utils/_sgl_kernel_sources.py).
author:
  - blackwell.sglang maintainers (@blackwell-sglang)
options:
  src:
    description:
      - An SGLang checkout (either layout, C(sgl-kernel/) or C(python/sglang/kernels/aot/)) or the kernel tree itself.
    type: path
    required: true
  cache:
    description:
      - A source cache directory on the target. Layouts, per dependency name as CMake spells it
        (e.g. C(repo-cutlass)), are C(<cache>/<name>/) (an unpacked tree, optionally with C(.blackwell-source.json)
        holding C(repository) and C(ref)), C(<cache>/<name>.tar.gz), or the upstream source bundle
        (C(<cache>/manifest.json) with C(tarballs[].fetchcontent[].name)).
      - A directory holding a file C(.blackwell-placeholder) is a placeholder and never counts as present.
      - Empty means no cache check (only the declarations are listed).
    type: path
    default: ""
  github_artifactory:
    description: Value of the kernel's C(GITHUB_ARTIFACTORY) CMake cache variable used to expand C(URL) entries.
    type: str
    default: github.com
  defines:
    description:
      - CMake cache settings the build passes (C(-DNAME=value)), e.g. C(SGL_KERNEL_BUILD_FLASHMLA=ON) as a key and value. They beat
        C(option()) defaults when deciding which C(if()) branches and C(include())s the configure runs, so a
        dependency declared only in a skipped file is reported with C(used=false) and not required.
    type: dict
    default: {}
  offline:
    description:
      - Fail when O(cache) cannot serve an offline build (a source missing or at another revision, or a placeholder
        not in O(placeholders_allowed)); the message names the C(sgl_kernel_sm120) settings to change. Nothing is
        checked without O(cache).
    type: bool
    default: false
  placeholders_allowed:
    description: With O(offline), the placeholder sources the cache may hold on purpose.
    type: list
    elements: str
    default: []
extends_documentation_fragment:
  - blackwell.sglang.attributes.READ_ONLY
notes:
  - Read-only; tarballs in the cache are read into a temporary directory that is removed again.
seealso:
  - module: blackwell.sglang.sgl_kernel_patch
"""

EXAMPLES = r"""
- name: Which sources does the pinned kernel tree fetch, and does the cache hold them?
  blackwell.sglang.sgl_kernel_sources:
    src: /opt/sglang/src/sglang
    cache: /opt/sglang/kernel-sources
  register: kernel_sources

- name: Refuse an offline build with sources missing
  ansible.builtin.assert:
    that: kernel_sources.missing | length == 0
    fail_msg: "{{ kernel_sources.missing_lines | join('; ') }}"

- name: CMAKE_ARGS entries for the build
  ansible.builtin.debug:
    msg: "{{ kernel_sources.cmake_args | join(' ') }}"
"""

RETURN = r"""
kernel_dir:
  description: The kernel tree that was read.
  returned: always
  type: str
layout:
  description: C(sgl-kernel) or C(python/sglang/kernels/aot).
  returned: always
  type: str
dependencies:
  description:
    - One entry per declared dependency, in declaration order; nested declarations of sub-projects follow
      (only with O(cache)).
    - Keys C(name) (as CMake spells it), C(variable) (C(FETCHCONTENT_SOURCE_DIR_<NAME>)), C(style) (C(git), C(url),
      C(other)), C(repository), C(ref) (commit or tag; for URL archives taken from the archive name), C(url),
      C(url_hash), C(source_dir) (a declared C(SOURCE_DIR)), C(inside) (C({name, subdir}) when that C(SOURCE_DIR)
      lies inside another dependency), C(declared_in) (C(file:line)), C(parent) (the sub-project that declares it),
      C(conditional) (declared under a condition that could not be evaluated), C(used) (C(false) when declared in a
      file or branch the configure never runs, e.g. an extension behind the C(sm120_only) patch's OFF option; such
      a source is never required), C(writes_into) (C(null),
      C(configure) or C(build), meaning the build writes into this tree, so it needs a writable copy).
    - With O(cache) also C(present), C(placeholder), C(ref_matches) (C(false) when the cache records another
      revision, C(null) when it records none), C(cache_path), C(cache_kind) (C(dir) or C(tarball)), C(cache_top).
  returned: always
  type: list
  elements: dict
missing:
  description: Names of dependencies the cache does not hold (empty without O(cache)).
  returned: always
  type: list
  elements: str
mismatched:
  description: Names of dependencies the cache holds at another revision than the declared one.
  returned: always
  type: list
  elements: str
placeholders:
  description: Names the cache holds only as placeholders.
  returned: always
  type: list
  elements: str
missing_lines:
  description: One line per missing, mismatched or placeholder source (name, why, repository, ref, where declared).
  returned: always
  type: list
  elements: str
complete:
  description: C(true) when a cache was given and holds every dependency at its declared revision.
  returned: always
  type: bool
cmake_args:
  description: C(-DFETCHCONTENT_SOURCE_DIR_<NAME>=<cache path>) for every present dependency kept as a directory in
    the cache (tarballs must be unpacked first; the role does that), plus C(-DFETCHCONTENT_FULLY_DISCONNECTED=ON)
    when the cache is complete.
  returned: always
  type: list
  elements: str
"""

import shutil
import tempfile

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.blackwell.sglang.plugins.module_utils import _sgl_kernel_sources as sources


def main():
    module = AnsibleModule(
        argument_spec=dict(
            src=dict(type="path", required=True),
            cache=dict(type="path", default=""),
            github_artifactory=dict(type="str", default="github.com"),
            defines=dict(type="dict", default={}),
            offline=dict(type="bool", default=False),
            placeholders_allowed=dict(type="list", elements="str", default=[]),
        ),
        supports_check_mode=True,
    )
    p = module.params
    if p["github_artifactory"] and ("/" in p["github_artifactory"] or any(c.isspace() for c in p["github_artifactory"])):
        module.fail_json(msg="github_artifactory must be a host name (e.g. github.com or a mirror host), got %r"
                         % p["github_artifactory"])
    scratch = tempfile.mkdtemp(prefix="sgl-kernel-sources-")
    try:
        result = sources.kernel_sources(p["src"], cache=p["cache"] or None,
                                        github_artifactory=p["github_artifactory"] or "github.com", scratch=scratch,
                                        defines=dict((str(k), str(v)) for k, v in p["defines"].items()))
    except (sources.SourcesError, sources.LayoutError) as exc:
        module.fail_json(msg="sgl_kernel_sources: %s" % exc)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    cmake_args = ["-D%s=%s" % (d["variable"], d["cache_path"]) for d in result["dependencies"]
                  if d.get("present") and d.get("used", True) and d.get("cache_kind") == "dir"]
    if result["complete"]:
        cmake_args.append("-DFETCHCONTENT_FULLY_DISCONNECTED=ON")
    facts = dict(changed=False, kernel_dir=result["kernel_dir"], layout=result["layout"],
                 dependencies=result["dependencies"], missing=result["missing"],
                 mismatched=result["mismatched"], placeholders=result["placeholders"],
                 missing_lines=sources.describe_missing(result), complete=result["complete"],
                 cmake_args=cmake_args)
    unserved = result["missing"] or result["mismatched"] or set(result["placeholders"]) - set(p["placeholders_allowed"])
    if p["offline"] and p["cache"] and unserved:
        module.fail_json(msg="sgl_kernel_sm120_source_cache %s cannot serve an offline build of %s: %s. Stage the missing "
                         "trees at exactly these revisions on a connected host (playbooks/kernel_sources.yml), or list "
                         "a name in sgl_kernel_sm120_source_placeholders_allowed when the cache holds a placeholder on "
                         "purpose." % (p["cache"], result["kernel_dir"], "; ".join(facts["missing_lines"])), **facts)
    module.exit_json(**facts)


if __name__ == "__main__":
    main()
