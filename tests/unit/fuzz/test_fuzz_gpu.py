"""Fuzz the nvidia-smi, lspci and kernel-log readers (``_gpu``, ``_gpu_health``) through their collectors with a
stand-in ``run`` that answers fuzzed text, as a broken or hostile driver stack would: a reader returns its
documented result (facts or a verdict that names the failure) or raises its documented error (``NvidiaSmiError``
kind ``too_old``; ``ValueError`` for a bad ``since``); any other exception is a crash."""

import datetime
import tempfile

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given, settings, strategies as st  # noqa: E402  pylint: disable=wrong-import-position

from ansible_collections.blackwell.sglang.plugins.module_utils import _gpu  # noqa: E402
from ansible_collections.blackwell.sglang.plugins.module_utils import _gpu_health  # noqa: E402

EXAMPLES = settings().max_examples

CELLS = ["0", "1", "7", "-5", "95.5", "inf", "-inf", "nan", "1e400", "9" * 30, "0x1", "0xFFFFFFFFFFFFFFFF", "0xzz",
         "[N/A]", "[Not Supported]", "N/A", "", " ", "Enabled", "Disabled", "Yes", "No", "12.0", "12.1", "x.y",
         "00000000:01:00.0", "0000:41:00.0", "../../..", "GPU-1234", "NVIDIA RTX PRO 6000 Blackwell", "580.95.05",
         "\x00", "ö", ",", "\t"]
cell = st.sampled_from(CELLS) | st.text(max_size=6)


def csv_text(columns):
    line = st.lists(cell, min_size=max(0, columns - 2), max_size=columns + 2).map(", ".join)
    return st.lists(line | st.text(max_size=20), max_size=4).map("\n".join)


LOG_PIECES = [
    "NVRM: Xid (PCI:0000:01:00): ", "NVRM: Xid (0000:41:00.0): ", "119", "79", "154", "8", "13", "99999999999999999999",
    ", pid=6211, name=python3, ", "pid='<unknown>', ", "Timeout after 45s", "recovery action changed from 0x0 (None) "
    "to 0x1 (GPU Reset Required)", "NVRM: GPU at PCI:0000:01:00: GPU has fallen off the bus.",
    "NVRM: GPU 0000:01:00.0: RmInitAdapter failed! (0x22:0x56:884)", "RmInitAdapter failed! (0x)",
    "2026-11-30T22:00:00+0100 host kernel: ", "2026-13-45T99:99:99Z ", "9999-12-31T23:59:59-2359 ",
    "0000-01-01T00:00:00,123Z ", "GSP RM heartbeat timed out", "NV_ERR_NO_MEMORY _memdescAllocInternal", "\n", " ",
    "Driver Version: 580.95.05", "CUDA Version : 13.0", "CUDA Version: 99999999999999999999.1",
]
STAMPS = ["", "2026-11-30T22:00:00+0100 ", "2026-13-45T99:99:99Z ", "9999-12-31T23:59:59-2359 ",
          "0001-01-01T00:00:00+2359 ", "0000-01-01T00:00:00,123Z ", "2026-11-30T22:00:00.5 ", "x "]
log_line = st.tuples(st.sampled_from(STAMPS),
                     st.lists(st.sampled_from(LOG_PIECES) | st.text(max_size=8), max_size=6).map("".join)).map(
    "".join)
log_text = st.lists(log_line, max_size=8).map("\n".join)

SMI_PIECES = [
    "GPU0", "GPU1", "NIC0", "\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity", "GPU0\t X \tNV18\t0-31\t0", "GPU1\tPHB\t X ",
    "OK", "CNS", "X", "SYS", "\x1b[4m", "\x1b[0m", "\n", " ", "GPU 00000000:01:00.0", "    MIG Mode", "        Current"
    "                       : Disabled", "        Pending : Enabled", "    GSP Firmware Version : 580.95.05",
    "    VBIOS Version : 98.02", "    Compute Mode : Default", "0000:00:01.0 PCI bridge: x", "\t\tACSCtl:\tSrcValid+ "
    "TransBlk- ReqRedir+ CmpltRedir- UpstreamFwd+", "Capabilities: <access denied>", "Field \"x\" is not a valid field "
    "to query.", "Failed to initialize NVML: Driver/library version mismatch", "No devices were found",
    "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver", "Unable to determine the device "
    "handle for GPU0000:01:00.0: Unknown Error",
]
smi_text = st.lists(st.sampled_from(SMI_PIECES) | st.text(max_size=8), max_size=25).map("".join)
rc = st.sampled_from([0, 0, 0, 1, 2, 6, 9, 124, 255, -9])


