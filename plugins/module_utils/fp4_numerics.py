# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang contributors
# Apache-2.0 (see LICENSE)
"""Judging FP4 kernel output, aggregating verdicts, and picking SGLang flags.

Reusable outside Ansible: ``compare(reference, candidate, **tolerances)`` takes
two torch tensors; everything else works on plain dicts/lists (the JSON the
probe runner emits), needs only the standard library, and imports torch lazily.

Verdicts (one per case, then one per backend):

``ok``               every check passed
``wrong_numerics``   finite and non-zero but off the reference (rel. error or cosine)
``nan``              any NaN/Inf in the output (B10: a CUTLASS SM100-only FP4
                     convert instruction on SM12x produced NaN everywhere)
``zeros``            the output, or any row of it, is (near) zero where the
                     reference is not (B09: ``mm_fp4`` cutlass returned all
                     zeros on RTX PRO 6000; flashinfer 0.6.12 zeros depended on M)
``unsupported``      the library refused this GPU / problem (BackendSupportedError,
                     "No valid tactics", NotImplementedError, capability text)
``crash``            any other exception, a killed or dying child process
``timeout``          the child process ran past its time limit

Field reports B09-B12 are in ``docs/fp4-probe.md`` and the team fact sheet.
"""

from __future__ import annotations

import math
import re

VERDICTS = ("ok", "wrong_numerics", "nan", "zeros", "unsupported", "crash", "timeout")
FAILED_VERDICTS = ("wrong_numerics", "nan", "zeros", "crash", "timeout")
# Worst first: the verdict a backend gets when its cases disagree.  A numerical
# failure on any M outranks "unsupported" on another (one bad M fails it).
_SEVERITY = ("crash", "timeout", "nan", "zeros", "wrong_numerics", "unsupported", "ok")

# --- tolerances -----------------------------------------------------------------
# Dense GEMM vs. the reference computed from the *dequantized* NVFP4 operands: the
# kernel multiplies the same exact E2M1*E4M3 products and accumulates in FP32, so
# the only expected error is the bf16 output rounding (relative 2**-9 ~ 0.002 per
# element) plus summation order.  2% relative error norm and 0.999 cosine per row
# leave 5-10x headroom over that and are still far below what a layout, scale or
# sign bug produces (typically rel. error > 0.3, cosine < 0.9).
GEMM_TOLERANCES = {"rel_tol": 0.02, "min_cosine": 0.999, "min_row_cosine": 0.999, "zero_tol": 1e-3}
# Fused MoE: the kernel re-quantizes the SwiGLU intermediate to NVFP4 itself, so
# elements near an E2M1 rounding boundary can land on the other side; thresholds
# from field report B11 (rtp-llm #1223): global cosine >= 0.98, worst row >= 0.95.
# rel_tol 0.2 matches FlashInfer's own NVFP4 MoE test (rtol = atol = 0.2).
MOE_TOLERANCES = {"rel_tol": 0.2, "min_cosine": 0.98, "min_row_cosine": 0.95, "zero_tol": 1e-3}

# --- backend catalogue: probe key -> SGLang flag/value ---------------------------
# SGLang naming (fact sheet section 5.1): --fp4-gemm-backend strips "flashinfer_"
# to get FlashInfer's mm_fp4 backend, flashinfer_cutedsl -> "cute-dsl"; "cutlass" is
# SGLang's own JIT/AOT CUTLASS NVFP4 GEMM (2026-03-31 .. 2026-07-13).  b12x has no
# SGLang choice up to HEAD (open PR #38170 proposes "flashinfer_b12x"): it is probed
# and reported but never recommended.
GEMM_FLAG = "fp4_gemm_backend"
MOE_FLAG = "moe_runner_backend"
BACKENDS = {
    "gemm/flashinfer_cutlass": {"kind": "gemm", "api": "flashinfer.mm_fp4", "library_backend": "cutlass", "sglang": "flashinfer_cutlass"},
    "gemm/flashinfer_cudnn": {"kind": "gemm", "api": "flashinfer.mm_fp4", "library_backend": "cudnn", "sglang": "flashinfer_cudnn"},
    "gemm/flashinfer_trtllm": {"kind": "gemm", "api": "flashinfer.mm_fp4", "library_backend": "trtllm", "sglang": "flashinfer_trtllm"},
    "gemm/flashinfer_cutedsl": {"kind": "gemm", "api": "flashinfer.mm_fp4", "library_backend": "cute-dsl", "sglang": "flashinfer_cutedsl"},
    "gemm/flashinfer_b12x": {"kind": "gemm", "api": "flashinfer.mm_fp4", "library_backend": "b12x", "sglang": None},
    "gemm/sgl_kernel_cutlass": {"kind": "gemm", "api": "sgl_kernel.cutlass_scaled_fp4_mm", "library_backend": None, "sglang": "cutlass"},
    "moe/flashinfer_cutlass": {"kind": "moe", "api": "flashinfer.fused_moe.cutlass_fused_moe", "library_backend": None, "sglang": "flashinfer_cutlass"},
    "moe/flashinfer_trtllm": {"kind": "moe", "api": "flashinfer.fused_moe.trtllm_fp4_block_scale_moe", "library_backend": None, "sglang": "flashinfer_trtllm"},
    "moe/flashinfer_cutedsl": {"kind": "moe", "api": "flashinfer.fused_moe.cute_dsl", "library_backend": None, "sglang": "flashinfer_cutedsl"},
}

