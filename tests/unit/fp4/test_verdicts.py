"""Verdict aggregation, exception classification, recommendation and pinned-flag evidence.

Fed with the B09/B10/B11 fixtures (tests/fixtures/fp4/, constructed from the field reports in the probe's
result format) -- the verdicts are derived here by the production functions, the fixtures only hold the
observations (case verdicts from compare(), exception texts).
"""

import json
import os

import pytest

from ansible_collections.blackwell.sglang.plugins.module_utils import fp4_numerics as num

FIX = os.path.join(os.path.dirname(__file__), "..", "..", "fixtures", "fp4")


def _load(name):
    with open(os.path.join(FIX, name)) as fh:
        return json.load(fh)


def _as_probe_result(fixture):
    """Turn fixture observations into backend results the way the runner does."""
    backends = {}
    for key, obs in fixture["backends"].items():
        b = {"kind": obs["kind"], "sglang": obs["sglang"]}
        if "cases" in obs:
            b.update(num.judge_backend(obs["cases"]))
        else:
            e = obs["error_cases"][0]
            b.update(verdict=num.classify_exception(e["error_type"], e["error"]),
                     reason="%s: %s" % (e["error_type"], e["error"]), failed_cases=[], score_us=None)
        backends[key] = b
    return {"device": fixture["device"], "versions": fixture["versions"], "backends": backends}


@pytest.mark.parametrize("name", ["b09_sm120_gemm_zeros.json", "b10_sm120_gemm_nan.json", "b11_sm120_moe_wrong.json"])
def test_field_report_fixtures(name):
    fixture = _load(name)
    result = _as_probe_result(fixture)
    expect = fixture["expect"]
    for key, b in result["backends"].items():
        assert b["verdict"] == expect[key], (key, b["reason"])
    rec = num.recommend(result["backends"])
    for flag in (num.GEMM_FLAG, num.MOE_FLAG):
        if flag in expect:
            assert rec[flag] == expect[flag], rec["reasons"][flag]
    # whatever is recommended passed; nothing that failed is ever named
    for flag, kind in ((num.GEMM_FLAG, "gemm"), (num.MOE_FLAG, "moe")):
        same_kind = [b for b in result["backends"].values() if b["kind"] == kind]
        if rec[flag] is not None:
            assert any(b["sglang"] == rec[flag] and b["verdict"] == "ok" for b in same_kind)
        for b in same_kind:
            if b["verdict"] != "ok":
                assert rec[flag] != b["sglang"] or b["sglang"] is None


def test_b09_zeros_depend_on_m_and_are_reported_per_m():
    result = _as_probe_result(_load("b09_sm120_gemm_zeros.json"))
    cut = result["backends"]["gemm/flashinfer_cutlass"]
    assert sorted(c["m"] for c in cut["failed_cases"]) == [150, 1024]
    assert "m=150" in cut["reason"] and "2 of 5 cases failed" in cut["reason"]
    rec = num.recommend(result["backends"])
    assert rec[num.GEMM_FLAG] is None
    assert "gemm/flashinfer_cutlass: zeros" in rec["reasons"][num.GEMM_FLAG]


def test_b10_nan_backend_pinned_by_operator_fails_with_evidence():
    result = _as_probe_result(_load("b10_sm120_gemm_nan.json"))
    ev = num.pinned_flag_verdict(result, "--fp4-gemm-backend", "flashinfer_cutlass")
    assert ev["verdict"] == "nan" and ev["backend"] == "gemm/flashinfer_cutlass"
    assert "NaN" in ev["reason"] and "RTX PRO 6000" in ev["message"] and ev["versions"]["flashinfer"] == "0.6.5"
    assert len(ev["failed_cases"]) == 5
    assert num.pinned_flag_verdict(result, "fp4_gemm_backend", "flashinfer_cudnn") is None  # probed ok
    assert num.pinned_flag_verdict(result, "--fp4-gemm-backend", "auto") is None
    assert num.pinned_flag_verdict(result, "--fp4-gemm-backend", "marlin") is None  # not probed: no evidence
    trt = num.pinned_flag_verdict(result, "--fp4-gemm-backend", "flashinfer_trtllm")
    assert trt["verdict"] == "unsupported"  # B12: would crash SGLang at start
    assert num.pinned_flag_verdict(result, "--fp4-gemm-backend", "cutlass")["verdict"] == "crash"


def test_b11_moe_that_runs_without_nan_but_is_wrong():
    result = _as_probe_result(_load("b11_sm120_moe_wrong.json"))
    ev = num.pinned_flag_verdict(result, "--moe-runner-backend", "flashinfer_cutlass")
    assert ev["verdict"] == "wrong_numerics" and "cosine 0.39" in ev["reason"]
    rec = num.recommend(result["backends"])
    assert rec[num.MOE_FLAG] is None and rec[num.GEMM_FLAG] == "flashinfer_cutlass"
    assert [n for n, dummy_score in rec["ranking"][num.GEMM_FLAG]] == ["flashinfer_cutlass", "flashinfer_cudnn"]


