#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang contributors
# Apache-2.0 (see LICENSE)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: sglang_stack_refresh
short_description: Derive a stack preset (stack_<date>_<sha>.yml) from an SGLang tree and report what changed
version_added: "0.1.0"
description:
  - Reads an SGLang tree (a directory, or a git checkout at a ref) and derives a complete stack preset in the shape
    of an entry of C(sglang_stack_presets) (roles/sglang_stack/defaults/main.yml), from the tree itself; every C(==) pin of
    C(python/pyproject.toml) (parsed with C(packaging)), torch as the build for O(cuda) (or an override),
    torchvision and torchaudio from SGLang's pins or the release lines that pair with torch, FlashInfer (cubin and
    jit-cache at the same version), the kernel tree (C(sgl-kernel/) or C(python/sglang/kernels/aot/)) with its
    distribution and version.
  - Lists the kernel's FetchContent sources (the code behind M(blackwell.sglang.sgl_kernel_sources)) with which
    the O(source_cache) holds and which are missing, and the state of each SM12x patch (the code behind
    M(blackwell.sglang.sgl_kernel_patch), in memory only) with the reason.
  - Writes C(stack_<name>.yml) into O(stack_dir), an inventory preset, the one variable
    C(sglang_stack_preset_<name>) that C(sglang_stack_preset) set to the name selects (never over a file with another
    stack; the same stack again is no change, whatever O(base) its header reports against), and reports each change
    against the O(base) stack with what it affects.
  - Refuses, naming every cause, when the tree's pins cannot be satisfied together (torchvision or torchaudio with
    no release for the torch pin, FlashInfer packages at different versions, CUDA majors or minors that differ among
    the C(nvidia-*) / C(cuda-*) pins or exclude O(cuda), the kernel tree's version or build requirement against the
    pins, a service backend the tree's parser does not accept).
  - The logic lives in C(plugins/module_utils/_stack_refresh.py) and C(_stack_pins.py).
author:
  - blackwell.sglang maintainers (@blackwell-sglang)