# Capability gates the probe applies itself, for APIs that have no support check of
# their own (FlashInfer's mm_fp4 has one -- mm_fp4.is_backend_supported -- and is
# always asked instead).  key -> (predicate on compute capability as int, reason).
_CAPABILITY_TABLE = {
    "gemm/sgl_kernel_cutlass": (
        lambda cc: cc >= 100,
        "sgl_kernel NVFP4 GEMM needs compute capability >= 10.0 (CUTLASS SM100/SM120 block-scaled MMA; "
        "sgl-kernel's FP4 tests skip below 10.0)"),
    "moe/flashinfer_cutlass": (
        lambda cc: cc // 10 in (10, 11, 12),
        "NVFP4 cutlass_fused_moe needs compute capability 10.x/11.x/12.x (FlashInfer's NVFP4 MoE test skips "
        "other GPUs; an SM120 module, gen_cutlass_fused_moe_sm120_module, is in flashinfer 0.6.5 already, its NVFP4 "
        "MoE output reworked in 0.6.7, #2725)"),
    "moe/flashinfer_trtllm": (
        lambda cc: cc // 10 == 10,
        "trtllm-gen MoE kernels are SM100-family only (SGLang overrides.py: 'trtllm-gen MoE kernels are "
        "SM100-only'; field report B12)"),
    "moe/flashinfer_cutedsl": (
        lambda cc: cc // 10 == 10,
        "FlashInfer CuTe-DSL MoE is SM100-family only (admissible_archs exclude sm_120a, flashinfer #2723)"),
}


