"""Field reports part 3, C01 and C02 (shared/domain/field-reports-3.md, fixtures F-C01 and F-C02), through the
journal classifier, the readiness module (its journal read through a journalctl double), the build/import-log
classifier (``sgl_kernel_build_failure`` filter) and the ``preflight_evaluate`` filter.

C01: a CUDA-graph capture failure is classified by the line above SGLang's wrapper, never by the wrapper or by the
"Possible solutions" advice (memory settings, printed whatever the cause). C02: ``undefined symbol: nccl...`` is a
second NCCL wheel, not an sgl-kernel ABI mismatch; the preflight names duplicate NCCL wheels and a runtime NCCL
that is not the installed wheel's.
"""

import json
import os
import subprocess
import sys

import pytest

from conftest import COLLECTIONS, ROOT
from ansible_collections.blackwell.sglang.plugins.filter.preflight import preflight_evaluate
from ansible_collections.blackwell.sglang.plugins.filter.sgl_kernel_build_failure import sgl_kernel_build_failure
from ansible_collections.blackwell.sglang.plugins.module_utils import _journal

# --- F-C01 (verbatim, paths masked as in the report) ---------------------------------------------------------------
PDL = ["RuntimeError: Runtime check failed at <src>/kvcache.cuh:196: CUDA error: invalid resource handle",
       "Exception: Capture cuda graph failed"]
ADVICE = ["Possible solutions:",
          "1. set --mem-fraction-static to a smaller value (e.g., 0.8 or 0.7)",
          "2. set --cuda-graph-max-bs to a smaller value (e.g., 16)"]
# the advice as SGLang 0.5.x prints it in full (cuda_graph_runner.py), with the journal's prefix
ADVICE_FULL = ["[2026-08-10 03:12:44 TP0] Possible solutions:",
               "[2026-08-10 03:12:44 TP0] 1. set --mem-fraction-static to a smaller value (e.g., 0.8 or 0.7)",
               "[2026-08-10 03:12:44 TP0] 2. set --cuda-graph-max-bs to a smaller value (e.g., 16)",
               "[2026-08-10 03:12:44 TP0] 3. disable torch compile by not using --enable-torch-compile",
               "[2026-08-10 03:12:44 TP0] 4. disable CUDA graph by --disable-cuda-graph. (Not recommended. Huge "
               "performance loss)",
               "[2026-08-10 03:12:44 TP0] Open an issue on GitHub https://github.com/sgl-project/sglang/issues/new/choose"]
CAR = ["RuntimeError: invalid argument", "/sgl-kernel/csrc/allreduce/custom_all_reduce.cuh:350"]
OOM = ["torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.", "Exception: Capture cuda graph failed"]
# F-N01's SGLang block (field-reports-2.md, RLinf#92)
N01 = ["Exception: Capture cuda graph failed: Internal Triton PTX codegen error:",
       "ptxas fatal   : Value 'sm_120' is not defined for option 'gpu-name'"]
STARTUP = ["Load weight end. type=Qwen3MoeForCausalLM, dtype=torch.bfloat16, avail mem=20.11 GB",
           "KV Cache is allocated. #tokens: 812345", "Capture cuda graph begin. This can take up to several minutes."]

# --- F-C02 ------------------------------------------------------------------------------------------------------------
NCCL_IMPORT = ("ImportError: <venv>/lib/python3.10/site-packages/torch/lib/libtorch_cuda.so: undefined symbol: "
               "ncclMemFree")


@pytest.mark.parametrize("lines, cause", [
    (PDL + ADVICE, "pdl_graph_capture_sm120"),
    (STARTUP + PDL + ADVICE_FULL, "pdl_graph_capture_sm120"),
    (STARTUP + CAR + ["Exception: Capture cuda graph failed: invalid argument"] + ADVICE, "custom_allreduce_capture"),
    (CAR + ADVICE, "custom_allreduce_capture"),
    (N01 + ADVICE, "triton_ptxas_too_old"),
    (OOM, "runtime_oom"),
    (OOM + ADVICE_FULL, "runtime_oom"),
    (["Exception: Capture cuda graph failed: CUDA out of memory. Tried to allocate 1.50 GiB"] + ADVICE, "runtime_oom"),
], ids=["pdl", "pdl-full-advice", "custom-allreduce", "custom-allreduce-bare", "n01", "oom", "oom-full-advice",
        "oom-in-wrapper"])
def test_c01_capture_failure_is_its_inner_cause(lines, cause):
    result = _journal.classify(lines)
    assert result["cause"] == cause, result
    assert "Possible solutions" not in result["line"] and "mem-fraction-static to a smaller" not in result["line"]
    if cause != "runtime_oom":
        assert "runtime_oom" not in result["matches"] and "mem_fraction" not in result["remedy"], result


def test_c01_remedies():
    pdl = _journal.classify(PDL + ADVICE)
    assert "sglang#18596" in pdl["remedy"] and "--disable-cuda-graph" in pdl["remedy"] and "stopgap" in pdl["remedy"]
    car = _journal.classify(CAR + ADVICE)
    assert "--disable-custom-all-reduce" in car["remedy"]


def test_c01_the_advice_alone_decides_nothing():
    """SGLang's advice (and the bare wrapper) never give a memory verdict: the inner error is unknown here."""
    result = _journal.classify(["Exception: Capture cuda graph failed"] + ADVICE_FULL)
    assert result["cause"] == "unknown" and result["matches"] == [], result
    assert result["line"] == "Exception: Capture cuda graph failed"


def test_c01_invalid_resource_handle_outside_a_capture_is_not_the_pdl_kind():
    result = _journal.classify(["RuntimeError: CUDA error: invalid resource handle"])
    assert result["cause"] != "pdl_graph_capture_sm120", result


