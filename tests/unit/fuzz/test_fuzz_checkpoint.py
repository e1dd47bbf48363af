"""Fuzz the checkpoint parsers: safetensors headers (against the reference library on the same bytes), index files,
the checkpoint facts of a whole directory (config.json, hf_quant_config.json, tokenizer_config.json, the index).

A parser returns its documented result or raises its documented error (``SafetensorsError``, ``ModelError``,
``CheckpointError``, ``QuantLayoutError``) with a message; any other exception is a crash and fails the test."""

import io
import json
import os
import shutil
import struct
import tempfile

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given, settings, strategies as st  # noqa: E402  pylint: disable=wrong-import-position

from ansible_collections.blackwell.sglang.plugins.module_utils import _checkpoint  # noqa: E402
from ansible_collections.blackwell.sglang.plugins.module_utils import _model  # noqa: E402
from ansible_collections.blackwell.sglang.plugins.module_utils import _safetensors  # noqa: E402

EXAMPLES = settings().max_examples
DTYPES = sorted(_safetensors.DTYPE_BITS) + ["Q9", "u8", "", "F8"]

# JSON values of every shape, kept small
json_scalars = st.none() | st.booleans() | st.integers(min_value=-2 ** 70, max_value=2 ** 70) | \
    st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=12)
json_values = st.recursive(json_scalars, lambda inner: st.lists(inner, max_size=4) |
                           st.dictionaries(st.text(max_size=8), inner, max_size=4), max_leaves=12)


@st.composite
def tensor_infos(draw):
    """A tensor entry that is mostly well-formed, with one or more fields bent."""
    dtype = draw(st.sampled_from(DTYPES))
    shape = draw(st.lists(st.integers(min_value=0, max_value=6), max_size=3))
    begin = draw(st.integers(min_value=0, max_value=64))
    end = begin + draw(st.integers(min_value=-4, max_value=64))
    info = {"dtype": dtype, "shape": shape, "data_offsets": [begin, end]}
    bend = draw(st.sampled_from(["none", "none", "none", "drop", "replace", "extra"]))
    key = draw(st.sampled_from(["dtype", "shape", "data_offsets"]))
    if bend == "drop":
        del info[key]
    elif bend == "replace":
        info[key] = draw(json_values)
    elif bend == "extra":
        info[draw(st.text(max_size=6))] = draw(json_values)
    return info


@st.composite
def safetensors_files(draw):
    """Bytes of a safetensors-like file: a header of tensors that may or may not tile the buffer, a buffer that may
    be short or long, and now and then a raw header or a wrong length."""
    kind = draw(st.sampled_from(["tiled", "tiled", "random", "raw"]))
    header = {}
    if kind == "tiled":            # a valid layout, then perhaps one change
        offset = 0
        for index in range(draw(st.integers(min_value=0, max_value=4))):
            dtype = draw(st.sampled_from(["U8", "F16", "F32", "BF16", "F4", "I64"]))
            shape = draw(st.lists(st.integers(min_value=0, max_value=5), max_size=2))
            elements = 1
            for dim in shape:
                elements *= dim
            size = elements * _safetensors.DTYPE_BITS[dtype] // 8
            header["t%d" % index] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + size]}
            offset += size
        buffer = offset + draw(st.sampled_from([0, 0, 0, -1, 1]))
    else:
        for name in draw(st.lists(st.text(max_size=6), max_size=4)):
            header[name] = draw(tensor_infos())
        buffer = draw(st.integers(min_value=0, max_value=80))
    if draw(st.booleans()):
        header["__metadata__"] = draw(st.none() | st.dictionaries(st.text(max_size=5), st.text(max_size=5), max_size=3)
                                      | json_values)
    if kind == "raw":
        raw = draw(st.binary(max_size=64) | st.text(max_size=64).map(lambda t: t.encode("utf-8", "surrogatepass")))
    else:
        raw = json.dumps(header, allow_nan=False).encode()
        if draw(st.integers(min_value=0, max_value=9)) == 0:
            raw = raw.replace(b"[", b"[" * 130, 1)                         # too deep, or not JSON any more
    length = len(raw) if draw(st.integers(min_value=0, max_value=9)) else draw(st.integers(0, 2 ** 64 - 1))
    data = struct.pack("<Q", length) + raw + b"\0" * max(buffer, 0)
    if draw(st.integers(min_value=0, max_value=19)) == 0:
        data = data[:draw(st.integers(min_value=0, max_value=len(data)))]
    return data


