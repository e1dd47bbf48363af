# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang contributors
# Apache-2.0 (see LICENSE)
"""What each dependency of the stack needs on an aarch64 host (DGX Spark GB10, Grace), reported before any change.

:data:`DEPENDENCIES` is the per-architecture dependency map (field reports S09, S11): for each dependency the route
on aarch64 (``wheel``: a manylinux aarch64 or pure-Python wheel exists; ``index``: from another index than PyPI;
``build``: built from source on the host; ``replace``: another distribution stands for it; ``omit``: not installed
there) and what to do. The ``checked`` entries were read with
``pip download --platform manylinux_2_28_aarch64 --python-version 3.12 --only-binary=:all: --no-deps <name>==<version>``
(the wheel file name pip fetched); they say which version was looked at, not that every later one has the same wheels.

:func:`check` turns the map into the preflight check ``aarch64_dependencies``: pass with no finding on x86_64;
on aarch64 it lists each route, warns for the dependencies that have no aarch64 wheel (build from source, or run that
part on an x86_64 host) and fails when glibc is older than the manylinux_2_28 wheels need. Pure Python.
"""

from __future__ import annotations

import re

AARCH64 = ("aarch64", "arm64")
MANYLINUX_GLIBC = (2, 28)

# name -> route on aarch64. ``what``: the remedy or the route in words; ``checked``: the wheel pip fetched for the
# version looked at (None: no wheel was found for that version).
DEPENDENCIES = {
    "cuda-toolkit": {
        "route": "index", "checked": None,
        "what": "NVIDIA's apt repository for sbsa (repos/<ubuntu2204|ubuntu2404>/sbsa), or the CUDA 13 pip wheels; "
                "DGX OS ships CUDA 13 already (sglang_stack_cuda_install_method: existing)"},
    "torch": {
        "route": "index", "checked": "torch-2.13.0-cp312-cp312-manylinux_2_28_aarch64.whl (PyPI)",
        "what": "install the cu130 build from download.pytorch.org/whl/cu130 first (its +cu130 aarch64 wheel), then "
                "everything else against the constraints file that pins it: a dependency on another torch makes the "
                "resolver swap in a CPU build (S09, torch_cpu_build)"},
    "flashinfer-python": {
        "route": "wheel", "checked": "flashinfer_python-0.6.5-py3-none-any.whl, flashinfer_python-0.6.17-py3-none-any.whl",
        "what": "pure-Python wheel; its kernels are JIT-compiled on the host for the local GPU"},
    "flashinfer-cubin": {
        "route": "wheel", "checked": "flashinfer_cubin-0.6.5-py3-none-any.whl",
        "what": "pure-Python wheel of prebuilt cubins (GB10 does not need it)"},
    "flashinfer-jit-cache": {
        "route": "omit", "checked": None,
        "what": "not installed on compute capability 12.1: its prebuilt libraries hold no sm_12x image and win over "
                "the local JIT build (S17, flashinfer_prebuilt_arch_gap)"},
    "sgl-kernel": {
        "route": "build", "checked": None, "by_role": True,
        "what": "built from the pinned SGLang tree on the host by sgl_kernel_sm120 (sm_121a added explicitly; no "
                "wheel of the pin for cu130 aarch64 was found), or built on an x86_64 host with sm_121a among the "
                "targets"},
    "smg": {
        "route": "wheel", "checked": "smg-1.13.0-cp38-abi3-manylinux_2_28_aarch64.whl",
        "what": "the gateway's wheel exists for aarch64; the gateway may also run on an x86_64 host"},
    "decord": {
        "route": "replace", "checked": None,
        "what": "no wheel for aarch64 ('No matching distribution found for decord'): SGLang uses decord2 there "
                "(decord2-3.4.0-cp312-cp312-manylinux_2_28_aarch64.whl)"},
    "triton": {
        "route": "wheel", "checked": "triton-3.9.0-cp312-abi3-manylinux_2_27_aarch64.manylinux_2_28_aarch64.whl",
        "what": "aarch64 wheel; install it explicitly (torch's aarch64 wheel may not pull it in) and check that "
                "'import triton' works"},
    "nvidia-cutlass-dsl": {
        "route": "wheel", "checked": "nvidia_cutlass_dsl-4.8.1-py3-none-any.whl",
        "what": "pure-Python wheel (its -libs-base companion carries the native part)"},
    "xgrammar": {
        "route": "wheel", "checked": "xgrammar-0.2.9-cp312-cp312-manylinux_2_26_aarch64.manylinux_2_28_aarch64.whl",
        "what": "aarch64 wheel"},
}

