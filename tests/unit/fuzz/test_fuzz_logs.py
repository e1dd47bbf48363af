"""Fuzz the log readers: the service journal classifier (``_journal``), the readiness wait that reads the journal
as the server starts (``_readiness.wait_ready``, with a fake clock and fuzzed /health answers and unit states) and
the sgl-kernel build log classification (``_sgl_kernel_buildlog``). They return a classified result for any text;
``validate_url`` raises only ``ReadinessConfigError``. Any other exception is a crash."""

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given, settings, strategies as st  # noqa: E402  pylint: disable=wrong-import-position

from ansible_collections.blackwell.sglang.plugins.module_utils import _journal  # noqa: E402
from ansible_collections.blackwell.sglang.plugins.module_utils import _readiness  # noqa: E402
from ansible_collections.blackwell.sglang.plugins.module_utils import _sgl_kernel_buildlog as buildlog  # noqa: E402

EXAMPLES = settings().max_examples

JOURNAL_PIECES = [
    "Loading safetensors checkpoint shards:  50% Completed | 1/2 [00:01<00:01]", "| 99999999999999999999/0 ",
    "Load weight end", "torch.OutOfMemoryError: CUDA out of memory", "CUDA error: an illegal memory access",
    "NCCL INFO comm 0x1 rank 0 nranks 2 Init COMPLETE", "NVRM: Xid (PCI:0000:01:00): 119, pid=1", "Capture cuda graph bs",
    "Cannot find the config file for modelopt_fp4", "undefined symbol: ncclCommWindowRegister", "Traceback",
    "RuntimeError: ", "GSP RM heartbeat timed out", "NV_ERR_NO_MEMORY _memdescAllocInternal",
    "RmInitAdapter failed! (0x22:0x56:884)", "The server is fired up and ready to roll!", "\r", "\n", " ", "\x00",
    "set --mem-fraction-static smaller", "Capture cuda graph failed", "ö",
]
journal_line = st.lists(st.sampled_from(JOURNAL_PIECES) | st.text(max_size=8), max_size=6).map("".join)
journal = st.lists(journal_line, max_size=12)
argv = st.none() | st.lists(st.sampled_from(["--speculative-algorithm", "--speculative-algorithm=EAGLE", "--tp", "2",
                                             "--quantization", "modelopt_fp4"]) | st.text(max_size=5), max_size=5)
context = st.none() | st.fixed_dictionaries({}, optional={"gpu_name": st.sampled_from(["NVIDIA GB10", "RTX", ""]),
                                                          "compute_capability": st.sampled_from(["12.1", "12.0", ""])})


@given(journal | journal_line, argv, context)
def test_journal_classify(lines, server_argv, ctx):
    result = _journal.classify(lines, argv=server_argv, context=ctx)
    assert result["cause"] and isinstance(result["matches"], list) and result["summary"]
    progress = _journal.shard_progress(lines)
    assert progress is None or len(progress) == 2
    assert _journal.nccl_init_complete(lines) in (True, False)


@settings(max_examples=max(40, EXAMPLES // 2))
@given(st.data(), argv, st.integers(min_value=1, max_value=8))
def test_readiness_wait_reads_any_journal(data, server_argv, tp_size):
    now = [0.0]
    polls = [0]

    def http_get(timeout):
        return data.draw(st.sampled_from([(200, None), (503, None), (None, "Connection refused: x"), (None, None),
                                          (None, ":"), (500, "x")]))

    def read_journal():
        return data.draw(journal | journal_line | st.none())

    def unit_state():
        polls[0] += 1
        if polls[0] > 60:            # bounded even when the answers keep the wait going
            return "failed", "failed"
        return data.draw(st.sampled_from([("activating", "start"), ("active", "running"), ("inactive", "dead"),
                                          ("failed", "failed"), ("activating", "auto-restart"), ("", "")]))

    result = _readiness.wait_ready(
        http_get=http_get, read_journal=read_journal, unit_state=unit_state, clock=lambda: now[0],
        sleep=lambda seconds: now.__setitem__(0, now[0] + seconds), request_timeout=10, successes=2, interval=5,
        stall_timeout=60, max_wait=200, tail_lines=10, tp_size=tp_size, start_grace=10,
        classify_context={"argv": server_argv, "compute_capability": "12.0"})
    assert result["reason"] in ("ready", "unit_failed", "stalled", "max_wait")
    assert result["ready"] == (result["reason"] == "ready") and len(result["last_lines"]) <= 10


@given(st.text(max_size=40) | st.sampled_from([
    "http://127.0.0.1:30000/health", "http://[::1]:1/health", "http://127.0.0.1:0/", "http://h:99999999999999999999/",
    "http://[/", "http://a\x00b/", "https://x/health?q#f", "http://:80/"]))
def test_readiness_url(url):
    try:
        _readiness.validate_url(url)
    except _readiness.ReadinessConfigError as exc:
        assert str(exc).startswith("url ")


BUILD_PIECES = [
    "CMake Error at CMakeLists.txt:12 (find_package):", "  Could NOT find NUMA", "-- Configuring incomplete", "\n",
    "\n\n", "FAILED: [code=137] ", "Killed signal terminated program cc1plus", "undefined symbol: _ZN3c10",
    "libcudart.so.12 => not found", "Unsupported gpu architecture 'compute_120a'", "fatal error: cuda/std/x: No such",
    "CUDA_nvrtc_LIBRARY-NOTFOUND", 'file INSTALL cannot find "/x"', "Could not resolve host: github.com", "error",
    " ", "\r", "\x00", "ö",
]
build_text = st.lists(st.sampled_from(BUILD_PIECES) | st.text(max_size=8), max_size=40).map("".join)


@given(build_text, st.none() | st.integers(min_value=-255, max_value=255), st.booleans(),
       st.integers(min_value=0, max_value=20))
def test_build_log(text, code, timed_out, max_lines):
    result = buildlog.classify(text, rc=code, timed_out=timed_out)
    assert result["cause"] and result["remedy"]
    first = buildlog.first_cmake_error(text, max_lines=max_lines)
    assert all(isinstance(line, str) for line in first)
