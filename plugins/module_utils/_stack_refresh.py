# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang contributors
# Apache-2.0 (see LICENSE)
"""Derive a stack preset (``stack_<name>.yml``: ``sglang_stack_preset_<name>``) from an SGLang tree, and report what
changed against another.

The logic behind ``blackwell.sglang.sglang_stack_refresh``. From the tree itself:

* every ``==`` pin of ``python/pyproject.toml``'s ``[project] dependencies`` (markers evaluated for the target),
  parsed with :mod:`packaging`;
* torch from SGLang's ``torch==`` pin as the build for the stack's CUDA (``2.13.0`` -> ``2.13.0+cu130``, stable
  index), or an explicit override (a nightly); torchvision / torchaudio from SGLang's pins or, where SGLang leaves
  them open or follows an overridden torch, the release lines that pair with torch (``_stack_pins``);
* FlashInfer from ``flashinfer_python==`` (cubin and jit-cache at the same version; pins of them must agree);
* the kernel tree (``sgl-kernel/`` or ``python/sglang/kernels/aot/``), its distribution and version from its own
  ``pyproject.toml``, which must be what SGLang pins;
* its FetchContent sources (``_sgl_kernel_sources``) against a source cache, and the state of each SM12x patch
  (``_sgl_kernel_tree.plan`` in memory, one patch at a time and all together);
* the service backends checked against the tree's ``server_args.py`` ``*_CHOICES`` lists.

:class:`Refusal` carries every reason the tree's pins cannot be satisfied together (torchvision / torchaudio that
do not pair with torch, FlashInfer packages at different versions, CUDA majors or minors that differ among the
``nvidia-*`` / ``cuda-*`` pins or exclude the stack's CUDA, the kernel's version or build requirement against the
pins, SGLang's requirements left unresolved). Nothing here writes; the module writes the file.
"""

from __future__ import annotations

import ast
import json
import os
import re
import textwrap

from ansible_collections.blackwell.sglang.plugins.module_utils import _sgl_kernel_sources as sources
from ansible_collections.blackwell.sglang.plugins.module_utils import _sgl_kernel_tree as tree
from ansible_collections.blackwell.sglang.plugins.module_utils import _stack_pins as sp

try:
    import tomllib
except ImportError:  # pragma: no cover - Python < 3.11
    try:
        import tomli as tomllib
    except ImportError:
        tomllib = None

TORCH_INDEX_BASE = "https://download.pytorch.org/whl"
DEFAULT_REPO = "https://github.com/sgl-project/sglang.git"
SERVICE_KEYS = ("kv_cache_dtype", "moe_runner_backend", "fp4_gemm_backend")
# service key -> the server_args.py list of choices that holds its values
SERVICE_CHOICES = {"moe_runner_backend": "MOE_RUNNER_BACKEND_CHOICES",
                   "fp4_gemm_backend": "FP4_GEMM_RUNNER_BACKEND_CHOICES"}
OVERRIDE_KEYS = ("torch", "torchvision", "torchaudio", "flashinfer", "sgl_kernel")
# Distributions whose version's major.minor is the CUDA release they belong to (cuda-python 12.9 = CUDA 12.9,
# nvidia-cuda-runtime-cu12 12.8.90 = CUDA 12.8); libraries with their own numbering (cudnn, nccl, cufft, ...) are not.
CUDA_VERSIONED = ("cuda-python", "cuda-bindings", "nvidia-cuda-runtime", "nvidia-cuda-nvrtc", "nvidia-cuda-cupti",
                  "nvidia-cuda-nvcc", "nvidia-nvjitlink", "nvidia-cuda-cccl", "nvidia-nvtx", "nvidia-cublas",
                  "nvidia-cuda-crt", "nvidia-nvvm")
_CU_SUFFIX = re.compile(r"^(?P<base>.+)-cu(?P<major>\d{2})$")
_CU_EXTRA = re.compile(r"^cu(?P<major>\d{2})$")
_HEX40 = re.compile(r"^[0-9a-f]{40}$")
_DATE = re.compile(r"^(\d{4})-(\d{2})-(\d{2})")
_NAME = re.compile(r"^[a-z0-9_]+$")
STACK_FILE = "stack_%s.yml"
STACK_VAR = "sglang_stack_preset_%s"