@settings(max_examples=max(40, EXAMPLES // 2))
@given(st.data())
def test_gpu_facts_collect_on_fuzzed_tool_output(data):
    gpu_count = data.draw(st.integers(min_value=0, max_value=3))

    def run(argv):
        if argv[1].startswith("--query-gpu"):
            return data.draw(rc), data.draw(csv_text(len(_gpu.QUERY_FIELDS)) if gpu_count else st.just("")), \
                data.draw(smi_text)
        return data.draw(rc), data.draw(smi_text), data.draw(smi_text)

    root = tempfile.mkdtemp(prefix="fuzz-sys-")
    try:
        facts = _gpu.collect(run, "/usr/bin/nvidia-smi", lspci="/usr/bin/lspci", sysfs_root=root, proc_root=root,
                             kernel_log=lambda: data.draw(log_text).splitlines())
    except _gpu.NvidiaSmiError as exc:
        assert exc.kind == "too_old" and str(exc)
        return
    finally:
        import shutil  # pylint: disable=import-outside-toplevel
        shutil.rmtree(root)
    assert isinstance(facts["gpus"], list) and facts["gpu_count"] == len(facts["gpus"])


@given(csv_text(len(_gpu.QUERY_FIELDS)))
def test_parse_query_csv(text):
    try:
        gpus = _gpu.parse_query_csv(text)
    except ValueError as exc:
        assert "nvidia-smi query line" in str(exc)
        return
    assert all(set(g) == set(f[1] for f in _gpu.QUERY_FIELDS) for g in gpus)


@given(smi_text, st.text(max_size=40), log_text)
def test_gpu_text_readers(text, cmdline, log):
    _gpu.parse_topology(text)
    _gpu.parse_p2p_matrix(text)
    _gpu.parse_lspci_acs(text)
    _gpu.parse_q_details(text)
    _gpu.parse_iommu_cmdline(cmdline + " " + text)
    _gpu.parse_kernel_module(text, log)
    _gpu.classify_nvidia_smi_failure(124, text, log)
    _gpu.decode_kernel_log(log.splitlines(), "unknown")
    assert _gpu.version_tuple(text) is None or isinstance(_gpu.version_tuple(text), tuple)
    for value in (text, cmdline):
        _gpu.normalize_bus_id(value)
        ok, detail = _gpu.driver_supports_cuda(value, None, "13.0")
        assert ok in (True, False, None) and detail


@given(st.one_of(st.none(), st.text(max_size=30), st.sampled_from(
    ["-1d", "-99999999999999999999d", "-1e9d", "@99999999999999999999", "1e30", "99999999999", "2026-11-30T22:00:00Z",
     "2026-11-30 22:00:00+0100", "9999-12-31T23:59:59-23:59", "0001-01-01T00:00:00+23:59", "boot", "", "-0s",
     "-5.5h", "@-1", "2026-02-30"]), st.floats(), st.integers()))
def test_parse_since(value):
    now = datetime.datetime(2026, 11, 30, tzinfo=datetime.timezone.utc)
    try:
        when = _gpu_health.parse_since(value, now=now)
    except ValueError as exc:
        assert "since" in str(exc)
        return
    assert when is None or when.tzinfo is not None


@given(log_text, st.none() | st.datetimes(timezones=st.just(datetime.timezone.utc)))
def test_parse_kernel_log(text, since):
    log = _gpu_health.parse_kernel_log(text, since=since)
    assert log["lines_read"] == len(text.splitlines())


@settings(max_examples=max(40, EXAMPLES // 2))
@given(st.data(), st.none() | st.integers(min_value=0, max_value=8))
def test_gpu_health_collect_on_fuzzed_tool_output(data, expected):
    def run(argv, timeout, env=None):
        if argv[0].endswith("journalctl"):
            return _gpu_health.CommandResult(argv, rc=data.draw(rc), stdout=data.draw(log_text))
        if data.draw(st.integers(min_value=0, max_value=15)) == 0:
            return _gpu_health.CommandResult(argv, timed_out=True, timeout=timeout, error="killed")
        fields = argv[1][len("--query-gpu="):].split(",")
        return _gpu_health.CommandResult(argv, rc=data.draw(rc), stdout=data.draw(csv_text(len(fields))),
                                         stderr=data.draw(smi_text))

    verdict, _smi = _gpu_health.collect("/usr/bin/nvidia-smi", kernel_log_source="journal", since=None,
                                        expected_gpu_count=expected, journalctl="/usr/bin/journalctl", run=run)
    assert verdict["status"] in ("healthy", "degraded", "unhealthy") and verdict["summary"]
    row = _gpu_health.table_row(verdict)
    assert len(row) == 4 and all(isinstance(cell, str) for cell in row) and row[0] == verdict["status"]
    plan = _gpu_health.policy_plan(verdict["gpus"], [
        {"model": "RTX", "power_limit_w": 450, "application_clocks": {"memory_mhz": 1, "graphics_mhz": 2}}])
    assert len(plan) == len(verdict["gpus"])