# Routes that mean "no aarch64 wheel of this dependency": the preflight says so and offers the documented way.
NO_WHEEL_ROUTES = ("build", "replace")


def is_aarch64(machine):
    return str(machine or "").strip().lower() in AARCH64


def _glibc_tuple(text):
    parts = re.findall(r"\d+", str(text or ""))
    return tuple(int(p) for p in parts[:2]) if len(parts) >= 2 else None


def plan(machine, capabilities=None):
    """The dependency routes for a host.

    :param machine: ``ansible_facts.architecture`` / ``uname -m`` (``x86_64``, ``aarch64``, ``arm64``).
    :param capabilities: the host's compute capabilities (``["12.1"]``); ``flashinfer-jit-cache`` is omitted only for
        12.1 and kept (as a wheel) otherwise.
    :returns: list of dicts ``name``, ``route``, ``what``, ``checked``; empty on x86_64 (the default routes apply).
    """
    if not is_aarch64(machine):
        return []
    caps = [str(c) for c in capabilities or []]
    out = []
    for name in sorted(DEPENDENCIES):
        entry = dict(DEPENDENCIES[name], name=name)
        if name == "flashinfer-jit-cache" and "12.1" not in caps:
            entry.update(route="wheel", what="installed as on x86_64 (no compute capability 12.1 on this host)")
        out.append(entry)
    return out


def check(machine, glibc, capabilities=None):
    """The preflight check ``aarch64_dependencies``.

    :returns: a check dict (``name``, ``status`` pass/warn/fail, ``message``, ``remedy``) and ``plan`` (:func:`plan`).
    """
    name = "aarch64_dependencies"
    routes = plan(machine, capabilities)
    if not routes:
        return {"name": name, "status": "pass", "plan": [],
                "message": "%s host: the default (x86_64) wheels apply" % (machine or "unknown"), "remedy": ""}
    found = _glibc_tuple(glibc)
    if found is None or found < MANYLINUX_GLIBC:
        return {"name": name, "status": "fail", "plan": routes,
                "message": "aarch64_glibc_too_old: glibc %s on aarch64; the aarch64 wheels (torch, triton, smg, "
                           "xgrammar) are manylinux_2_28 and need glibc >= 2.28" % (glibc or "unknown"),
                "remedy": "use Ubuntu 22.04/24.04 or DGX OS on the aarch64 host"}
    # the kernel is built from source by the collection on every host: no finding for it
    no_wheel = [r for r in routes if r["route"] in NO_WHEEL_ROUTES and not r.get("by_role")]
    summary = "; ".join("%s: %s" % (r["name"], r["route"]) for r in routes)
    if no_wheel:
        return {"name": name, "status": "warn", "plan": routes,
                "message": "aarch64_wheel_missing: no aarch64 wheel of %s; routes on this host: %s" % (
                    ", ".join(r["name"] for r in no_wheel), summary),
                "remedy": " ".join("%s: %s." % (r["name"], r["what"]) for r in no_wheel)
                + " Otherwise run that part on an x86_64 host."}
    return {"name": name, "status": "pass", "plan": routes, "message": "aarch64 routes: %s" % summary, "remedy": ""}