class RefreshError(Exception):
    """Bad input (the message names the option or the file)."""


class Refusal(Exception):
    """The tree's pins cannot be satisfied together; ``causes`` lists every reason."""

    def __init__(self, causes, partial=None):
        self.causes = list(causes)
        self.partial = partial or {}
        super(Refusal, self).__init__("the tree's pins cannot be satisfied together: " + "; ".join(self.causes))


# ----------------------------------------------------------------------------------------------------------------
# Reading the tree
# ----------------------------------------------------------------------------------------------------------------

def _toml(path, what):
    if tomllib is None:
        raise RefreshError("reading %s needs Python 3.11 (tomllib) or the tomli library" % what)
    try:
        with open(path, "rb") as fh:
            return tomllib.load(fh)
    except (IOError, OSError) as exc:
        raise RefreshError("%s: cannot read %s: %s" % (path, what, exc))
    except ValueError as exc:
        raise RefreshError("%s: not valid TOML: %s" % (path, exc))


def sglang_requirements(root):
    """``[project] dependencies`` of ``<root>/python/pyproject.toml``."""
    path = os.path.join(root, "python", "pyproject.toml")
    if not os.path.isfile(path):
        raise RefreshError("src: no python/pyproject.toml under %s (not an SGLang tree)" % root)
    data = _toml(path, "SGLang's pyproject")
    deps = (data.get("project") or {}).get("dependencies")
    if not isinstance(deps, list) or not all(isinstance(d, str) for d in deps):
        raise RefreshError("%s: [project] dependencies is not a list of requirement strings" % path)
    return path, deps


def kernel_package(kernel_dir):
    """``(name, version, build requirements)`` of the kernel tree's own ``pyproject.toml``."""
    path = os.path.join(kernel_dir, "pyproject.toml")
    data = _toml(path, "the kernel's pyproject")
    project = data.get("project") or {}
    name, version = project.get("name"), project.get("version")
    if not name or not version:
        raise RefreshError("%s: [project] has no name/version" % path)
    build = (data.get("build-system") or {}).get("requires") or []
    return str(name), str(version), [str(b) for b in build]


def server_args_choices(root):
    """Module-level ``*_CHOICES`` lists of ``python/sglang/srt/server_args.py`` (AST; {} when absent)."""
    path = os.path.join(root, "python", "sglang", "srt", "server_args.py")
    if not os.path.isfile(path):
        return {}
    with open(path, "rb") as fh:
        try:
            body = ast.parse(fh.read()).body
        except SyntaxError:
            return {}
    out = {}
    for node in body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) \
                and node.targets[0].id.endswith("_CHOICES") and isinstance(node.value, ast.List) \
                and all(isinstance(e, ast.Constant) for e in node.value.elts):
            out[node.targets[0].id] = [e.value for e in node.value.elts]
    return out


# ----------------------------------------------------------------------------------------------------------------
# CUDA consistency of the pins
# ----------------------------------------------------------------------------------------------------------------

def cuda_tag(cuda):
    """``13.0`` -> ``cu130``."""
    major, minor = cuda_major_minor(cuda, "cuda")
    return "cu%d%d" % (major, minor)


def cuda_major_minor(cuda, option):
    m = re.match(r"^(\d+)\.(\d+)$", str(cuda or "").strip())
    if not m:
        raise RefreshError("%s must be a CUDA major.minor such as 13.0, got %r" % (option, cuda))
    return int(m.group(1)), int(m.group(2))


