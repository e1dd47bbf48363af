"""The reference quantizer on a CUDA device gives the same bytes as on the CPU (skipped without a GPU)."""

import pytest

torch = pytest.importorskip("torch")

from ansible_collections.blackwell.sglang.plugins.module_utils import fp4_numerics as num
from ansible_collections.blackwell.sglang.plugins.module_utils import nvfp4_reference as ref

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")]


@pytest.mark.parametrize("m,k", [(1, 512), (150, 4096), (1024, 7168)])
def test_cuda_quantize_matches_cpu_bit_for_bit(m, k):
    g = torch.Generator().manual_seed(m + k)
    x = torch.randn(m, k, generator=g).to(torch.bfloat16)
    q_cpu = ref.quantize(x)
    q_gpu = ref.quantize(x.cuda())
    assert q_gpu.packed.is_cuda and q_gpu.scales.is_cuda
    assert torch.equal(q_gpu.packed.cpu(), q_cpu.packed)
    assert torch.equal(q_gpu.scales.view(torch.uint8).cpu(), q_cpu.scales.view(torch.uint8))
    assert float(q_gpu.global_scale) == float(q_cpu.global_scale)
    assert torch.equal(q_gpu.dequantize().cpu(), q_cpu.dequantize())


def test_cuda_reference_gemm_and_compare():
    g = torch.Generator().manual_seed(7)
    a = torch.randn(150, 4096, generator=g).to(torch.bfloat16).cuda()
    b = torch.randn(2048, 4096, generator=g).to(torch.bfloat16).cuda()
    aq, bq = ref.quantize(a), ref.quantize(b)
    deq = ref.reference_gemm(aq, bq)
    cpu = ref.reference_gemm(ref.quantize(a.cpu()), ref.quantize(b.cpu()))
    assert deq.is_cuda and torch.allclose(deq.cpu(), cpu, rtol=1e-5, atol=1e-3)
    res = num.compare(deq, deq.to(torch.bfloat16), baseline=a.float() @ b.float().t())
    assert res.ok and 0.98 < res.metrics["cosine_vs_baseline"] < 0.999
    bad = deq.to(torch.bfloat16)
    bad[128:] = 0
    assert num.compare(deq, bad).verdict == "zeros"