def capability_refusal(key, cc):
    """Reason text when the probe's own capability table rules ``key`` out on
    compute capability ``cc`` (int, e.g. 120), else None (also for keys the table
    does not cover)."""
    gate = _CAPABILITY_TABLE.get(key)
    if gate is None or gate[0](int(cc)):
        return None
    return "%s; this GPU is %d.%d" % (gate[1], int(cc) // 10, int(cc) % 10)


# Exception text meaning "this library does not run on this GPU / problem" (B11, B12):
_UNSUPPORTED_PATTERNS = (
    r"does not support (backend|compute capability)",
    r"No suitable auto backends",
    r"Problem size is not supported",
    r"No valid tactics",
    r"[Uu]nsupported (architecture|arch|compute capability|GPU|SM)",
    r"not supported on (this )?(GPU|device|SM|architecture|compute capability)",
    r"(is|are) only supported on",
    r"requires? (SM|sm_?|compute capability|CC ?)\s*[>=]*\s*\d",
    r"SM\d+-only",
    r"only (available|implemented) (on|for) SM",
    r"No compiled nvfp4",
    r"No execution plans support the graph",  # cuDNN: no engine for this graph on this GPU (B09)
)
_UNSUPPORTED_TYPES = ("BackendSupportedError", "NotImplementedError")


def classify_exception(exc_type, message):
    """Map an exception raised by a backend call to ``unsupported`` or ``crash``.

    Args:
        exc_type: exception class name (str), e.g. ``"BackendSupportedError"``.
        message: ``str(exception)``.
    Returns:
        ``"unsupported"`` when the type is ``BackendSupportedError`` /
        ``NotImplementedError`` or the text matches a capability refusal (B11, B12);
        ``"crash"`` otherwise (including CUDA errors such as "no kernel image",
        "illegal memory access" and internal CUTLASS errors).
    """
    name = (exc_type or "").rsplit(".", 1)[-1]
    if name in _UNSUPPORTED_TYPES:
        return "unsupported"
    text = message or ""
    for pat in _UNSUPPORTED_PATTERNS:
        if re.search(pat, text):
            return "unsupported"
    return "crash"


class Comparison(dict):
    """Result of :func:`compare`; a ``dict`` (JSON-ready) with attribute access.

    Keys: ``ok`` (bool), ``verdict`` (one of :data:`VERDICTS` minus
    unsupported/crash/timeout), ``reason`` (str), ``metrics`` (dict of floats/ints).
    """

    __getattr__ = dict.__getitem__


def _cos(x, y, dim=None):
    torch = _torch()
    if dim is None:
        num = (x * y).sum()
        den = x.norm() * y.norm()
    else:
        num = (x * y).sum(dim=dim)
        den = x.norm(dim=dim) * y.norm(dim=dim)
    return num / den.clamp_min(torch.finfo(torch.float64).tiny)


def _torch():
    import torch  # noqa: WPS433 (lazy: keep module importable without torch)

    return torch


def compare(reference, candidate, rel_tol=GEMM_TOLERANCES["rel_tol"], min_cosine=GEMM_TOLERANCES["min_cosine"],
            min_row_cosine=GEMM_TOLERANCES["min_row_cosine"], zero_tol=GEMM_TOLERANCES["zero_tol"], baseline=None):
    """Judge ``candidate`` against ``reference`` the way a numerics engineer would.

    Checks, in order (the first failing one sets the verdict):

    1. shape equal, else ``wrong_numerics``;
    2. every value finite, else ``nan`` (counts NaN and Inf separately);
    3. not (near) zero: ``||cand||_F <= zero_tol * ||ref||_F`` fails, and so does
       any single row with ``||cand_i|| <= zero_tol * ||ref_i||`` where the
       reference row is non-zero -> ``zeros`` (partial zeros are how B09 showed up);
    4. relative error norm ``||cand - ref||_F / ||ref||_F <= rel_tol``;
    5. global cosine ``>= min_cosine`` and per-row cosine ``>= min_row_cosine`` for
       every row whose reference norm is non-zero, so one garbage row fails
       (4 and 5 -> ``wrong_numerics``).

    Args:
        reference: tensor ``[M, N]`` (any float dtype; compared in float64).
        candidate: tensor ``[M, N]`` from the backend (bf16/fp16/fp32).
        rel_tol, min_cosine, min_row_cosine, zero_tol: tolerances; defaults are
            :data:`GEMM_TOLERANCES` (MoE callers pass :data:`MOE_TOLERANCES`).
        baseline: optional tensor ``[M, N]`` computed from the original bf16
            inputs; only reported (``cosine_vs_baseline``, ``rel_err_vs_baseline``),
            never judged, because it includes the NVFP4 quantization error itself.
    Returns:
        :class:`Comparison` (``ok``, ``verdict``, ``reason``, ``metrics``).
    """
    torch = _torch()
    metrics = {"shape": list(candidate.shape)}
    if tuple(reference.shape) != tuple(candidate.shape):
        return Comparison(ok=False, verdict="wrong_numerics", metrics=metrics,
                          reason="shape %s != reference %s" % (tuple(candidate.shape), tuple(reference.shape)))
    ref = reference.detach().to(torch.float64)
    cand = candidate.detach().to(device=ref.device, dtype=torch.float64)
    ref2 = ref.reshape(ref.shape[0], -1) if ref.dim() > 1 else ref.reshape(1, -1)
    cand2 = cand.reshape(ref2.shape)

    n_nan = int(torch.isnan(cand).sum())
    n_inf = int(torch.isinf(cand).sum())
    metrics.update(nan_count=n_nan, inf_count=n_inf, numel=int(cand.numel()))
    if n_nan or n_inf:
        bad_rows = int((~torch.isfinite(cand2)).any(dim=1).sum())
        metrics["nonfinite_rows"] = bad_rows
        return Comparison(ok=False, verdict="nan", metrics=metrics,
                          reason="%d NaN and %d Inf values in %d of %d rows" % (n_nan, n_inf, bad_rows, cand2.shape[0]))

    ref_norm = float(ref.norm())
    cand_norm = float(cand.norm())
    metrics.update(ref_norm=ref_norm, out_norm=cand_norm)
    if ref_norm == 0.0:
        ok = cand_norm == 0.0
        return Comparison(ok=ok, verdict="ok" if ok else "wrong_numerics", metrics=metrics,
                          reason="reference is all zeros" + ("" if ok else "; output is not"))
    if cand_norm <= zero_tol * ref_norm:
        metrics["zero_fraction"] = float((cand == 0).double().mean())
        return Comparison(ok=False, verdict="zeros", metrics=metrics,
                          reason="output is (near) all zeros: ||out|| = %.3g vs ||ref|| = %.3g" % (cand_norm, ref_norm))
    ref_rows = ref2.norm(dim=1)
    cand_rows = cand2.norm(dim=1)
    live = ref_rows > 0
    zero_rows = live & (cand_rows <= zero_tol * ref_rows)
    n_zero_rows = int(zero_rows.sum())
    metrics["zero_rows"] = n_zero_rows
    if n_zero_rows:
        first = int(torch.nonzero(zero_rows)[0, 0])
        return Comparison(ok=False, verdict="zeros", metrics=metrics,
                          reason="%d of %d rows are (near) zero (first: row %d)" % (n_zero_rows, ref2.shape[0], first))

    rel_err = float((cand - ref).norm() / ref.norm())
    cosine = float(_cos(ref, cand))
    row_cos = _cos(ref2, cand2, dim=1)
    row_cos_live = row_cos[live]
    worst = int(torch.nonzero(live)[int(torch.argmin(row_cos_live))]) if bool(live.any()) else -1
    min_row = float(row_cos_live.min()) if bool(live.any()) else 1.0
    metrics.update(rel_err=rel_err, cosine=cosine, min_row_cosine=min_row, worst_row=worst,
                   max_abs_err=float((cand - ref).abs().max()))
    if baseline is not None:
        base = baseline.detach().to(device=ref.device, dtype=torch.float64)
        if tuple(base.shape) == tuple(ref.shape):
            metrics["cosine_vs_baseline"] = float(_cos(base, cand))
            metrics["rel_err_vs_baseline"] = float((cand - base).norm() / base.norm().clamp_min(1e-300))
            metrics["reference_cosine_vs_baseline"] = float(_cos(base, ref))
    problems = []
    # NaN metrics (cannot happen after the finiteness check, but never let NaN pass a comparison)
    if math.isnan(rel_err) or rel_err > rel_tol:
        problems.append("relative error %.4g > %.4g" % (rel_err, rel_tol))
    if math.isnan(cosine) or cosine < min_cosine:
        problems.append("cosine %.5f < %.5f" % (cosine, min_cosine))
    if math.isnan(min_row) or min_row < min_row_cosine:
        problems.append("row %d cosine %.5f < %.5f" % (worst, min_row, min_row_cosine))
    if problems:
        return Comparison(ok=False, verdict="wrong_numerics", metrics=metrics, reason="; ".join(problems))
    return Comparison(ok=True, verdict="ok", metrics=metrics,
                      reason="rel. error %.3g, cosine %.6f, worst row cosine %.6f" % (rel_err, cosine, min_row))


# --- aggregation -----------------------------------------------------------------

def worst_verdict(verdicts):
    """The most severe of ``verdicts`` (order: crash, timeout, nan, zeros,
    wrong_numerics, unsupported, ok).  Empty input -> ``"unsupported"``."""
    vs = [v for v in verdicts if v]
    if not vs:
        return "unsupported"
    for v in _SEVERITY:
        if v in vs:
            return v
    raise ValueError("unknown verdict(s): %s" % sorted(set(vs) - set(_SEVERITY)))


def judge_backend(cases):
    """Aggregate per-case results into one backend verdict; one bad M fails it.

    Args:
        cases: list of dicts with at least ``verdict`` and optionally ``m``, ``n``,
            ``k``, ``reason``, ``time_us``.
    Returns:
        dict ``{verdict, reason, failed_cases, score_us}``; ``score_us`` is the sum
        of per-case median times (None unless every case is ok and timed) and is
        what :func:`recommend` ranks by.
    """
    verdict = worst_verdict([c.get("verdict") for c in cases])
    failed = [c for c in cases if c.get("verdict") != "ok"]
    if verdict == "ok":
        reason = "all %d cases ok" % len(cases)
    else:
        first = next(c for c in failed if c.get("verdict") == verdict)
        where = ", ".join("%s=%s" % (d, first[d]) for d in ("m", "n", "k") if d in first)
        reason = "%s%s: %s" % (verdict, " at " + where if where else "", first.get("reason", ""))
        if len(failed) > 1:
            reason += " (%d of %d cases failed)" % (len(failed), len(cases))
    times = [c.get("time_us") for c in cases]
    score = sum(times) if verdict == "ok" and times and all(isinstance(t, (int, float)) for t in times) else None
    summary = [{k: c.get(k) for k in ("m", "n", "k", "verdict", "reason") if k in c} for c in failed]
    return {"verdict": verdict, "reason": reason, "failed_cases": summary, "score_us": score}


def recommend(backends, allowed=None):
    """Pick ``--fp4-gemm-backend`` / ``--moe-runner-backend`` from probe results.

    The fastest (lowest ``score_us``) backend whose verdict is ``ok`` and that has
    an SGLang name; a backend that failed is never returned.

    Args:
        backends: mapping probe key -> result dict with ``kind`` (gemm/moe),
            ``verdict``, ``sglang`` (SGLang value or None) and ``score_us``.
        allowed: optional ``{"fp4_gemm_backend": [...], "moe_runner_backend": [...]}``
            restricting the choice to values the installed SGLang accepts.
    Returns:
        ``{"fp4_gemm_backend": str|None, "moe_runner_backend": str|None,
        "reasons": {flag: str}, "ranking": {flag: [[value, score_us], ...]}}``.
    """
    allowed = allowed or {}
    out = {GEMM_FLAG: None, MOE_FLAG: None, "reasons": {}, "ranking": {}}
    for flag, kind in ((GEMM_FLAG, "gemm"), (MOE_FLAG, "moe")):
        limit = allowed.get(flag)
        ranked = []
        rejected = []
        for key in sorted(backends):
            b = backends[key]
            if b.get("kind") != kind:
                continue
            name = b.get("sglang")
            if b.get("verdict") != "ok":
                rejected.append("%s: %s" % (key, b.get("verdict")))
                continue
            if not name:
                rejected.append("%s: ok but no SGLang %s value" % (key, flag))
                continue
            if limit is not None and name not in limit:
                rejected.append("%s: ok but %s not accepted by this SGLang" % (key, name))
                continue
            score = b.get("score_us")
            ranked.append((score if isinstance(score, (int, float)) else math.inf, name, key))
        ranked.sort()
        out["ranking"][flag] = [[entry[1], entry[0] if entry[0] != math.inf else None] for entry in ranked]
        if ranked:
            score, name, key = ranked[0]
            out[flag] = name
            out["reasons"][flag] = "%s is the fastest backend that passed (%s)" % (
                key, "%.1f us over all cases" % score if score != math.inf else "untimed")
        else:
            out["reasons"][flag] = "no %s backend passed the probe%s" % (
                kind, ": " + "; ".join(rejected) if rejected else " (none probed)")
    return out


_FLAG_ALIASES = {
    "--fp4-gemm-backend": GEMM_FLAG, "fp4_gemm_backend": GEMM_FLAG, "fp4_gemm_runner_backend": GEMM_FLAG,
    "--moe-runner-backend": MOE_FLAG, "moe_runner_backend": MOE_FLAG,
}


def pinned_flag_verdict(result, flag, value):
    """Evidence against an operator-pinned SGLang flag, or None if the probe has none.

    For ``sglang_service``: when the operator pins ``--fp4-gemm-backend`` /
    ``--moe-runner-backend`` and the probe found that backend broken on this host,
    the play must fail and show this evidence.

    Args:
        result: the ``fp4_kernel_probe`` module result (``sglang_stack_probe_result``).
        flag: ``"--fp4-gemm-backend"``, ``"fp4_gemm_backend"``,
            ``"--moe-runner-backend"`` or ``"moe_runner_backend"``.
        value: the pinned SGLang value, e.g. ``"flashinfer_cutlass"``.
    Returns:
        None when the value is ``auto``, was not probed, the probe was skipped, or
        every probed backend with that SGLang name is ``ok``; otherwise a dict
        ``{flag, value, backend, verdict, reason, failed_cases, device, versions,
        message}`` for the first failing backend (verdicts from
        :data:`FAILED_VERDICTS` plus ``unsupported``).
    Raises:
        ValueError: unknown ``flag``.
    """
    if flag not in _FLAG_ALIASES:
        raise ValueError("pinned_flag_verdict: unknown flag %r (known: %s)" % (flag, ", ".join(sorted(_FLAG_ALIASES))))
    canon = _FLAG_ALIASES[flag]
    kind = "gemm" if canon == GEMM_FLAG else "moe"
    if not result or value in (None, "", "auto"):
        return None
    for key in sorted(result.get("backends") or {}):
        b = result["backends"][key]
        if b.get("kind") != kind or b.get("sglang") != value:
            continue
        if b.get("verdict") == "ok":
            continue
        device = result.get("device") or {}
        msg = "--%s %s: the FP4 probe found %s %s on %s (cc %s): %s" % (
            canon.replace("_", "-"), value, key, b.get("verdict"), device.get("name"),
            device.get("compute_capability"), b.get("reason"))
        return {"flag": canon, "value": value, "backend": key, "verdict": b.get("verdict"),
                "reason": b.get("reason"), "failed_cases": b.get("failed_cases", []),
                "device": device, "versions": result.get("versions", {}), "message": msg}
    return None