def cuda_problems(reqs, cuda):
    """``(refusals, warnings)`` of the applicable requirements' CUDA releases against each other and ``cuda``."""
    major, minor = cuda_major_minor(cuda, "cuda")
    refusals, warnings = [], []
    majors = []      # (major, what)
    exact = []       # (major, minor, what)
    for req in reqs:
        name = sp.canonicalize_name(req.name)
        m = _CU_SUFFIX.match(name)
        base = m.group("base") if m else name
        if m:
            majors.append((int(m.group("major")), "%s (name)" % req))
        for extra in sorted(req.extras):
            e = _CU_EXTRA.match(extra.lower())
            if e:
                majors.append((int(e.group("major")), "%s (extra [%s])" % (req, extra)))
        if base in CUDA_VERSIONED:
            pin = sp.exact_pin(req)
            if pin:
                v = sp.parse_version(pin, name)
                exact.append((v.major, v.minor if len(v.release) > 1 else 0, str(req)))
                majors.append((v.major, str(req)))
            elif req.specifier:
                # a range (cuda-python>=13.0): does it admit any release of the stack's major?
                if not any(req.specifier.contains(sp.parse_version("%d.%d" % (major, n)), prereleases=True)
                           for n in range(0, 10)):
                    lows = [s.version for s in req.specifier if s.operator in (">=", ">", "~=", "==")]
                    want = sp.parse_version(lows[0]).major if lows else None
                    majors.append((want if want is not None else -1, str(req)))
    seen = sorted(set(mj for mj, _w in majors if mj >= 0))
    if len(seen) > 1:
        groups = ["CUDA %d: %s" % (mj, ", ".join(w for m2, w in majors if m2 == mj)) for mj in seen]
        refusals.append("CUDA major mismatch among the pins: " + " vs ".join(groups))
    minors = sorted(set((a, b) for a, b, _w in exact))
    if len(minors) > 1 and len(set(a for a, _b in minors)) == 1:
        refusals.append("CUDA minor mismatch among the nvidia-*/cuda-* pins: " + " vs ".join(
            "%s (CUDA %d.%d)" % (w, a, b) for a, b, w in exact))
    for mj in seen:
        if mj > major:
            refusals.append("the pins need CUDA %d (%s); the stack's CUDA (option cuda) is %s" % (
                mj, ", ".join(w for m2, w in majors if m2 == mj), cuda))
        elif mj < major:
            warnings.append("%s: a CUDA %d package on a CUDA %s stack (it brings its own CUDA %d libraries; the "
                            "driver runs them)" % (", ".join(w for m2, w in majors if m2 == mj), mj, cuda, mj))
    for a, b, what in exact:
        if a == major and b > minor:
            refusals.append("%s is CUDA %d.%d, newer than the stack's CUDA %s (option cuda)" % (what, a, b, cuda))
    return refusals, warnings


# ----------------------------------------------------------------------------------------------------------------
# Derivation
# ----------------------------------------------------------------------------------------------------------------

def _override(overrides, key):
    o = overrides.get(key)
    if o is None:
        return None, None
    return str(o["version"]) if o.get("version") not in (None, "") else None, str(o.get("reason") or "").strip()


def check_overrides(overrides):
    """Validate the ``overrides`` option: ``{key: {version, reason}}`` with keys of :data:`OVERRIDE_KEYS`."""
    out = {}
    for key, value in (overrides or {}).items():
        if key not in OVERRIDE_KEYS:
            raise RefreshError("overrides.%s: unknown key (use one of %s)" % (key, ", ".join(OVERRIDE_KEYS)))
        if not isinstance(value, dict):
            raise RefreshError("overrides.%s must be a mapping with version and reason, got %r" % (key, value))
        unknown = sorted(set(value) - {"version", "reason"})
        if unknown:
            raise RefreshError("overrides.%s: unknown field(s) %s (version, reason)" % (key, ", ".join(unknown)))
        if not str(value.get("reason") or "").strip():
            raise RefreshError("overrides.%s.reason is empty: every departure from SGLang's pins says why" % key)
        if key != "sgl_kernel":
            if not str(value.get("version") or "").strip():
                raise RefreshError("overrides.%s.version is empty" % key)
            try:
                sp.parse_version(value["version"])
            except ValueError:
                raise RefreshError("overrides.%s.version %r is not a PEP 440 version" % (key, value["version"]))
        out[key] = dict(value)
    return out


def _with_local(version, tag):
    v = sp.parse_version(version)
    return str(v) if v.local else "%s+%s" % (v, tag)