def ours(data):
    try:
        _safetensors.check_bytes(data)
    except _safetensors.SafetensorsError as exc:
        assert str(exc)
        return False
    return True


def reference(data):
    safetensors = pytest.importorskip("safetensors")
    try:
        safetensors.deserialize(bytes(data))
    except Exception:  # pylint: disable=broad-exception-caught  # the reference's refusal, whatever its type
        return False
    return True


def stricter_here(data):
    """The header holds what this collection refuses on purpose beyond the reference: a key twice in one object, or
    a tensor entry written as a JSON array (``_safetensors`` docstring)."""
    if len(data) < 8:
        return False
    (length,) = struct.unpack("<Q", data[:8])
    twice = []

    def pairs(items):
        keys = [key for key, _value in items]
        twice.extend(key for key in keys if keys.count(key) > 1)
        return dict(items)
    try:
        header = json.loads(data[8:8 + length].decode("utf-8"), object_pairs_hook=pairs)
    except (ValueError, RecursionError):
        return False
    return bool(twice) or (isinstance(header, dict) and any(
        isinstance(value, list) for key, value in header.items() if key != "__metadata__"))


def same_verdict(data):
    accepted, theirs = ours(data), reference(data)
    if accepted:
        assert theirs, "accepted a file the reference refuses: %r" % data[:200]
    elif theirs:
        assert stricter_here(data), "refused a file the reference accepts: %r" % data[:200]


@given(safetensors_files())
def test_safetensors_header_never_crashes_and_agrees_with_the_reference(data):
    same_verdict(data)


@given(st.binary(max_size=200))
def test_safetensors_arbitrary_bytes(data):
    same_verdict(data)


# --- index files ---------------------------------------------------------------------------------------------------

@st.composite
def index_texts(draw):
    if draw(st.booleans()):
        weight_map = draw(st.dictionaries(st.text(max_size=6), st.sampled_from(
            ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors", "../x.safetensors", "/abs",
             "", "a//b.safetensors"]) | json_values, max_size=5))
        doc = {"weight_map": weight_map} if draw(st.booleans()) else {"weight_map": weight_map,
                                                                      "metadata": draw(json_values)}
        return json.dumps(doc).encode()
    return draw(st.binary(max_size=80) | json_values.map(lambda v: json.dumps(v).encode()))


@given(index_texts())
def test_read_index(raw):
    try:
        weight_map = _model.read_index(io.BytesIO(raw), "model.safetensors.index.json")
    except _model.ModelError as exc:
        assert "model.safetensors.index.json" in str(exc)
        return
    assert isinstance(weight_map, dict) and all(isinstance(v, str) for v in weight_map.values())


@given(st.dictionaries(st.text(max_size=4), st.sampled_from(["model-00001-of-00002.safetensors",
                                                            "model-00002-of-00002.safetensors", "x.safetensors"]),
                       max_size=6),
       st.dictionaries(st.sampled_from(["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors",
                                        "model-00003-of-00002.safetensors", "consolidated.safetensors"]),
                       st.lists(st.text(max_size=4), max_size=5), max_size=4))
def test_index_problems(weight_map, shards):
    headers = {name: {"tensors": dict.fromkeys(tensors, {})} for name, tensors in shards.items()}
    files = set(shards) | {"model.safetensors.index.json"}
    problems = _model.index_problems("/m", files, headers, {"model.safetensors.index.json": weight_map})
    assert all(set(p) == {"file", "reason"} and p["reason"] for p in problems)


