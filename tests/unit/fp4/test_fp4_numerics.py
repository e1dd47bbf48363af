"""compare(): injected bad outputs (NaN, Inf, zeros, zeros for some M only, one garbage row, noise)."""

import pytest

torch = pytest.importorskip("torch")

from ansible_collections.blackwell.sglang.plugins.module_utils import fp4_numerics as num
from ansible_collections.blackwell.sglang.plugins.module_utils import nvfp4_reference as ref

M_LIST = (1, 9, 128, 150, 1024)


def _problem(m, n=128, k=256, seed=0):
    g = torch.Generator().manual_seed(seed + m)
    a = torch.randn(m, k, generator=g, dtype=torch.float32).to(torch.bfloat16)
    b = torch.randn(n, k, generator=g, dtype=torch.float32).to(torch.bfloat16)
    aq, bq = ref.quantize(a), ref.quantize(b)
    return ref.reference_gemm(aq, bq), a.float() @ b.float().t()


@pytest.mark.parametrize("m", M_LIST)
def test_exact_kernel_output_in_bf16_passes(m):
    deq, base = _problem(m)
    res = num.compare(deq, deq.to(torch.bfloat16), baseline=base)
    assert res.ok and res.verdict == "ok", res.reason
    assert res.metrics["rel_err"] < 0.005  # bf16 output rounding only
    assert 0.97 < res.metrics["cosine_vs_baseline"] < 0.999  # NVFP4 quantisation error is visible vs bf16


def test_noise_within_tolerance_passes_and_outside_fails():
    deq, dummy_base = _problem(128)
    g = torch.Generator().manual_seed(3)
    noise = torch.randn(deq.shape, generator=g)
    small = deq + noise * deq.std() * 0.005
    assert num.compare(deq, small).ok
    big = deq + noise * deq.std() * 0.1
    res = num.compare(deq, big)
    assert not res.ok and res.verdict == "wrong_numerics" and "relative error" in res.reason


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")])
def test_single_nonfinite_value_fails_as_nan(bad):
    deq, dummy_base = _problem(9)
    out = deq.clone()
    out[4, 17] = bad
    res = num.compare(deq, out)
    assert res.verdict == "nan" and not res.ok
    assert res.metrics["nan_count"] + res.metrics["inf_count"] == 1 and res.metrics["nonfinite_rows"] == 1


def test_all_zero_output_fails_as_zeros():
    deq, dummy_base = _problem(1024)
    res = num.compare(deq, torch.zeros_like(deq))
    assert res.verdict == "zeros" and "all zeros" in res.reason


def test_near_zero_output_fails_as_zeros():
    deq, dummy_base = _problem(128)
    res = num.compare(deq, deq * 1e-5)
    assert res.verdict == "zeros"


def test_zero_rows_only_fail_as_zeros():
    deq, dummy_base = _problem(150)
    out = deq.clone()
    out[128:] = 0  # the B09 pattern: rows past the first 128-row tile come back empty
    res = num.compare(deq, out)
    assert res.verdict == "zeros" and res.metrics["zero_rows"] == 22 and "row 128" in res.reason


def test_one_garbage_row_fails_even_when_global_metrics_look_fine():
    deq, dummy_base = _problem(1024)
    out = deq.clone()
    g = torch.Generator().manual_seed(5)
    out[777] = torch.randn(out.shape[1], generator=g) * deq[777].std()
    res = num.compare(deq, out)
    assert res.verdict == "wrong_numerics"
    assert res.metrics["worst_row"] == 777
    assert res.metrics["cosine"] > 0.999 and res.metrics["rel_err"] < 0.05  # global view alone would pass
    assert "row 777" in res.reason


def test_sign_flip_and_transposed_layout_fail():
    deq, dummy_base = _problem(128, n=128)
    assert num.compare(deq, -deq).verdict == "wrong_numerics"
    assert num.compare(deq, deq.t().contiguous()).verdict == "wrong_numerics"


def test_shape_mismatch():
    deq, dummy_base = _problem(9)
    res = num.compare(deq, deq[:, :-1])
    assert res.verdict == "wrong_numerics" and "shape" in res.reason


def test_zeros_at_some_m_only_fail_the_backend():
    cases = []
    for m in M_LIST:
        deq, dummy_base = _problem(m)
        out = torch.zeros_like(deq) if m == 150 else deq.to(torch.bfloat16)
        res = num.compare(deq, out)
        cases.append({"m": m, "n": 128, "k": 256, "verdict": res.verdict, "reason": res.reason, "time_us": 10.0})
    agg = num.judge_backend(cases)
    assert agg["verdict"] == "zeros"
    assert [c["m"] for c in agg["failed_cases"]] == [150]
    assert agg["score_us"] is None and "m=150" in agg["reason"]


def test_moe_tolerances_are_b11_thresholds():
    assert num.MOE_TOLERANCES["min_cosine"] == 0.98 and num.MOE_TOLERANCES["min_row_cosine"] == 0.95
    deq, dummy_base = _problem(128)
    # a MoE that "runs without NaN" but has cosine ~0.4 (B11) must fail
    g = torch.Generator().manual_seed(9)
    wrong = 0.4 * deq + torch.randn(deq.shape, generator=g) * deq.std()
    res = num.compare(deq, wrong, **num.MOE_TOLERANCES)
    assert res.verdict == "wrong_numerics" and res.metrics["cosine"] < 0.6


def test_comparison_is_a_plain_dict_for_json():
    import json

    deq, dummy_base = _problem(1)
    res = num.compare(deq, deq)
    assert json.loads(json.dumps(res))["ok"] is True and res.ok is True