def test_pinned_flag_rejects_unknown_flag_and_skipped_probe():
    with pytest.raises(ValueError):
        num.pinned_flag_verdict({}, "--attention-backend", "fa3")
    assert num.pinned_flag_verdict({"skipped": True, "backends": {}}, "--moe-runner-backend", "flashinfer_cutlass") is None
    assert num.pinned_flag_verdict(None, "--moe-runner-backend", "flashinfer_cutlass") is None


@pytest.mark.parametrize("etype,msg,verdict", [
    ("BackendSupportedError", "mm_fp4 does not support backend 'trtllm' with capability 120", "unsupported"),
    ("ValueError", "Problem size is not supported for mm_fp4", "unsupported"),
    ("RuntimeError", "No valid tactics available for fused moe op", "unsupported"),
    ("NotImplementedError", "anything", "unsupported"),
    ("RuntimeError", "TRTLLM MHA backend is only supported on Blackwell (SM100)", "unsupported"),
    ("RuntimeError", "Unsupported architecture for TllmGenFmhaRunner", "unsupported"),
    ("RuntimeError", "No compiled nvfp4 mm kernel", "unsupported"),
    ("RuntimeError", "CUDA error: no kernel image is available for execution on the device", "crash"),
    ("RuntimeError", "CUDA error: an illegal memory access was encountered", "crash"),
    ("RuntimeError", "[FP4 gemm Runner] Failed to run cutlass FP4 gemm on sm120. Error: Error Internal", "crash"),
    ("flashinfer.utils.BackendSupportedError", "", "unsupported"),
])
def test_classify_exception(etype, msg, verdict):
    assert num.classify_exception(etype, msg) == verdict


def test_worst_verdict_order_and_unknown():
    assert num.worst_verdict(["ok", "unsupported", "zeros"]) == "zeros"
    assert num.worst_verdict(["ok", "nan", "crash"]) == "crash"
    assert num.worst_verdict(["ok", "ok"]) == "ok"
    assert num.worst_verdict(["ok", "unsupported"]) == "unsupported"
    assert num.worst_verdict([]) == "unsupported"
    with pytest.raises(ValueError):
        num.worst_verdict(["bogus"])


def test_recommend_picks_fastest_ok_and_honours_allowed_values():
    backends = {
        "gemm/flashinfer_cutlass": {"kind": "gemm", "verdict": "ok", "sglang": "flashinfer_cutlass", "score_us": 30.0},
        "gemm/flashinfer_cudnn": {"kind": "gemm", "verdict": "ok", "sglang": "flashinfer_cudnn", "score_us": 20.0},
        "gemm/flashinfer_b12x": {"kind": "gemm", "verdict": "ok", "sglang": None, "score_us": 5.0},
        "gemm/flashinfer_trtllm": {"kind": "gemm", "verdict": "crash", "sglang": "flashinfer_trtllm", "score_us": 1.0},
        "moe/flashinfer_cutlass": {"kind": "moe", "verdict": "timeout", "sglang": "flashinfer_cutlass", "score_us": None},
    }
    rec = num.recommend(backends)
    assert rec[num.GEMM_FLAG] == "flashinfer_cudnn"  # b12x faster but SGLang has no flag value for it
    assert rec[num.MOE_FLAG] is None and "timeout" in rec["reasons"][num.MOE_FLAG]
    rec2 = num.recommend(backends, allowed={num.GEMM_FLAG: ["auto", "flashinfer_cutlass"]})
    assert rec2[num.GEMM_FLAG] == "flashinfer_cutlass"
    assert "not accepted by this SGLang" in rec2["reasons"][num.GEMM_FLAG] or rec2[num.GEMM_FLAG]
    assert num.recommend({})[num.GEMM_FLAG] is None


def test_backend_catalogue_uses_sglang_names():
    names = {k: v["sglang"] for k, v in num.BACKENDS.items()}
    assert names["gemm/flashinfer_cutedsl"] == "flashinfer_cutedsl"
    assert num.BACKENDS["gemm/flashinfer_cutedsl"]["library_backend"] == "cute-dsl"
    assert names["gemm/flashinfer_b12x"] is None  # not selectable in SGLang up to HEAD (PR #38170 open)
    for key, meta in num.BACKENDS.items():
        assert key.split("/", 1)[0] == meta["kind"]


@pytest.mark.parametrize("key,cc,refused", [
    ("moe/flashinfer_cutlass", 90, True), ("moe/flashinfer_cutlass", 120, False), ("moe/flashinfer_cutlass", 100, False),
    ("moe/flashinfer_trtllm", 120, True), ("moe/flashinfer_trtllm", 100, False),
    ("moe/flashinfer_cutedsl", 120, True), ("gemm/sgl_kernel_cutlass", 90, True), ("gemm/sgl_kernel_cutlass", 120, False),
    ("gemm/flashinfer_cutlass", 90, False),  # mm_fp4 backends are always asked through FlashInfer's own check
])
def test_capability_table(key, cc, refused):
    reason = num.capability_refusal(key, cc)
    assert (reason is not None) is refused
    if refused:
        assert reason.endswith("this GPU is %d.%d" % (cc // 10, cc % 10))
