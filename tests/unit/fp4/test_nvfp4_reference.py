"""Reference NVFP4 quantizer: known E2M1 values, packing, swizzle layout, round trips (CPU)."""

import itertools

import pytest

torch = pytest.importorskip("torch")

from ansible_collections.blackwell.sglang.plugins.module_utils import nvfp4_reference as ref


def test_e2m1_table_is_the_ocp_table():
    # OCP MX v1.0 FP4 E2M1: exponent bias 1, one mantissa bit, no Inf/NaN; decode every code independently.
    for code in range(16):
        sign = -1.0 if code & 0x8 else 1.0
        exp, man = (code >> 1) & 0x3, code & 0x1
        value = sign * (man * 0.5 if exp == 0 else 2.0 ** (exp - 1) * (1 + man / 2))
        assert float(ref.e2m1_to_float(torch.tensor([code], dtype=torch.uint8))[0]) == value


def test_exact_values_encode_to_their_codes_and_back():
    vals = torch.tensor(list(ref.E2M1_VALUES) + [-v for v in ref.E2M1_VALUES[1:]])
    codes = ref.e2m1_codes(vals)
    assert codes.tolist() == list(range(8)) + list(range(9, 16))
    assert torch.equal(ref.e2m1_to_float(codes), vals)


@pytest.mark.parametrize("value,expected", [
    (0.25, 0.0), (0.75, 1.0), (1.25, 1.0), (1.75, 2.0), (2.5, 2.0), (3.5, 4.0), (5.0, 4.0),  # ties -> even code
    (0.26, 0.5), (0.74, 0.5), (1.26, 1.5), (2.6, 3.0), (4.9, 4.0), (5.1, 6.0),
    (6.0, 6.0), (7.5, 6.0), (1e9, 6.0),  # saturating
    (-0.75, -1.0), (-5.1, -6.0), (-0.1, 0.0),
])
def test_round_to_nearest_even_and_saturation(value, expected):
    got = float(ref.e2m1_to_float(ref.e2m1_codes(torch.tensor([value])))[0])
    assert got == expected


def test_nan_has_no_encoding():
    with pytest.raises(ValueError):
        ref.e2m1_codes(torch.tensor([float("nan")]))


def test_pack_low_nibble_first_and_unpack():
    codes = torch.tensor([[1, 2, 15, 0]], dtype=torch.uint8)
    packed = ref.pack_e2m1(codes)
    assert packed.tolist() == [[0x21, 0x0F]]
    assert torch.equal(ref.unpack_e2m1(packed), codes)


def _offset_128x4(r, c, padded_cols):
    # Independent formula (FlashInfer get_sf_out_offset_128x4 / PTX tcgen05 "scale factor layout 4x").
    return ((r // 128) * (padded_cols // 4) + c // 4) * 512 + (r % 32) * 16 + ((r % 128) // 32) * 4 + c % 4


@pytest.mark.parametrize("m,kb", [(1, 4), (9, 10), (128, 8), (150, 12), (257, 3)])
def test_swizzle_matches_independent_index_computation(m, kb):
    lin = torch.arange(1, m * kb + 1, dtype=torch.int64).remainder(251).add(1).to(torch.uint8).view(m, kb)
    swz = ref.swizzle_scales(lin)
    mp, kp = ref.round_up(m, 128), ref.round_up(kb, 4)
    assert tuple(swz.shape) == (mp, kp)
    flat = swz.reshape(-1)
    expected = torch.zeros(mp * kp, dtype=torch.uint8)
    for r, c in itertools.product(range(m), range(kb)):
        expected[_offset_128x4(r, c, kp)] = lin[r, c]
    assert torch.equal(flat, expected)  # includes: every padding byte is zero
    assert torch.equal(ref.unswizzle_scales(swz, m, kb), lin)


def test_swizzle_keeps_fp8_dtype():
    sf = torch.rand(9, 8).mul(10).to(torch.float8_e4m3fn)
    back = ref.unswizzle_scales(ref.swizzle_scales(sf), 9, 8)
    assert back.dtype == torch.float8_e4m3fn and torch.equal(back.view(torch.uint8), sf.view(torch.uint8))


def test_global_scale_formula_and_errors():
    x = torch.tensor([[0.5, -2.0] * 8])
    assert float(ref.global_scale_for(x)) == pytest.approx(448 * 6 / 2.0)
    with pytest.raises(ValueError):
        ref.global_scale_for(torch.zeros(2, 16))
    with pytest.raises(ValueError):
        ref.quantize(torch.full((1, 16), float("inf")))
    with pytest.raises(ValueError):
        ref.quantize(torch.ones(2, 24))  # K % 16


def test_block_holding_exact_grid_values_is_lossless():
    # A block whose max is 6 and whose values are on the E2M1 grid, with global scale 448: sf = 448 exactly.
    row = torch.tensor([list(ref.E2M1_VALUES) + [-v for v in ref.E2M1_VALUES]])
    q = ref.quantize(row, global_scale=448.0, swizzle=False)
    assert float(q.scales.float()[0, 0]) == 448.0
    assert torch.equal(q.dequantize(), row)


@pytest.mark.parametrize("m,k", [(1, 16), (9, 160), (150, 512), (128, 64)])
def test_round_trip_is_a_projection(m, k):
    torch.manual_seed(m * 1000 + k)
    x = torch.randn(m, k, dtype=torch.bfloat16) * 3
    q = ref.quantize(x)
    assert q.packed.shape == (m, k // 2) and q.packed.dtype == torch.uint8
    assert q.scales.shape == (ref.round_up(m, 128), ref.round_up(k // 16, 4))
    d = q.dequantize()
    q2 = ref.quantize(d, global_scale=q.global_scale)
    assert torch.equal(q2.packed, q.packed)
    assert torch.equal(q2.scales.view(torch.uint8), q.scales.view(torch.uint8))
    # every element error is bounded by half a grid step of its block: |x - x'| <= 1 * scale (step 2 at 4..6)
    sf = q.linear_scales().float() / q.global_scale
    bound = (sf * 1.0).repeat_interleave(16, dim=1) + 1e-6
    assert bool(((d - x.float()).abs() <= bound).all())
    # block max maps to <= 6 after scaling, block scale within E4M3 range
    assert float(q.linear_scales().float().max()) <= 448.0


def test_quantization_snr_is_nvfp4_like():
    torch.manual_seed(0)
    x = torch.randn(256, 1024)
    snr = ref.quantization_snr_db(x, ref.quantize(x))
    assert 17.0 < snr < 24.0  # ~20 dB for N(0,1) data; the probe uses > 15 dB as its sanity gate


def test_reference_gemm_and_alpha():
    torch.manual_seed(1)
    a, b = torch.randn(9, 64), torch.randn(32, 64)
    aq, bq = ref.quantize(a), ref.quantize(b)
    out = ref.reference_gemm(aq, bq)
    assert out.shape == (9, 32) and out.dtype == torch.float32
    assert torch.allclose(out, aq.dequantize() @ bq.dequantize().t())
    assert float(ref.alpha_for(aq, bq)[0]) == pytest.approx(1.0 / (float(aq.global_scale) * float(bq.global_scale)))
    cos = torch.nn.functional.cosine_similarity(out.flatten(), (a @ b.t()).flatten(), dim=0)
    assert float(cos) > 0.97
