"""Fuzz the benchmark readers: result records (``_bench_report.parse_jsonl``), whole result trees with run.json and
manifest.json (``build_report`` + ``render_markdown``), baselines and release manifests. A malformed file is a
``BenchReportError`` naming the file; anything else returns a report. Any other exception is a crash."""

import json
import os
import shutil
import tempfile

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given, settings, strategies as st  # noqa: E402  pylint: disable=wrong-import-position

from ansible_collections.blackwell.sglang.plugins.module_utils import _bench_report  # noqa: E402

EXAMPLES = settings().max_examples
RUN_ID = "20261130T120000Z"
PREVIOUS = "20261129T120000Z"

scalars = st.none() | st.booleans() | st.integers(min_value=-2 ** 64, max_value=2 ** 64) | st.floats() | \
    st.text(max_size=8) | st.sampled_from(["1", "²", "١٢", "8", " 8 ", "-1", "1e3"])
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=3) |
                      st.dictionaries(st.text(max_size=6), inner, max_size=3), max_leaves=8)


@st.composite
def records(draw):
    """A result record that is mostly right: every required key, a few bent or dropped, optional keys of any type."""
    record = {key: draw(st.floats(min_value=0, max_value=1e6) | st.integers(min_value=0, max_value=4096))
              for key in _bench_report.REQUIRED_KEYS}
    record["max_concurrency"] = draw(st.sampled_from([1, 8, 64, 8.0, 0, -1]))
    for key in draw(st.lists(st.sampled_from(_bench_report.REQUIRED_KEYS), max_size=2)):
        if draw(st.booleans()):
            record.pop(key, None)
        else:
            record[key] = draw(values)
    for key in draw(st.lists(st.sampled_from(_bench_report.OPTIONAL_KEYS), max_size=4)):
        record[key] = draw(values)
    return record


def _line(value):
    try:
        return json.dumps(value)
    except ValueError:
        return "{"


def _good(record):
    for key in _bench_report.REQUIRED_KEYS:
        if not _bench_report._is_number(record.get(key)):  # pylint: disable=protected-access
            record[key] = 1.0
    return record


# a level file that parses (the report's later stages are reached), and one that may not
good_jsonl = st.lists(records().map(_good).map(_line), min_size=1, max_size=2).map("\n".join)
jsonl = st.lists(records().map(_line) | values.map(_line) | st.text(max_size=20) |
                 st.just("[" * 5000 + "]" * 5000), max_size=3).map("\n".join)


@given(jsonl)
def test_parse_jsonl(text):
    try:
        parsed = _bench_report.parse_jsonl(text, "c8.jsonl")
    except _bench_report.BenchReportError as exc:
        assert str(exc).startswith("c8.jsonl:")
        return
    assert all(isinstance(r["max_concurrency"], int) for r in parsed)


run_meta = st.fixed_dictionaries({}, optional={
    "levels": st.lists(st.fixed_dictionaries({}, optional={"max_concurrency": scalars, "num_prompts": scalars}) | values,
                       max_size=3) | values,
    "failures": st.lists(st.fixed_dictionaries({}, optional={"max_concurrency": scalars, "message": values}) | values,
                         max_size=2) | values,
    "status": st.sampled_from(["skipped", "done"]) | values, "skip_reason": values,
    "random_input_len": scalars, "random_output_len": scalars,
}) | values
manifest = st.fixed_dictionaries({}, optional={
    "release": st.fixed_dictionaries({}, optional={"id": scalars}) | values,
    "packages": st.dictionaries(st.sampled_from(["sglang", "Torch", "sgl_kernel", "flashinfer-python"]) |
                                st.text(max_size=4), scalars, max_size=3) | values,
    "probe": st.fixed_dictionaries({}, optional={"backends": values, "verdicts": values, "recommended": values,
                                                 "device": values}) | values,
    "versions": values, "commits": values, "sglang": values, "torch": values, "release_id": scalars,
}) | values
baseline = st.none() | st.fixed_dictionaries({"points": st.lists(st.fixed_dictionaries(
    {"max_concurrency": st.sampled_from([1, 8, 64]), "output_throughput": st.floats(min_value=1, max_value=1e5)},
    optional={"match": st.sampled_from(["exact", "best_at_or_above", "x"]), "label": values}), max_size=3)},
    optional={"id": values, "description": values, "method": values}) | values


def _write(path, value):
    with open(path, "w", encoding="utf-8", errors="surrogatepass") as handle:
        handle.write(value if isinstance(value, str) else json.dumps(value))


@settings(max_examples=max(40, EXAMPLES // 2))
@given(st.lists(good_jsonl | jsonl, min_size=1, max_size=2), st.none() | run_meta, st.none() | manifest, st.none() | jsonl,
       st.none() | run_meta, baseline)
def test_build_and_render_a_report(levels, meta, release, previous, previous_meta, base):
    where = tempfile.mkdtemp(prefix="fuzz-bench-")
    try:
        run_dir = os.path.join(where, "host-a", RUN_ID)
        os.makedirs(run_dir)
        for index, text in enumerate(levels):
            _write(os.path.join(run_dir, "c%d.jsonl" % (8 * (index + 1))), text)
        if meta is not None:
            _write(os.path.join(run_dir, "run.json"), meta)
        if release is not None:
            _write(os.path.join(run_dir, "manifest.json"), release)
        if previous is not None:
            os.makedirs(os.path.join(where, "host-a", PREVIOUS))
            _write(os.path.join(where, "host-a", PREVIOUS, "c8.jsonl"), previous)
            if previous_meta is not None:
                _write(os.path.join(where, "host-a", PREVIOUS, "run.json"), previous_meta)
        try:
            report = _bench_report.build_report(where, RUN_ID, ["host-a", "host-b"], baseline=base)
        except _bench_report.BenchReportError as exc:
            assert str(exc)
            return
        text = _bench_report.render_markdown(report)
        assert text.startswith("# SGLang serving benchmark, run %s" % RUN_ID)
        text.encode("utf-8")
        json.dumps(report)
    finally:
        shutil.rmtree(where)


@given(run_meta)
def test_run_json_of_any_shape(meta):
    """The current run's results are fine; only run.json varies (its levels, failures, status, lengths)."""
    where = tempfile.mkdtemp(prefix="fuzz-bench-")
    try:
        run_dir = os.path.join(where, "host-a", RUN_ID)
        os.makedirs(run_dir)
        record = _good({"max_concurrency": 8})
        _write(os.path.join(run_dir, "c8.jsonl"), json.dumps(record))
        _write(os.path.join(run_dir, "run.json"), meta)
        try:
            report = _bench_report.build_report(where, RUN_ID, ["host-a"])
        except _bench_report.BenchReportError as exc:
            assert "run.json" in str(exc)
            return
        _bench_report.render_markdown(report).encode("utf-8")
    finally:
        shutil.rmtree(where)


@given(manifest)
def test_summarize_manifest(value):
    summary = _bench_report.summarize_manifest(value)
    assert set(summary["versions"]) >= set(_bench_report._VERSION_KEYS)  # pylint: disable=protected-access