options:
  src:
    description:
      - The SGLang tree, a directory holding C(python/pyproject.toml) (an unpacked archive or a checkout).
      - When it is a git checkout, the tree is read at O(ref) with C(git archive) (the working tree is not read).
    type: path
    required: true
  ref:
    description:
      - With a git checkout, the commit, tag or branch to read (default C(HEAD)). Not allowed for a plain directory.
    type: str
    default: ""
  commit:
    description:
      - The tree's full commit id (40 hex digits). Required for a plain directory; with a git checkout it must
        match what O(ref) resolves to, when given.
    type: str
    default: ""
  commit_date:
    description:
      - The commit's date (C(YYYY-MM-DD) or ISO 8601). Required for a plain directory; from git otherwise.
    type: str
    default: ""
  stack_dir:
    description: The directory of the inventory presets (C(group_vars/all) of the inventory). The new file is written here.
    type: path
    required: true
  name:
    description:
      - Name of the new preset (file C(stack_<name>.yml), variable C(sglang_stack_preset_<name>)); default
        C(<YYYYMMDD>_<sha10>) from the commit date and id. The name of a preset of O(presets) is refused (the
        shipped preset would shadow it).
    type: str
    default: ""
  base:
    description:
      - The stack it starts from, by name - a preset of O(presets) (the collection's), else an inventory preset
        file C(stack_<base>.yml) in O(stack_dir); the report lists every change against it, and O(service) values
        not given are taken from it. Empty means no comparison.
    type: str
    default: current
  presets:
    description:
      - The presets the collection ships, C(sglang_stack_presets) of roles/sglang_stack/defaults/main.yml
        (playbooks/stack_refresh.yml reads them from there).
    type: dict
    default: {}
  cuda:
    description: CUDA major.minor of the stack (the torch build tag C(cu<major><minor>) follows it).
    type: str
    default: "13.0"
  overrides:
    description:
      - Departures from SGLang's own pins, each a mapping with C(version) and C(reason) (both required; for
        C(sgl_kernel) only C(reason), accepting a kernel tree whose version is not SGLang's pin).
      - Keys C(torch) (for example a nightly C(2.12.0.dev20260307+cu130)), C(torchvision), C(torchaudio),
        C(flashinfer), C(sgl_kernel). Companions of an overridden torch and the other FlashInfer packages follow
        on their own, with a reason written for them.
    type: dict
    default: {}
  service:
    description:
      - Service flags of the stack, C(kv_cache_dtype), C(moe_runner_backend), C(fp4_gemm_backend); missing ones
        come from O(base). Backends are checked against the tree's C(server_args.py) choices.
    type: dict
    default: {}
  repo:
    description: The repository URL recorded as C(sglang_repo) (default that of O(base), else upstream SGLang).
    type: str
    default: ""
  source_cache:
    description: A kernel source cache (layouts of M(blackwell.sglang.sgl_kernel_sources)); empty = no cache check.
    type: path
    default: ""
  github_artifactory:
    description: The kernel's C(GITHUB_ARTIFACTORY) value for expanding C(URL) declarations.
    type: str
    default: github.com
  defines:
    description: CMake C(-D) settings for deciding which FetchContent declarations the configure runs.
    type: dict
    default: {}
  patches:
    description: The SM12x patches whose state is reported (choices of M(blackwell.sglang.sgl_kernel_patch)).
    type: list
    elements: str
    choices: [cmake_policy_guards, cccl_include, fa3_soft_fallback, drop_sparse_attn, skip_fa3_build, sm120_only]
    default: [cmake_policy_guards, cccl_include, fa3_soft_fallback, drop_sparse_attn, skip_fa3_build, sm120_only]
  target_archs:
    description: Gencode targets for the C(sm120_only) patch.
    type: list
    elements: str
    default: [sm_120a]
attributes:
  check_mode:
    support: full
    description: Everything is derived and reported; the file is not written (C(changed) says whether it would be).
  diff_mode:
    support: none
    description: The new file's text is returned in RV(content).
requirements:
  - packaging (Python library)
  - Python 3.11 (tomllib) or tomli
  - PyYAML when O(base) is given
  - git when O(src) is a git checkout
notes:
  - Facts behind the pairing rules and the FlashInfer trio are in C(docs/stack-refresh.md).
seealso:
  - module: blackwell.sglang.sgl_kernel_sources
  - module: blackwell.sglang.sgl_kernel_patch
"""

EXAMPLES = r"""
- name: A stack from the checkout's main, against the current one
  blackwell.sglang.sglang_stack_refresh:
    src: /srv/src/sglang
    ref: origin/main
    stack_dir: "{{ inventory_dir }}/group_vars/all"
    base: current
    source_cache: /srv/sgl-kernel-sources
    service:
      fp4_gemm_backend: flashinfer_cutlass
  register: refresh

- name: The original hand deployment's stack from an unpacked tree (nightly torch, FlashInfer 0.6.5)
  blackwell.sglang.sglang_stack_refresh:
    src: /srv/src/sglang-d28f35240a
    commit: d28f35240a28de1e09967975e258b3dd7e74924f
    commit_date: "2026-03-07"
    stack_dir: /tmp/stacks
    base: ""
    overrides:
      torch:
        version: 2.12.0.dev20260307+cu130
        reason: SGLang pins torch==2.9.1 (CUDA 12.8); the deployment runs the cu130 nightly of the commit's date
      flashinfer:
        version: 0.6.5
        reason: SGLang pins 0.6.4; the hand deployment ran 0.6.5
    service:
      kv_cache_dtype: bf16
      moe_runner_backend: flashinfer_cutlass
      fp4_gemm_backend: flashinfer_cudnn

- name: What changed
  ansible.builtin.debug:
    var: refresh.report_lines
"""

RETURN = r"""
path:
  description: The stack file (written, or that would be written in check mode).
  returned: success
  type: str
name:
  description: The preset's name (the C(sglang_stack_preset) value that selects it).
  returned: success
  type: str
variable:
  description: The variable the file defines, C(sglang_stack_preset_<name>).
  returned: success
  type: str
stack:
  description: The derived stack mapping (the keys of an entry of C(sglang_stack_presets) plus C(refresh), what the tree
    held; its commit date, kernel tree, every C(==) pin, the FetchContent sources and the patch states).
  returned: success
  type: dict
content:
  description: The file's text.
  returned: success
  type: str
commit:
  description: The commit read.
  returned: success
  type: str
sglang_pins:
  description: Every C(==) pin of SGLang's C(python/pyproject.toml) that applies on the target (canonical names).
  returned: success
  type: dict
kernel:
  description: C(dir), C(layout), C(distribution), C(version) and C(build_requires) of the kernel tree.
  returned: success
  type: dict
sources:
  description:
    - The kernel's FetchContent sources; C(dependencies) (name, variable, style, repository, ref, url_hash,
      declared_in, parent, used, present, placeholder, ref_matches), C(present), C(missing), C(mismatched),
      C(placeholders), C(complete), C(lines) (one per missing or mismatched source).
  returned: success
  type: dict