def derive(root, commit, commit_date, cuda="13.0", overrides=None, service=None, repo=DEFAULT_REPO,
           cache=None, github_artifactory="github.com", defines=None, patches=tree.PATCHES,
           target_archs=("sm_120a",), protected=sp.PROTECTED, env=None, scratch=None,
           torch_index_base=TORCH_INDEX_BASE):
    """The stack of the SGLang tree at ``root`` (a checkout root holding ``python/``).

    :returns: dict ``stack`` (the mapping to write), ``sglang_pins``, ``kernel``, ``sources``, ``patches``,
        ``warnings``, ``derived_overrides``.
    :raises RefreshError: bad input or an unreadable tree.
    :raises Refusal: the pins cannot be satisfied together.
    """
    sp.need_packaging()
    overrides = check_overrides(overrides)
    tag = cuda_tag(cuda)
    env = env or sp.TARGET
    pyproject, lines = sglang_requirements(root)
    try:
        reqs = sp.applicable(lines, env)
    except ValueError as exc:
        raise RefreshError("%s: %s" % (pyproject, exc))
    by_name = {}
    for req in reqs:
        by_name.setdefault(sp.canonicalize_name(req.name), []).append(req)
    sglang_pins = {}
    for req in reqs:
        pin = sp.exact_pin(req)
        if pin:
            sglang_pins[sp.canonicalize_name(req.name)] = pin
    refusals, warnings = cuda_problems(reqs, cuda)
    reasons = {}  # canonical distribution -> why the stack departs from SGLang's pin

    def sglang_pin(name):
        return sglang_pins.get(name)

    def spec_of(name):
        return ", ".join(str(r) for r in by_name.get(name, [])) or None

    # --- torch
    torch, why = _override(overrides, "torch")
    if torch:
        v = sp.parse_version(torch, "overrides.torch.version")
        if not v.local:
            torch = "%s+%s" % (v, tag)
        elif v.local != tag:
            refusals.append("overrides.torch.version %s is a %s build; the stack's CUDA (option cuda) %s needs %s"
                            % (torch, v.local, cuda, tag))
        if "torch" in by_name and not _satisfies(by_name["torch"], torch):
            reasons["torch"] = why
    elif sglang_pin("torch"):
        torch = _with_local(sglang_pin("torch"), tag)
    else:
        raise Refusal(["SGLang pins no torch version (%s): give overrides.torch" % (spec_of("torch") or "torch not required")])
    torch_v = sp.parse_version(torch)
    nightly = torch_v.dev is not None
    torch_overridden = bool(reasons.get("torch"))

    # --- torchvision / torchaudio
    companions = {}
    for name in ("torchvision", "torchaudio"):
        given, why = _override(overrides, name)
        pin = sglang_pin(name)
        try:
            paired = sp.torchvision_for(torch) if name == "torchvision" else sp.torchaudio_for(torch)
        except ValueError as exc:
            refusals.append(str(exc))
            continue
        if given:
            version = _with_local(given, tag)
            if pin and not _satisfies(by_name[name], version):
                reasons[name] = why
        elif pin and sp.pairs_with_torch(name, pin, torch) is None:
            version = _with_local(pin, tag)
            if nightly:
                version = paired   # SGLang's release pin as the nightly build of torch's date
                if not _satisfies(by_name[name], version):
                    reasons[name] = ("follows the torch override: SGLang pins %s==%s; %s is the build of torch "
                                     "%s's nightly date" % (name, pin, version, torch))
        elif pin and torch_overridden:
            version = paired
            reasons[name] = ("SGLang pins %s==%s, which pairs with torch==%s; the build that pairs with torch %s "
                             "replaces it" % (name, pin, sglang_pin("torch"), torch))
        elif pin:
            refusals.append("SGLang pins %s==%s, which has no release for its torch==%s: %s"
                            % (name, pin, sglang_pin("torch"), sp.pairs_with_torch(name, pin, torch)))
            continue
        else:
            version = paired
            if name in by_name and not _satisfies(by_name[name], version):
                refusals.append("SGLang requires %s; the %s that pairs with torch %s is %s"
                                % (spec_of(name), name, torch, version))
        companions[name] = version
    for name, version in companions.items():
        why_not = sp.pairs_with_torch(name, version, torch)
        if why_not and name in overrides:
            refusals.append("overrides.%s: %s" % (name, why_not))

    # --- FlashInfer
    fi_pins = dict((d, sglang_pin(d)) for d in sp.FLASHINFER_DISTS if sglang_pin(d))
    if len(set(fi_pins.values())) > 1:
        refusals.append("the FlashInfer packages must be one version (SGLang's Dockerfile asserts it), the pins "
                        "differ: " + ", ".join("%s==%s" % kv for kv in sorted(fi_pins.items())))
    flashinfer, why = _override(overrides, "flashinfer")
    if flashinfer:
        first = None
        for dist in sp.FLASHINFER_DISTS:
            if dist in by_name and not _satisfies(by_name[dist], flashinfer):
                reasons[dist] = why if first is None else (
                    "same version as %s (all three FlashInfer packages must match)" % first)
                first = first or dist
    elif fi_pins.get("flashinfer-python"):
        flashinfer = fi_pins["flashinfer-python"]
    elif fi_pins:
        flashinfer = sorted(fi_pins.values())[0]
    else:
        refusals.append("SGLang pins no flashinfer-python version (%s): give overrides.flashinfer"
                        % (spec_of("flashinfer-python") or "not required"))
        flashinfer = None

    # --- the kernel tree
    try:
        kernel_dir, layout = tree.find_kernel_dir(root)
    except tree.LayoutError as exc:
        raise RefreshError("src: %s" % exc)
    kname, kversion, kbuild = kernel_package(kernel_dir)
    kdist = sp.canonicalize_name(kname)
    kernel_why = (overrides.get("sgl_kernel") or {}).get("reason")
    required_kernels = [n for n in ("sgl-kernel", "sglang-kernel") if n in by_name]
    if required_kernels and kdist not in required_kernels:
        refusals.append("SGLang requires %s, its kernel tree %s builds %s %s"
                        % (spec_of(required_kernels[0]), layout, kname, kversion))
    elif kdist in by_name and not _satisfies(by_name[kdist], kversion):
        if kernel_why:
            reasons[kdist] = kernel_why
        else:
            refusals.append("SGLang requires %s, its kernel tree %s builds %s %s (overrides.sgl_kernel.reason "
                            "accepts it)" % (spec_of(kdist), layout, kname, kversion))
    for line in kbuild:
        breq = sp.parse_requirement(line, "%s build-system requires" % os.path.join(kernel_dir, "pyproject.toml"))
        if sp.canonicalize_name(breq.name) == "torch" and breq.specifier \
                and not breq.specifier.contains(torch_v, prereleases=True):
            refusals.append("the kernel's build-system requires %s, the stack's torch is %s" % (line, torch))

    stack = {
        "sglang_repo": repo,
        "sglang_ref": commit,
        "torch": torch,
        "torchvision": companions.get("torchvision"),
        "torchaudio": companions.get("torchaudio"),
        "torch_index_url": "%s/%s%s" % (torch_index_base.rstrip("/"), "nightly/" if nightly else "", tag),
        "cuda": "%d.%d" % cuda_major_minor(cuda, "cuda"),
        "flashinfer": flashinfer,
        "sgl_kernel": kversion,
        "sgl_kernel_distribution": kname,
        "sglang_requirement_overrides": dict((k, v) for k, v in sorted(reasons.items())),
    }
    service = dict(service or {})
    choices = server_args_choices(root)
    for key in SERVICE_KEYS:
        value = service.get(key)
        if value in (None, ""):
            refusals.append("service.%s is not set (no base stack holds it either)" % key)
            continue
        stack[key] = str(value)
        listed = choices.get(SERVICE_CHOICES.get(key, ""))
        if listed is not None and stack[key] not in listed:
            refusals.append("service.%s %s is not a choice of SGLang at %s (%s: %s)"
                            % (key, value, commit[:10], SERVICE_CHOICES[key], ", ".join(listed)))

    # --- SGLang's own requirements against the result (the check of tests/unit/source/test_stack_pins.py)
    if not refusals and flashinfer:
        for problem in sp.resolve(lines, stack, protected, env):
            refusals.append("unresolved: " + problem)
        for problem in sp.companion_problems(stack):
            refusals.append(problem)

    # --- sources and patches (reported; never a refusal: the build refuses a missing source itself)
    src_result = source_report(root, cache, github_artifactory, defines, scratch)
    patch_result = patch_report(root, patches, target_archs, cuda)
    extra = {"sglang_pins": sglang_pins, "warnings": warnings,
             "kernel": {"dir": kernel_dir, "layout": layout, "distribution": kname, "version": kversion,
                        "build_requires": kbuild},
             "sources": src_result, "patches": patch_result, "pyproject": pyproject}
    if refusals:
        raise Refusal(_unique(refusals), partial=dict(extra, stack=stack))
    stack["refresh"] = {
        "commit_date": commit_date,
        "kernel_tree": layout,
        "sglang_pins": dict(sorted(sglang_pins.items())),
        "kernel_sources": dict((d["name"], d.get("ref") or d.get("url") or "") for d in src_result["dependencies"]),
        "kernel_sources_missing": list(src_result["missing"]),
        "kernel_sources_mismatched": list(src_result["mismatched"]),
        "kernel_patches": dict((p, s["state"]) for p, s in patch_result["patches"].items()),
    }
    return dict(extra, stack=stack)