# --- checkpoint facts of a whole directory --------------------------------------------------------------------------

config_like = st.fixed_dictionaries({}, optional={
    "model_type": json_values, "architectures": json_values, "torch_dtype": json_values,
    "max_position_embeddings": st.integers(-5, 10 ** 7) | json_values,
    "rope_scaling": st.fixed_dictionaries({}, optional={
        "rope_type": st.sampled_from(["yarn", "linear", "x"]) | json_values,
        "factor": st.sampled_from([4.0, 1e308, -1.0, 0.5, 10 ** 400]) | json_values,
        "original_max_position_embeddings": st.sampled_from([4096, 1e308, -1, 10 ** 400]) | json_values}) | json_values,
    "quantization_config": st.fixed_dictionaries({}, optional={
        "quant_method": st.sampled_from(["modelopt", "compressed-tensors", "fp8", "awq", "x"]) | json_values,
        "quant_algo": st.sampled_from(["FP8", "NVFP4", "MIXED_PRECISION"]) | json_values,
        "kv_cache_quant_algo": json_values, "kv_cache_scheme": json_values, "config_groups": json_values,
        "fmt": json_values}) | json_values,
    "text_config": json_values,
})
hf_quant_like = st.fixed_dictionaries({}, optional={
    "producer": json_values,
    "quantization": st.fixed_dictionaries({}, optional={
        "quant_algo": st.sampled_from(["FP8", "NVFP4", "MIXED_PRECISION", "W4A16_NVFP4"]) | json_values,
        "kv_cache_quant_algo": json_values, "moe_quant_algo": json_values, "quantized_layers": json_values,
        "kv_cache_scheme": json_values}) | json_values,
}) | json_values


def _as_bytes(value):
    return value if isinstance(value, bytes) else json.dumps(value).encode()


@settings(max_examples=max(30, EXAMPLES // 2))
@given(config=config_like | json_values, hf_quant=st.none() | hf_quant_like, tokenizer=st.none() | json_values,
       index=st.none() | index_texts(), shard=st.none() | safetensors_files())
def test_checkpoint_facts_of_a_directory(config, hf_quant, tokenizer, index, shard):
    where = tempfile.mkdtemp(prefix="fuzz-ckpt-")
    try:
        files = {"config.json": config, "hf_quant_config.json": hf_quant, "tokenizer_config.json": tokenizer,
                 "model.safetensors.index.json": index, "model-00001-of-00002.safetensors": shard}
        for name, value in files.items():
            if value is not None:
                with open(os.path.join(where, name), "wb") as handle:
                    handle.write(_as_bytes(value))
        try:
            facts = _checkpoint.checkpoint_facts(where)
        except _checkpoint.CheckpointError as exc:
            assert str(exc)
            return
        assert facts["model_path"] == where and isinstance(facts["num_shards"], int)
        decision = _checkpoint.decide_kv_cache_dtype(facts, None, False, 12)
        assert decision["dtype"] == "bf16"
    finally:
        shutil.rmtree(where)


@given(config_like | json_values, st.none() | hf_quant_like)
def test_canonical_quant(config, hf_quant):
    try:
        record = _checkpoint.canonical_quant(config, hf_quant)
    except _checkpoint.QuantLayoutError as exc:
        assert str(exc).startswith("quant_layout_unknown")
        return
    assert record is None or isinstance(record["methods"], list)


@given(config_like, st.none() | json_values, st.none() | st.integers(-10, 10 ** 7) | json_values)
def test_context_limits_and_check(config, tokenizer, requested):
    limits = _checkpoint.context_limits(config, tokenizer if isinstance(tokenizer, dict) else None)
    assert set(limits) == {"native", "limit", "rope", "tokenizer_max"}
    if isinstance(requested, int) and not isinstance(requested, bool):
        verdict = _checkpoint.check_context_length(limits, requested)
        assert verdict["status"] in ("pass", "warn", "fail")
