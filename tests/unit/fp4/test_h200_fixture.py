"""Invariants of the probe run recorded on the team's H200 (sm_90; not Blackwell).

tests/fixtures/fp4/h200_sm90_probe.json: tests/bench/fp4_probe_bench.py (the runner shipped as the module does);
tests/fixtures/fp4/h200_sm90_module_result.json: the module through `ansible localhost -m` on the same machine.
Both were produced by tests/bench/run_fp4_probe_on_gpu.sh.
"""

import json
import os

import pytest

from ansible_collections.blackwell.sglang.plugins.module_utils import fp4_numerics as num

FIX = os.path.join(os.path.dirname(__file__), "..", "..", "fixtures", "fp4")


@pytest.fixture(params=["h200_sm90_probe.json", "h200_sm90_module_result.json"])
def result(request):
    with open(os.path.join(FIX, request.param)) as fh:
        return json.load(fh)


def test_device_is_the_h200(result):
    dev = result["device"]
    assert dev["present"] is True and dev["cc"] == 90 and dev["compute_capability"] == "9.0" and "H200" in dev["name"]
    assert result["versions"]["flashinfer"] == "0.6.17" and result["versions"]["torch"].endswith("+cu130")


def test_every_fp4_backend_is_unsupported_never_crash(result):
    backends = result["backends"]
    # everything FlashInfer 0.6.17 offers was probed: 5 mm_fp4 backends + 3 MoE runners
    assert set(backends) >= {"gemm/flashinfer_cutlass", "gemm/flashinfer_cudnn", "gemm/flashinfer_trtllm",
                             "gemm/flashinfer_cutedsl", "gemm/flashinfer_b12x", "moe/flashinfer_cutlass"}
    for key, b in backends.items():
        assert b["verdict"] == "unsupported", (key, b["verdict"], b.get("reason"))
        assert b["verdict"] not in ("crash", "timeout")
    for key in ("gemm/flashinfer_cutlass", "gemm/flashinfer_cudnn", "gemm/flashinfer_trtllm",
                "gemm/flashinfer_cutedsl", "gemm/flashinfer_b12x"):
        b = backends[key]
        # the refusal is FlashInfer's own: its support check said no AND a real mm_fp4 call raised
        assert b["source"] == "library" and b["error_type"] == "BackendSupportedError"
        assert "with capability 90" in b["reason"]
        assert result["mm_fp4_is_backend_supported"][b["library_backend"]] is False
    assert backends["moe/flashinfer_cutlass"]["source"] == "capability_table"


def test_reference_ran_on_the_gpu(result):
    ref = result["reference"]
    assert ref["ok"] is True and ref["device"].startswith("cuda")
    ms = sorted({c["m"] for c in ref["cases"]})
    assert ms == [1, 9, 128, 150, 1024]
    for c in ref["cases"]:
        assert c["roundtrip_exact"] and c["snr_db_a"] > 15 and c["cosine_vs_bf16"] > 0.98 and c["time_us"] > 0


def test_nothing_is_recommended_and_probe_was_fast(result):
    rec = result["recommended"]
    assert rec["fp4_gemm_backend"] is None and rec["moe_runner_backend"] is None
    assert num.recommend(result["backends"])[num.GEMM_FLAG] is None
    assert result["probe"]["isolation"] == "fork"
    assert result["probe"]["wall_s"] < 30  # whole probe incl. imports; no JIT happened (setup_s == 0)


def test_pinning_any_probed_backend_on_this_gpu_fails_with_evidence(result):
    ev = num.pinned_flag_verdict(result, "--fp4-gemm-backend", "flashinfer_cutlass")
    assert ev["verdict"] == "unsupported" and "H200" in ev["message"]
    assert num.pinned_flag_verdict(result, "--moe-runner-backend", "flashinfer_trtllm")["verdict"] == "unsupported"