def _unique(items):
    out = []
    for i in items:
        if i not in out:
            out.append(i)
    return out


def _satisfies(reqs, version):
    v = sp.parse_version(version)
    return all(r.specifier.contains(v, prereleases=True) for r in reqs)


def source_report(root, cache, github_artifactory, defines, scratch):
    try:
        result = sources.kernel_sources(root, cache=cache or None, github_artifactory=github_artifactory,
                                        scratch=scratch, defines=defines)
    except sources.SourcesError as exc:
        raise RefreshError("source_cache: %s" % exc)
    deps = []
    for d in result["dependencies"]:
        deps.append(dict((k, d.get(k)) for k in ("name", "variable", "style", "repository", "ref", "url_hash",
                                                 "declared_in", "parent", "used", "present", "placeholder",
                                                 "ref_matches")))
    present = [d["name"] for d in deps if d.get("present") and d.get("used", True)
               and d["name"] not in result["mismatched"]]
    return {"cache": result.get("cache"), "dependencies": deps, "present": present, "missing": result["missing"],
            "mismatched": result["mismatched"], "placeholders": result["placeholders"],
            "complete": result["complete"], "lines": sources.describe_missing(result)}


def patch_report(root, patches, target_archs, cuda):
    """State of each patch alone (``applies``, ``holds``, ``not_needed``, ``fails``) and of all together."""
    out = {}
    for name in patches:
        try:
            r = tree.plan(root, patches=[name], target_archs=target_archs, cuda_version=cuda)
        except tree.PatchError as exc:
            out[name] = {"state": "fails", "reason": str(exc)}
            continue
        except ValueError as exc:
            raise RefreshError("patches: %s" % exc)
        state = "applies" if name in r["applied"] else "holds" if name in r["already_applied"] else "not_needed"
        out[name] = {"state": state, "reason": r["details"].get(name, "")}
    together = {"state": "applies", "reason": ""}
    try:
        r = tree.plan(root, patches=list(patches), target_archs=target_archs, cuda_version=cuda)
        counts = (len(r["applied"]), len(r["already_applied"]), len(r["not_needed"]))
        together["reason"] = "%d apply, %d hold, %d not needed" % counts
        if not r["changed"]:
            together["state"] = "holds"
    except tree.PatchError as exc:
        together = {"state": "fails", "reason": str(exc)}
    return {"patches": out, "together": together}


