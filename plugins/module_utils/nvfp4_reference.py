# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang contributors
# Apache-2.0 (see LICENSE)
"""Reference NVFP4 quantizer / dequantizer in plain PyTorch (CPU or CUDA).

This is the yardstick the FP4 kernel probe measures every backend against, so it
is written from the format definition, not from any kernel library:

* Element format FP4 E2M1 (1 sign, 2 exponent, 1 mantissa bit, bias 1, no
  Inf/NaN): magnitudes ``{0, 0.5, 1, 1.5, 2, 3, 4, 6}``; the 3-bit magnitude code
  is the index into that table and bit 3 is the sign.  Source: OCP Microscaling
  Formats (MX) v1.0, section 5.3.3 (FP4 E2M1); PTX ISA ``cvt`` ``.e2m1x2``.
* Packing: two codes per ``uint8``; element ``2i`` in the LOW nibble, ``2i+1`` in
  the high nibble.  Source: sgl-kernel ``tests/test_fp4_gemm.py`` ``break_fp4_bytes``
  and FlashInfer ``tests/moe`` ``break_fp4_bytes`` (same convention).
* Block scaling (NVFP4): one FP8 E4M3 scale per 16 consecutive elements along K
  (``BLOCK_SIZE``); one FP32 global scale per tensor,
  ``global_scale = FP8_E4M3_MAX * FP4_E2M1_MAX / amax(|x|) = 448 * 6 / amax``.
  Stored block scale ``sf = e4m3(block_amax / 6 * global_scale)``; an element is
  quantized as ``e2m1(x * global_scale / sf)`` (round to nearest, ties to even,
  saturating at 6); dequantized ``x' = e2m1 * sf / global_scale``.
  GEMM ``alpha = 1 / (global_scale_a * global_scale_b)``.
  Source: NVIDIA TensorRT-LLM / FlashInfer ``cvt_warp_fp16_to_fp4`` and
  sgl-kernel ``scaled_fp4_quant`` (fact sheet ``sglang-sm120.md`` section 4.1).
* ``448`` is the largest finite E4M3 value (1.75 * 2**8, OCP OFP8 spec v1.0,
  table 1); ``6`` the largest E2M1 value.
* Swizzled "128x4" scale layout (what CUTLASS / FlashInfer / sgl-kernel FP4 GEMMs
  read): pad rows to a multiple of 128 and scale columns (K/16) to a multiple of
  4 with zeros; element ``(r, c)`` of the padded ``[Mp, Kp]`` matrix lives at flat
  offset ``((r // 128) * (Kp // 4) + c // 4) * 512 + (r % 32) * 16 +
  ((r % 128) // 32) * 4 + c % 4``, i.e. a ``[Mp/128, Kp/4, 32, 4, 4]`` array.
  Source: PTX ISA "tcgen05 block-scaling: scale factor A/B layout 4x" and
  FlashInfer ``get_sf_out_offset_128x4``; the inverse is sgl-kernel's
  ``recover_swizzled_scales`` / ``convert_swizzled_to_linear``.

torch is imported lazily (inside functions) so this file is importable where
torch is missing (the Ansible controller, the module wrapper).
"""

from __future__ import annotations

import math

# --- format constants (sources in the module docstring) -----------------------
E2M1_VALUES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)
FP4_E2M1_MAX = 6.0
FP8_E4M3_MAX = 448.0
BLOCK_SIZE = 16
SWIZZLE_ROW_TILE = 128  # rows per scale tile (4 x 32)
SWIZZLE_COL_TILE = 4  # scale columns per tile (4 scales = 64 elements of K)
# Midpoints between consecutive E2M1 magnitudes; a value exactly on a midpoint
# rounds to the neighbour with the even code (IEEE round-half-to-even).
_E2M1_MIDPOINTS = (0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0)


def round_up(value, multiple):
    """Smallest multiple of ``multiple`` that is >= ``value`` (ints)."""
    return (int(value) + multiple - 1) // multiple * multiple