patches:
  description: C(patches) (patch -> C({state, reason}), state C(applies), C(holds), C(not_needed) or C(fails)) and
    C(together) (all of them at once).
  returned: success
  type: dict
changes:
  description: Each change against O(base); C(key), C(old), C(new), C(affects) (list), C(line).
  returned: success
  type: list
  elements: dict
report_lines:
  description: The report; changes, then sources, patches and warnings, one line each.
  returned: success
  type: list
  elements: str
warnings_found:
  description: Pins that are allowed but worth knowing (a CUDA 12 package on a CUDA 13 stack).
  returned: success
  type: list
  elements: str
causes:
  description: Why the pins cannot be satisfied together (on refusal).
  returned: failure
  type: list
  elements: str
"""

import os
import re
import shutil
import tarfile
import tempfile

from ansible.module_utils.basic import AnsibleModule, missing_required_lib
from ansible.module_utils.common.text.converters import to_native

from ansible_collections.blackwell.sglang.plugins.module_utils import _sgl_kernel_tree as tree
from ansible_collections.blackwell.sglang.plugins.module_utils import _stack_pins as sp
from ansible_collections.blackwell.sglang.plugins.module_utils import _stack_refresh as sr

try:
    import yaml
    HAS_YAML = True
except ImportError:  # pragma: no cover
    HAS_YAML = False

_HEX40 = re.compile(r"^[0-9a-f]{40}$")


def _is_git(module, src):
    git = module.get_bin_path("git")
    if not git or not os.path.exists(os.path.join(src, ".git")):
        return None
    return git


def _git_tree(module, git, src, ref, scratch):
    """``(root, commit, date)`` of the checkout at ``ref``, read with git archive into ``scratch``."""
    rc, out, err = module.run_command([git, "-C", src, "rev-parse", "--verify", "--quiet", "%s^{commit}" % ref])
    if rc != 0 or not _HEX40.match(out.strip()):
        module.fail_json(msg="ref: %r is not a commit of the git checkout %s %s" % (ref, src, err.strip()))
    commit = out.strip()
    rc, out, err = module.run_command([git, "-C", src, "show", "-s", "--format=%cI", commit])
    if rc != 0:
        module.fail_json(msg="git show %s failed: %s" % (commit, err.strip()))
    date = out.strip()
    rc, out, err = module.run_command([git, "-C", src, "ls-tree", "--name-only", commit])
    tops = [t for t in out.split() if t in ("python", "sgl-kernel")]
    if "python" not in tops:
        module.fail_json(msg="src: commit %s of %s has no python/ directory (not an SGLang tree)" % (commit, src))
    archive = os.path.join(scratch, "tree.tar")
    rc, _out, err = module.run_command([git, "-C", src, "archive", "--format=tar", "-o", archive, commit] + tops)
    if rc != 0:
        module.fail_json(msg="git archive %s failed: %s" % (commit, err.strip()))
    root = os.path.join(scratch, "tree")
    with tarfile.open(archive) as tf:
        members = [m for m in tf.getmembers() if (m.isfile() or m.isdir()) and not m.name.startswith("/")
                   and ".." not in m.name.split("/")]
        tf.extractall(root, members=members)
    return root, commit, date


def _load_stack(module, stack_dir, name, presets):
    """The base stack: a preset the collection ships, else the inventory preset file ``stack_<name>.yml``."""
    if name in presets:
        if not isinstance(presets[name], dict):
            module.fail_json(msg="presets: %s is not a mapping" % name)
        return dict(presets[name])
    path = os.path.join(stack_dir, sr.STACK_FILE % name)
    if not os.path.isfile(path):
        have = sorted(f[len("stack_"):-len(".yml")] for f in os.listdir(stack_dir)
                      if f.startswith("stack_") and f.endswith(".yml"))
        module.fail_json(msg="base: no stack %r: not a preset of the collection (%s) nor a file %s in %s (stacks "
                             "there: %s)" % (name, ", ".join(sorted(presets)) or "none given", sr.STACK_FILE % name,
                                             stack_dir, ", ".join(have) or "none"))
    if not HAS_YAML:
        module.fail_json(msg=missing_required_lib("PyYAML"))
    try:
        with open(path) as fh:
            data = yaml.safe_load(fh) or {}
        return dict(data[sr.STACK_VAR % name])
    except (yaml.YAMLError, KeyError, TypeError, ValueError) as exc:
        module.fail_json(msg="base: %s does not define a mapping %s: %s" % (path, sr.STACK_VAR % name, exc))


def _same_stack(path, content, variable, stack):
    """The file holds this stack already: the same bytes, or (another base's report in its header) the same
    mapping."""
    with open(path) as fh:
        text = fh.read()
    if text == content:
        return True
    if not HAS_YAML:
        return False
    try:
        return (yaml.safe_load(text) or {}).get(variable) == stack
    except (yaml.YAMLError, AttributeError):
        return False


def _report_lines(changes, derived):
    lines = [c["line"] for c in changes]
    src = derived["sources"]
    for d in src["dependencies"]:
        if not d.get("used", True):
            state = "not configured"
        elif src.get("cache") is None:
            state = "no cache checked"
        elif d["name"] in src["mismatched"]:
            state = "in the cache at another revision"
        elif d["name"] in src["missing"]:
            state = "missing from the cache"
        elif d["name"] in src["placeholders"]:
            state = "only a placeholder in the cache"
        else:
            state = "in the cache"
        lines.append("source %s %s (%s): %s" % (d["name"], d.get("ref") or "-", d["declared_in"], state))
    for name, p in derived["patches"]["patches"].items():
        lines.append("patch %s: %s (%s)" % (name, p["state"], p["reason"]))
    t = derived["patches"]["together"]
    lines.append("patches together: %s (%s)" % (t["state"], t["reason"]))
    lines.extend("warning: " + w for w in derived["warnings"])
    return lines


def main():
    module = AnsibleModule(
        argument_spec=dict(
            src=dict(type="path", required=True),
            ref=dict(type="str", default=""),
            commit=dict(type="str", default=""),
            commit_date=dict(type="str", default=""),
            stack_dir=dict(type="path", required=True),
            name=dict(type="str", default=""),
            base=dict(type="str", default="current"),
            presets=dict(type="dict", default={}),
            cuda=dict(type="str", default="13.0"),
            overrides=dict(type="dict", default={}),
            service=dict(type="dict", default={}),
            repo=dict(type="str", default=""),
            source_cache=dict(type="path", default=""),
            github_artifactory=dict(type="str", default="github.com"),
            defines=dict(type="dict", default={}),
            patches=dict(type="list", elements="str", choices=list(tree.PATCHES), default=list(tree.PATCHES)),
            target_archs=dict(type="list", elements="str", default=["sm_120a"]),
        ),
        supports_check_mode=True,
    )
    p = module.params
    if not sp.HAS_PACKAGING:
        module.fail_json(msg=missing_required_lib("packaging"), exception=str(sp.PACKAGING_IMPORT_ERROR))
    src = p["src"]
    if not os.path.isdir(src):
        module.fail_json(msg="src: %s is not a directory" % src)
    if not os.path.isdir(p["stack_dir"]):
        module.fail_json(msg="stack_dir: %s is not a directory" % p["stack_dir"])
    unknown = sorted(set(p["service"]) - set(sr.SERVICE_KEYS))
    if unknown:
        module.fail_json(msg="service: unknown key(s) %s (use %s)" % (", ".join(unknown), ", ".join(sr.SERVICE_KEYS)))
    if p["commit"] and not _HEX40.match(p["commit"]):
        module.fail_json(msg="commit must be a full 40-digit lower-case commit id, got %r" % p["commit"])
    scratch = tempfile.mkdtemp(prefix="sglang-stack-refresh-")
    try:
        git = _is_git(module, src)
        if git:
            root, commit, date = _git_tree(module, git, src, p["ref"] or "HEAD", scratch)
            if p["commit"] and p["commit"] != commit:
                module.fail_json(msg="commit %s is not what ref %r resolves to (%s)"
                                 % (p["commit"], p["ref"] or "HEAD", commit))
            date = p["commit_date"] or date
        else:
            if p["ref"]:
                module.fail_json(msg="ref: %s is not a git checkout, so there is no ref to read (give commit and "
                                     "commit_date for a plain directory)" % src)
            if not p["commit"]:
                module.fail_json(msg="commit: required for a plain directory (%s is not a git checkout)" % src)
            if not p["commit_date"]:
                module.fail_json(msg="commit_date: required for a plain directory (%s is not a git checkout)" % src)
            root, commit, date = src, p["commit"], p["commit_date"]
        try:
            name = sr.check_name(p["name"] or sr.stack_name(commit, date))
        except sr.RefreshError as exc:
            module.fail_json(msg=to_native(exc))
        if name in p["presets"]:
            module.fail_json(msg="name: %s is a preset the collection ships (sglang_stack_presets), which "
                                 "sglang_stack_preset: %s selects before any inventory preset; pass another name"
                                 % (name, name))
        base = _load_stack(module, p["stack_dir"], p["base"], p["presets"]) if p["base"] else {}
        service = dict((k, base.get(k)) for k in sr.SERVICE_KEYS if base.get(k))
        service.update(dict((k, v) for k, v in p["service"].items() if v not in (None, "")))
        try:
            derived = sr.derive(
                root, commit, date, cuda=p["cuda"], overrides=p["overrides"], service=service,
                repo=p["repo"] or base.get("sglang_repo") or sr.DEFAULT_REPO, cache=p["source_cache"] or None,
                github_artifactory=p["github_artifactory"], defines=dict((str(k), str(v)) for k, v in p["defines"].items()),
                patches=p["patches"], target_archs=p["target_archs"], scratch=scratch)
        except sr.Refusal as exc:
            module.fail_json(msg="refused: %s" % to_native(exc), causes=exc.causes, commit=commit)
        except (sr.RefreshError, sp.MissingPackaging, tree.LayoutError) as exc:
            module.fail_json(msg=to_native(exc), commit=commit)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if git:
        # read from a scratch copy that is gone now: name the kernel tree in the checkout
        derived["kernel"]["dir"] = "%s@%s:%s" % (src, commit[:10], derived["kernel"]["layout"])

    changes = sr.compare(base, derived["stack"]) if p["base"] else []
    report = _report_lines(changes, derived)
    content = sr.render(name, derived["stack"], date, [c["line"] for c in changes], p["base"] or None)
    path = os.path.join(p["stack_dir"], sr.STACK_FILE % name)
    changed = True
    if os.path.exists(path):
        if not _same_stack(path, content, sr.STACK_VAR % name, derived["stack"]):
            module.fail_json(msg="name: %s exists with other content; a stack file is never overwritten (pass "
                                 "another name, or remove the file)" % path, path=path)
        changed = False
    if changed and not module.check_mode:
        tmp = path + ".tmp-%d" % os.getpid()
        with open(tmp, "w") as fh:
            fh.write(content)
        try:
            os.link(tmp, path)  # fails if the file appeared meanwhile: never over an existing file
        except OSError as exc:
            module.fail_json(msg="writing %s failed: %s" % (path, exc))
        finally:
            os.unlink(tmp)
    stack = derived["stack"]
    module.exit_json(changed=changed, path=path, name=name, variable=sr.STACK_VAR % name, stack=stack,
                     content=content, commit=commit, sglang_pins=derived["sglang_pins"],
                     kernel=derived["kernel"], sources=derived["sources"], patches=derived["patches"],
                     changes=changes, report_lines=report, warnings_found=derived["warnings"])


if __name__ == "__main__":
    main()