# ----------------------------------------------------------------------------------------------------------------
# What changed, and what each change affects
# ----------------------------------------------------------------------------------------------------------------

AFFECTS = {
    "sglang_repo": ["sglang_source clones from another repository"],
    "sglang_ref": ["new SGLang checkout and release (release key sglang_ref)", "sglang reinstalled",
                   "kernel re-patched and rebuilt from the new tree"],
    "torch": ["torch reinstalled in a new release venv (release key torch_version)",
              "torchvision / torchaudio follow torch", "kernel rebuilt (libtorch ABI)",
              "flashinfer reinstalled into the new venv (TVM-FFI wheels: not tied to torch)"],
    "torchvision": ["torchvision reinstalled with torch (torch_nightly_extra_packages)"],
    "torchaudio": ["torchaudio reinstalled with torch (torch_nightly_extra_packages)"],
    "torch_index_url": ["torch_nightly installs from another index (mirror the wheels of the new one)"],
    "cuda": ["cuda_toolchain installs another CUDA toolkit (release key cuda_version)",
             "torch, flashinfer-jit-cache and the kernel rebuilt / reinstalled for it"],
    "flashinfer": ["flashinfer-python, -cubin and -jit-cache reinstalled (release key flashinfer_version)",
                   "FlashInfer JIT modules compiled again on first start", "FP4 probe picks the backends again"],
    "sgl_kernel": ["kernel wheel rebuilt (new build key)"],
    "sgl_kernel_distribution": ["the old kernel distribution is uninstalled, the new one installed (sgl_kernel_sm120)"],
    "sglang_requirement_overrides": ["sglang_source's constraints change (departures from SGLang's pins)"],
    "kv_cache_dtype": ["sglang_service flag --kv-cache-dtype: service restarted"],
    "moe_runner_backend": ["sglang_service flag --moe-runner-backend: service restarted"],
    "fp4_gemm_backend": ["sglang_service flag --fp4-gemm-backend: service restarted"],
    "kernel_tree": ["the kernel builds from another directory of the checkout; the patches anchor there"],
}
STACK_KEYS = ("sglang_repo", "sglang_ref", "torch", "torchvision", "torchaudio", "torch_index_url", "cuda",
              "flashinfer", "sgl_kernel", "sgl_kernel_distribution", "sglang_requirement_overrides") + SERVICE_KEYS