class NVFP4Tensor(object):
    """A tensor quantized to NVFP4 by :func:`quantize`.

    Attributes:
        packed: ``uint8 [M, K/2]``, two E2M1 codes per byte (low nibble first).
        scales: ``float8_e4m3fn``; ``[round_up(M,128), round_up(K/16,4)]`` in the
            128x4 swizzled order when ``swizzled`` else ``[M, K/16]`` linear.
        global_scale: ``float32`` 0-d tensor, ``448*6/amax`` unless given.
        shape: ``(M, K)`` of the original tensor.
        swizzled: layout of ``scales``.
    """

    def __init__(self, packed, scales, global_scale, shape, swizzled):
        self.packed = packed
        self.scales = scales
        self.global_scale = global_scale
        self.shape = tuple(int(s) for s in shape)
        self.swizzled = bool(swizzled)

    def linear_scales(self):
        """Block scales as ``float8_e4m3fn [M, K/16]`` (row-major, unpadded)."""
        if not self.swizzled:
            return self.scales
        m, k = self.shape
        return unswizzle_scales(self.scales, m, k // BLOCK_SIZE)

    def dequantize(self, dtype=None):
        """Shortcut for :func:`dequantize` (float32 unless ``dtype``)."""
        return dequantize(self, dtype=dtype)


def _torch():
    import torch  # noqa: WPS433 (lazy: keep module importable without torch)

    return torch


def global_scale_for(x):
    """FP32 global scale ``448 * 6 / amax(|x|)`` as a 0-d float32 tensor.

    Args:
        x: any-shape float tensor (bf16/fp16/fp32), CPU or CUDA.
    Raises:
        ValueError: ``x`` is empty, all zeros, or holds NaN/Inf (the scale would
            be Inf/NaN, which no backend accepts).
    """
    torch = _torch()
    if x.numel() == 0:
        raise ValueError("global_scale_for: empty tensor")
    xf = x.detach().float()
    if not bool(torch.isfinite(xf).all()):
        raise ValueError("global_scale_for: tensor holds NaN/Inf")
    amax = xf.abs().max()
    if float(amax) == 0.0:
        raise ValueError("global_scale_for: all-zero tensor has no NVFP4 global scale")
    return (torch.tensor(FP8_E4M3_MAX * FP4_E2M1_MAX, dtype=torch.float32, device=x.device) / amax).to(torch.float32)


def e2m1_codes(values):
    """Round float values to 4-bit E2M1 codes (round-half-even, saturating).

    Args:
        values: float tensor (already divided by the block's dequant scale).
    Returns:
        ``uint8`` tensor of the same shape, codes 0..15 (bit 3 = sign,
        bits 0-2 = index into :data:`E2M1_VALUES`).  ``-0`` encodes as ``0``.
    Raises:
        ValueError: NaN in ``values`` (E2M1 has no NaN encoding).
    """
    torch = _torch()
    v = values.float()
    if bool(torch.isnan(v).any()):
        raise ValueError("e2m1_codes: NaN has no E2M1 encoding")
    mag = v.abs().clamp(max=FP4_E2M1_MAX)
    mids = torch.tensor(_E2M1_MIDPOINTS, dtype=torch.float32, device=v.device)
    lo = torch.searchsorted(mids, mag.contiguous(), right=False)  # ties -> lower code
    hi = torch.searchsorted(mids, mag.contiguous(), right=True)  # ties -> upper code
    idx = torch.where((hi != lo) & (lo % 2 == 1), hi, lo)  # tie: pick the even code
    sign = ((v < 0) & (idx > 0)).to(torch.uint8) << 3
    return idx.to(torch.uint8) | sign


def e2m1_to_float(codes):
    """Decode ``uint8`` E2M1 codes (0..15) to float32 values."""
    torch = _torch()
    table = torch.tensor(E2M1_VALUES, dtype=torch.float32, device=codes.device)
    mag = table[(codes & 0x7).long()]
    return torch.where((codes & 0x8) != 0, -mag, mag)


def pack_e2m1(codes):
    """Pack ``uint8 [..., K]`` codes into ``uint8 [..., K/2]`` (low nibble first).

    Raises:
        ValueError: last dimension is odd.
    """
    if codes.shape[-1] % 2:
        raise ValueError("pack_e2m1: last dimension must be even, got %d" % codes.shape[-1])
    lo = codes[..., 0::2]
    hi = codes[..., 1::2]
    return (lo & 0xF) | ((hi & 0xF) << 4)


def unpack_e2m1(packed):
    """Inverse of :func:`pack_e2m1`: ``uint8 [..., K/2]`` -> codes ``uint8 [..., K]``."""
    torch = _torch()
    lo = packed & 0xF
    hi = (packed >> 4) & 0xF
    return torch.stack((lo, hi), dim=-1).reshape(*packed.shape[:-1], packed.shape[-1] * 2)


def swizzle_scales(linear):
    """Linear ``[M, K/16]`` E4M3 scales -> 128x4 swizzled ``[Mp, Kp]``.

    ``Mp = round_up(M, 128)``, ``Kp = round_up(K/16, 4)``; padding is zero (the
    kernels require it).  Works on any 1-byte dtype (the data is moved as
    ``uint8``, so CPU float8 indexing support is not needed).
    """
    torch = _torch()
    m, kb = linear.shape
    mp, kp = round_up(m, SWIZZLE_ROW_TILE), round_up(kb, SWIZZLE_COL_TILE)
    raw = linear.contiguous().view(torch.uint8)
    padded = torch.zeros((mp, kp), dtype=torch.uint8, device=linear.device)
    padded[:m, :kb] = raw
    # padded[mt*128 + r4*32 + r32, kt*4 + c4] -> swizzled[mt, kt, r32, r4, c4]
    tiles = padded.view(mp // 128, 4, 32, kp // 4, 4).permute(0, 3, 2, 1, 4).contiguous()
    return tiles.view(mp, kp).view(linear.dtype)


def unswizzle_scales(swizzled, m, k_blocks):
    """128x4 swizzled scales (any shape with ``Mp*Kp`` elements) -> linear ``[m, k_blocks]``."""
    torch = _torch()
    mp, kp = round_up(m, SWIZZLE_ROW_TILE), round_up(k_blocks, SWIZZLE_COL_TILE)
    raw = swizzled.contiguous().view(torch.uint8)
    if raw.numel() != mp * kp:
        raise ValueError(
            "unswizzle_scales: expected %d scale bytes for M=%d, K/16=%d, got %d"
            % (mp * kp, m, k_blocks, raw.numel())
        )
    tiles = raw.reshape(mp // 128, kp // 4, 32, 4, 4).permute(0, 3, 2, 1, 4).contiguous()
    return tiles.view(mp, kp)[:m, :k_blocks].contiguous().view(swizzled.dtype)


def quantize(x, global_scale=None, swizzle=True):
    """Quantize ``x [M, K]`` to NVFP4.

    Args:
        x: float tensor ``[M, K]`` (bf16/fp16/fp32), CPU or CUDA; ``K % 16 == 0``.
        global_scale: optional FP32 scalar (tensor or float); default
            :func:`global_scale_for` ``(x)``.
        swizzle: return scales in the 128x4 swizzled layout (what the GEMM
            kernels consume) instead of linear ``[M, K/16]``.
    Returns:
        :class:`NVFP4Tensor`.
    Raises:
        ValueError: wrong rank, ``K % 16 != 0``, or non-finite input.
    """
    torch = _torch()
    if x.dim() != 2:
        raise ValueError("quantize: expected a 2-D [M, K] tensor, got shape %s" % (tuple(x.shape),))
    m, k = x.shape
    if k % BLOCK_SIZE:
        raise ValueError("quantize: K=%d is not a multiple of %d" % (k, BLOCK_SIZE))
    xf = x.detach().float()
    if not bool(torch.isfinite(xf).all()):
        raise ValueError("quantize: input holds NaN/Inf")
    if global_scale is None:
        gs = global_scale_for(xf)
    else:
        gs = torch.as_tensor(global_scale, dtype=torch.float32, device=x.device).reshape(())
    blocks = xf.view(m, k // BLOCK_SIZE, BLOCK_SIZE)
    block_amax = blocks.abs().amax(dim=-1)
    # Stored scale: e4m3(block_amax / 6 * global_scale), clamped to the E4M3 range
    # (cast is round-to-nearest-even in torch).
    sf = (block_amax * (gs / FP4_E2M1_MAX)).clamp(max=FP8_E4M3_MAX).to(torch.float8_e4m3fn)
    sf_f = sf.float()
    # Quantization multiplier as the CUDA kernels form it: 1 / (sf * (1 / gs));
    # 0 for an all-zero block (sf == 0).
    denom = sf_f * (1.0 / gs)
    mult = torch.where(sf_f > 0, 1.0 / torch.where(sf_f > 0, denom, torch.ones_like(denom)), torch.zeros_like(denom))
    codes = e2m1_codes(blocks * mult.unsqueeze(-1)).view(m, k)
    scales = swizzle_scales(sf) if swizzle else sf
    return NVFP4Tensor(pack_e2m1(codes), scales, gs, (m, k), swizzle)


def dequantize(q, dtype=None):
    """NVFP4 -> float: ``e2m1 * sf / global_scale``.

    Args:
        q: :class:`NVFP4Tensor`.
        dtype: output dtype (default float32; the value is computed in float32).
    Returns:
        tensor ``[M, K]`` on ``q.packed.device``.
    """
    torch = _torch()
    m, k = q.shape
    vals = e2m1_to_float(unpack_e2m1(q.packed)).view(m, k // BLOCK_SIZE, BLOCK_SIZE)
    sf = q.linear_scales().float()
    out = (vals * (sf / q.global_scale.float()).unsqueeze(-1)).view(m, k)
    return out if dtype is None else out.to(dtype)


def reference_gemm(a_q, b_q, accumulate_dtype=None):
    """``dequant(A) @ dequant(B)^T`` -- what an exact NVFP4 GEMM must return.

    Args:
        a_q: :class:`NVFP4Tensor` ``[M, K]`` (activations).
        b_q: :class:`NVFP4Tensor` ``[N, K]`` (weights, row-major "NT" like
            ``torch.nn.Linear``).
        accumulate_dtype: float32 (default) or float64.  Products of E2M1 and
            E4M3 values are exact in float32; only the K-sum rounds.
    Returns:
        tensor ``[M, N]`` in ``accumulate_dtype``.
    """
    torch = _torch()
    acc = accumulate_dtype or torch.float32
    return dequantize(a_q).to(acc) @ dequantize(b_q).to(acc).t()


def alpha_for(a_q, b_q):
    """GEMM output scale ``1 / (gs_a * gs_b)`` as a float32 1-element tensor."""
    torch = _torch()
    return (1.0 / (a_q.global_scale.float() * b_q.global_scale.float())).reshape(1).to(torch.float32)


def quantization_snr_db(x, q):
    """Signal-to-quantization-noise ratio (dB) of ``q`` against ``x``.

    For N(0,1) data NVFP4 gives roughly 18-22 dB; a value far below that means
    the quantizer (not the kernel) is broken.
    """
    torch = _torch()
    xf = x.float()
    err = (dequantize(q) - xf).pow(2).sum()
    sig = xf.pow(2).sum()
    if float(err) == 0.0:
        return math.inf
    return float(10.0 * torch.log10(sig / err))