def test_c01_through_the_readiness_module(tmp_path):
    """The module as Ansible runs it: a unit that failed after this journal; the cause and remedy are C01's."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    journal = STARTUP + PDL + ADVICE_FULL
    (bindir / "journal.txt").write_text("\n".join(journal) + "\n-- cursor: s=1\n")
    (bindir / "journalctl").write_text("#!/bin/sh\ncat %s\n" % (bindir / "journal.txt"))
    (bindir / "systemctl").write_text("#!/bin/sh\nfor a; do case $a in --property=ActiveState) echo ActiveState=failed;;"
                                      " --property=SubState) echo SubState=failed;; esac; done\n")
    for name in ("journalctl", "systemctl"):
        (bindir / name).chmod(0o755)
    args = tmp_path / "args.json"
    args.write_text(json.dumps({"ANSIBLE_MODULE_ARGS": {
        "unit": "sglang.service", "url": "http://127.0.0.1:9/health", "interval": 0.1, "stall_timeout": 1,
        "max_wait": 5, "start_grace": 0, "kernel_log": False}}))
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "plugins", "modules", "sglang_readiness.py"), str(args)],
                          env=dict(os.environ, PYTHONPATH=COLLECTIONS, PATH="%s:%s" % (bindir, os.environ["PATH"])),
                          capture_output=True, text=True, timeout=60, check=False)
    result = json.loads(proc.stdout)
    assert result["failed"] is True and result["reason"] == "unit_failed"
    assert result["cause"]["cause"] == "pdl_graph_capture_sm120", result["cause"]
    assert "[pdl_graph_capture_sm120]" in result["msg"] and "sglang#18596" in result["msg"]


@pytest.mark.parametrize("lines", [
    [NCCL_IMPORT],
    ["Traceback (most recent call last):", '  File "<venv>/lib/python3.12/site-packages/sglang/launch_server.py", '
     "line 7, in <module>", "ImportError: <venv>/lib/python3.12/site-packages/torch/lib/libtorch_cuda.so: undefined "
     "symbol: ncclCommWindowRegister"],
    ["OSError: <venv>/lib/python3.12/site-packages/torch/lib/libtorch_cuda.so: undefined symbol: ncclGroupSimulateEnd, "
     "version NCCL_2.26"],
], ids=["returnn-1802", "another-symbol", "versioned-symbol"])
def test_c02_undefined_nccl_symbol_is_the_nccl_wheels(lines):
    result = _journal.classify(lines)
    assert result["cause"] == "nccl_library_mismatch", result
    assert "sgl_kernel_abi_mismatch" not in result["matches"]
    assert "rebuilding sgl-kernel does not help" in result["remedy"] and "nvidia-nccl-cu13" in result["remedy"]
    build = sgl_kernel_build_failure("\n".join(lines))
    assert build["cause"] == "nccl_library_mismatch" and "rebuild" not in build["remedy"].split(":", maxsplit=1)[0], build


def test_c02_other_undefined_symbols_stay_the_abi_kind():
    line = ("ImportError: /venv/sgl_kernel/sm100/common_ops.abi3.so: undefined symbol: "
            "_ZN3c104cuda29c10_cuda_check_implementationEiPKcS2_ib")
    assert _journal.classify([line])["cause"] == "sgl_kernel_abi_mismatch"
    assert sgl_kernel_build_failure(line)["cause"] == "sgl_kernel_abi_mismatch"


def _preflight(torch):
    if torch.get("present"):
        torch = dict({"version": "2.10.0+cu130", "cuda": "13.0", "arch_list": ["sm_120"]}, **torch)
    result = preflight_evaluate({}, {"torch": torch}, {}, {"require_gpu": False, "target_compute_capability": "12.0",
                                                           "distribution": {"system": "Linux", "distribution": "Ubuntu",
                                                                            "version": "24.04",
                                                                            "architecture": "x86_64"}})
    return dict((c["name"], c) for c in result["checks"])["nccl_wheels"]


@pytest.mark.parametrize("torch, status, word", [
    # F-C02 pip list [V: marin#7344 values]
    ({"present": True, "nccl": "2.28.9", "nccl_wheels": {"nvidia-nccl-cu12": "2.28.9", "nvidia-nccl-cu13": "2.30.7"}},
     "fail", "duplicate_nccl_wheels"),
    # F-C02 runtime against metadata [V: verl#6621]: (2, 28, 9) and Version: 2.30.4
    ({"present": True, "nccl": "2.28.9", "nccl_wheels": {"nvidia-nccl-cu13": "2.30.4"}}, "fail", "nccl_runtime_mismatch"),
    # torch itself fails to import with the ImportError: the wheels are still listed
    ({"present": False, "error": "torch not importable: " + NCCL_IMPORT,
      "nccl_wheels": {"nvidia-nccl-cu12": "2.28.9", "nvidia-nccl-cu13": "2.30.7"}}, "fail", "duplicate_nccl_wheels"),
    ({"present": True, "nccl": "2.30.4", "nccl_wheels": {"nvidia-nccl-cu13": "2.30.4"}}, "pass", "nvidia-nccl-cu13"),
    ({"present": True, "nccl": "2.30.7", "nccl_wheels": {"nvidia-nccl-cu13": "2.30.4"}}, "pass", "2.30.7"),
    ({"present": False, "error": "no python"}, "skip", "unknown"),
], ids=["two-wheels", "runtime-differs", "torch-unimportable", "one-wheel", "patch-level-differs", "no-venv"])
def test_c02_preflight_nccl_wheels(torch, status, word):
    check = _preflight(torch)
    assert check["status"] == status and word in check["message"], check
    if status == "fail":
        assert "nvidia-nccl-cu13" in check["remedy"]