def _short(value):
    if isinstance(value, str) and _HEX40.match(value):
        return value[:10]
    return value


def _change(key, old, new, affects):
    line = "%s %s -> %s" % (key, _short(old) if old is not None else "(none)", _short(new) if new is not None
                            else "(none)")
    if affects:
        line += ": " + ", ".join(affects)
    return {"key": key, "old": old, "new": new, "affects": list(affects), "line": line}


def compare(base, new):
    """Changes from the stack mapping ``base`` to ``new``: list of ``{key, old, new, affects, line}``."""
    changes = []
    for key in STACK_KEYS:
        old, cur = base.get(key), new.get(key)
        if key == "sglang_requirement_overrides":
            old, cur = dict(old or {}), dict(cur or {})
            for name in sorted(set(old) | set(cur)):
                if name not in cur:
                    changes.append(dict(_change("override %s" % name, old[name], None, []),
                                        line="override %s dropped: SGLang's own pin of %s is used again"
                                        % (name, name)))
                elif name not in old:
                    changes.append(dict(_change("override %s" % name, None, cur[name], []),
                                        line="override %s added: departs from SGLang's pin (%s)" % (name, cur[name])))
            continue
        if old != cur:
            affects = list(AFFECTS.get(key, []))
            if key == "torch" and old and cur:
                affects.insert(0, _torch_kind(old, cur))
            changes.append(_change(key, old, cur, affects))
    bref, nref = base.get("refresh") or {}, new.get("refresh") or {}
    if bref.get("kernel_tree") and nref.get("kernel_tree") and bref["kernel_tree"] != nref["kernel_tree"]:
        changes.append(_change("kernel_tree", bref["kernel_tree"], nref["kernel_tree"], AFFECTS["kernel_tree"]))
    if bref.get("sglang_pins") is not None and nref.get("sglang_pins") is not None:
        old, cur = bref["sglang_pins"], nref["sglang_pins"]
        for name in sorted(set(old) | set(cur)):
            if sp.is_protected(name):
                continue  # torch, flashinfer, the kernel: reported above with their effects
            if old.get(name) != cur.get(name):
                if name not in cur:
                    what = "SGLang no longer pins %s exactly (sglang_source installs what it requires now)" % name
                else:
                    what = "sglang_source installs %s==%s (SGLang's own pin)" % (name, cur[name])
                changes.append(_change("pin %s" % name, old.get(name), cur.get(name), [what]))
    if bref.get("kernel_sources") is not None and nref.get("kernel_sources") is not None:
        old, cur = bref["kernel_sources"], nref["kernel_sources"]
        for name in sorted(set(old) | set(cur)):
            if old.get(name) != cur.get(name):
                what = ("no longer fetched by the kernel build" if name not in cur else
                        "the source cache needs %s at %s for offline builds" % (name, _short(cur[name])))
                changes.append(_change("source %s" % name, old.get(name), cur.get(name), [what]))
    return changes


def _torch_kind(old, new):
    a, b = sp.parse_version(old), sp.parse_version(new)
    if a.dev is not None and b.dev is None:
        return "nightly -> release"
    if a.dev is None and b.dev is not None:
        return "release -> nightly"
    if a.release[:2] != b.release[:2]:
        return "new release line %d.%d" % (b.release[0], b.release[1])
    return "new build"


# ----------------------------------------------------------------------------------------------------------------
# Names and the file
# ----------------------------------------------------------------------------------------------------------------

def date_compact(commit_date, option="commit_date"):
    m = _DATE.match(str(commit_date or ""))
    if not m:
        raise RefreshError("%s must start with a date YYYY-MM-DD, got %r" % (option, commit_date))
    return "".join(m.groups())


def stack_name(commit, commit_date):
    """``<YYYYMMDD>_<sha10>``."""
    return "%s_%s" % (date_compact(commit_date), commit[:10])


def check_name(name):
    if not _NAME.match(name or ""):
        raise RefreshError("name must be lower-case letters, digits and _ (it is part of a variable name), got %r"
                           % name)
    return name


def _scalar(value):
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return json.dumps(str(value))


def _mapping_lines(mapping, indent):
    out = []
    pad = " " * indent
    if not mapping:
        return None
    for key in mapping:
        value = mapping[key]
        if isinstance(value, dict):
            inner = _mapping_lines(value, indent + 2)
            if inner is None:
                out.append("%s%s: {}" % (pad, _key(key)))
            else:
                out.append("%s%s:" % (pad, _key(key)))
                out.extend(inner)
        elif isinstance(value, list):
            if not value:
                out.append("%s%s: []" % (pad, _key(key)))
            else:
                out.append("%s%s:" % (pad, _key(key)))
                out.extend("%s  - %s" % (pad, _scalar(v)) for v in value)
        else:
            out.append("%s%s: %s" % (pad, _key(key), _scalar(value)))
    return out


def _key(key):
    return key if re.match(r"^[A-Za-z_][A-Za-z0-9_.-]*$", key) else json.dumps(key)


def render(name, stack, commit_date, report_lines, base_name=None):
    """The YAML text of ``stack_<name>.yml`` (deterministic: the same tree gives the same bytes)."""
    head = ["---",
            "# Derived by blackwell.sglang.sglang_stack_refresh (playbooks/stack_refresh.yml)",
            "# from SGLang %s (%s)." % (stack["sglang_ref"], commit_date),
            "# Pins are SGLang's own (python/pyproject.toml) unless sglang_requirement_overrides says why not; `refresh`",
            "# records what the tree held. Select it with sglang_stack_preset: %s" % name]
    if base_name:
        head.append("# Changes against stack %s:" % base_name)
    for line in report_lines:
        head.extend(textwrap.wrap(line, width=150, initial_indent="#   ", subsequent_indent="#     ",
                                  break_long_words=False, break_on_hyphens=False))
    body = _mapping_lines({STACK_VAR % name: stack}, 0)
    return "\n".join(head + body) + "\n"


__all__ = ["derive", "compare", "render", "stack_name", "check_name", "Refusal", "RefreshError", "STACK_FILE",
           "STACK_VAR", "SERVICE_KEYS", "OVERRIDE_KEYS", "cuda_problems", "server_args_choices", "sglang_requirements"]
