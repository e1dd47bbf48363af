# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang contributors
# Apache-2.0 (see LICENSE)
"""safetensors headers, checked as the reference loader checks them (pure Python, stdlib only).

Layout (https://github.com/huggingface/safetensors, "Format"): 8-byte little-endian unsigned header length N, N bytes
of UTF-8 JSON ``{name: {"dtype": str, "shape": [int], "data_offsets": [begin, end]}, "__metadata__": {str: str}}``,
then the data buffer; offsets are relative to the buffer.

Refused as the reference refuses it (safetensors 0.8.0, ``SafeTensors::read_metadata`` and ``Metadata::validate``;
tests/unit/fuzz/test_fuzz_checkpoint.py runs both on the same files): a file shorter than 8 bytes; N above
100,000,000; N beyond the file; a header that is not UTF-8, not JSON (also ``NaN``/``Infinity``, numbers out of the
double range, lone surrogate escapes, nesting deeper than 127) or not a JSON object; ``__metadata__`` that is not
null or a str -> str object; a tensor without ``dtype``/``shape``/``data_offsets``, an unknown dtype, a shape or
offset that is not a non-negative integer below 2**64 (``4.0`` and ``-0`` are not), ``data_offsets`` not of length 2;
an element count or bit count that overflows 64 bits; a sub-byte dtype (F4, F6_*) whose bits are not whole bytes;
byte length != elements x dtype size; tensors that, sorted by their offsets, do not tile the buffer from 0 exactly:
begin > end, an overlap, a gap, a buffer that is shorter (truncated) or longer (trailing bytes) than the last end.

Stricter than the reference, on purpose: a key that appears twice in one JSON object anywhere in the header (the
reference keeps the last silently, another reader may keep the first), and a tensor entry that is a JSON array
(serde accepts a struct written as a sequence; no writer produces one).
"""

from __future__ import annotations

import json
import math
import struct

MAX_HEADER_BYTES = 100000000
# serde_json's recursion limit: 128 levels of arrays/objects are refused, 127 pass
MAX_DEPTH = 127
U64 = 2 ** 64
METADATA_KEY = "__metadata__"
# bits per element (the reference's Dtype::bitsize); the order is the reference's list, kept for messages
DTYPE_BITS = {
    "BOOL": 8, "F4": 4, "F6_E2M3": 6, "F6_E3M2": 6, "U8": 8, "I8": 8, "F8_E5M2": 8, "F8_E4M3": 8, "F8_E8M0": 8,
    "F8_E4M3FNUZ": 8, "F8_E5M2FNUZ": 8, "I16": 16, "U16": 16, "F16": 16, "BF16": 16, "I32": 32, "U32": 32,
    "F32": 32, "C64": 64, "F64": 64, "I64": 64, "U64": 64,
}


class SafetensorsError(ValueError):
    """A header the reference loader would refuse; ``str()`` is the reason, ``tensor`` the tensor it concerns."""

    def __init__(self, reason, tensor=None):
        super(SafetensorsError, self).__init__(reason)
        self.tensor = tensor


class _Duplicate(Exception):
    pass


def _pairs(pairs):
    result = {}
    for key, value in pairs:
        if key in result:
            raise _Duplicate(key)
        result[key] = value
    return result


def _no_constant(name):
    raise ValueError("%s is not JSON" % name)


def _int(text):
    # serde reads "-0" as the float -0.0, which is not an unsigned integer
    return -0.0 if text == "-0" else int(text)


def _check_values(header):
    """Depth, lone surrogates and non-finite numbers anywhere in the decoded JSON (iterative: no recursion)."""
    stack = [(header, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, (dict, list)):
            if depth > MAX_DEPTH:
                raise SafetensorsError("header nests arrays/objects deeper than %d levels" % MAX_DEPTH)
            items = list(value.items()) if isinstance(value, dict) else [(None, v) for v in value]
            for key, item in items:
                if key is not None:
                    _check_text(key)
                stack.append((item, depth + 1))
        elif isinstance(value, str):
            _check_text(value)
        elif isinstance(value, float) and not math.isfinite(value):
            raise SafetensorsError("header holds a number out of range")


def _check_text(text):
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise SafetensorsError("header holds a lone surrogate escape (\\ud800-\\udfff) in %r" % text) from None


def parse_header(raw):
    """Decode the N header bytes.

    :param raw: bytes of the JSON header.
    :returns: dict ``{"tensors": {name: {"dtype": str, "shape": [int], "begin": int, "end": int}},
        "metadata": {str: str} or None}``.
    :raises SafetensorsError: for anything the reference refuses in the header itself (the layout against the
        buffer is :func:`check_layout`).
    """
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SafetensorsError("header is not UTF-8: byte 0x%02x at offset %d of the file (byte %d of the header) "
                               "cannot be decoded (the file is damaged: fetch it again)" % (
                                   raw[exc.start], 8 + exc.start, exc.start)) from None
    try:
        header = json.loads(text, object_pairs_hook=_pairs, parse_constant=_no_constant, parse_int=_int)
    except _Duplicate as exc:
        raise SafetensorsError("header is ambiguous: key %r appears twice in one object" % exc.args[0]) from None
    except RecursionError:
        raise SafetensorsError("header nests arrays/objects deeper than %d levels" % MAX_DEPTH) from None
    except ValueError as exc:
        raise SafetensorsError("header is not JSON (%s)" % exc) from None
    if not isinstance(header, dict):
        raise SafetensorsError("header is not a JSON object but %s" % _kind(header))
    _check_values(header)
    metadata = header.get(METADATA_KEY)
    if metadata is not None:
        if not isinstance(metadata, dict):
            raise SafetensorsError("%s must be an object of strings, got %s" % (METADATA_KEY, _kind(metadata)))
        for key, value in metadata.items():
            if not isinstance(value, str):
                raise SafetensorsError("%s[%r] must be a string, got %s" % (METADATA_KEY, key, _kind(value)))
    tensors = {}
    for name, info in header.items():
        if name == METADATA_KEY:
            continue
        tensors[name] = _tensor(name, info)
    return {"tensors": tensors, "metadata": metadata}


def _kind(value):
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    return {dict: "an object", list: "an array", str: "a string", int: "an integer", float: "a number"}.get(
        type(value), type(value).__name__)


def _u64(value):
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < U64


def _tensor(name, info):
    if not isinstance(info, dict):
        raise SafetensorsError("tensor %r is not a JSON object but %s" % (name, _kind(info)), name)
    missing = [key for key in ("dtype", "shape", "data_offsets") if key not in info]
    if missing:
        raise SafetensorsError("tensor %r has no %s" % (name, "/".join(missing)), name)
    dtype, shape, offsets = info["dtype"], info["shape"], info["data_offsets"]
    if not isinstance(dtype, str) or dtype not in DTYPE_BITS:
        raise SafetensorsError("tensor %r: dtype %r is not a safetensors dtype (%s)" % (
            name, dtype, ", ".join(DTYPE_BITS)), name)
    if not isinstance(shape, list) or not all(_u64(dim) for dim in shape):
        raise SafetensorsError("tensor %r: shape %r is not a list of non-negative integers" % (name, shape), name)
    if not isinstance(offsets, list) or len(offsets) != 2 or not all(_u64(x) for x in offsets):
        raise SafetensorsError("tensor %r: data_offsets %r is not [begin, end] of non-negative integers" % (
            name, offsets), name)
    elements = 1
    for dim in shape:
        elements *= dim
        if elements >= U64:
            raise SafetensorsError("tensor %r: shape %r overflows 64 bits" % (name, shape), name)
    bits = elements * DTYPE_BITS[dtype]
    if bits >= U64:
        raise SafetensorsError("tensor %r: %s %r overflows 64 bits" % (name, dtype, shape), name)
    if bits % 8:
        raise SafetensorsError("tensor %r: %s %r is %d bits, not whole bytes" % (name, dtype, shape, bits), name)
    begin, end = offsets
    if begin > end:
        raise SafetensorsError("tensor %r: data_offsets begin %d > end %d" % (name, begin, end), name)
    if end - begin != bits // 8:
        raise SafetensorsError("tensor %r: %s %r needs %d bytes, offsets give %d" % (
            name, dtype, shape, bits // 8, end - begin), name)
    return {"dtype": dtype, "shape": shape, "begin": begin, "end": end}


def check_layout(tensors, buffer_size):
    """The tensors, sorted by (begin, end), must tile ``[0, buffer_size)`` exactly.

    :param tensors: :func:`parse_header`'s ``tensors``. :param buffer_size: bytes after the header.
    :raises SafetensorsError: naming the tensor that overlaps, leaves a gap or runs past the buffer, or the
        trailing bytes.
    """
    start, before = 0, None
    for name, info in sorted(tensors.items(), key=lambda item: (item[1]["begin"], item[1]["end"], item[0])):
        if info["begin"] < start:
            raise SafetensorsError("invalid offset for tensor %r: it begins at byte %d, inside %r (which ends at %d): "
                                   "the tensors overlap" % (name, info["begin"], before, start), name)
        if info["begin"] > start:
            raise SafetensorsError("invalid offset for tensor %r: it begins at byte %d but the tensors before it end "
                                   "at %d: bytes %d-%d belong to no tensor" % (
                                       name, info["begin"], start, start, info["begin"]), name)
        if info["end"] > buffer_size:
            raise SafetensorsError("truncated: tensor %r ends at byte %d of the data, the file holds %d" % (
                name, info["end"], buffer_size), name)
        start, before = info["end"], name
    if start != buffer_size:
        raise SafetensorsError("trailing bytes: the data buffer is %d bytes but the tensors end at %d" % (
            buffer_size, start))


def read(handle, size):
    """Read and check the header of an open safetensors file.

    :param handle: a binary file object at offset 0. :param size: the file's size in bytes (``fstat`` of the same
        file, so size and contents never come from two different files).
    :returns: :func:`parse_header`'s dict plus ``"header_bytes"`` (N) and ``"buffer_bytes"``.
    :raises SafetensorsError: for every refusal listed in the module docstring.
    """
    if size < 8:
        raise SafetensorsError("shorter than the 8-byte header length (%d bytes)" % size)
    prefix = handle.read(8)
    if len(prefix) != 8:
        raise SafetensorsError("shorter than the 8-byte header length (%d bytes read)" % len(prefix))
    (length,) = struct.unpack("<Q", prefix)
    if length > MAX_HEADER_BYTES:
        raise SafetensorsError("header length %d is implausible: above the reference limit of %d bytes (corrupt file)" % (
            length, MAX_HEADER_BYTES))
    if 8 + length > size:
        raise SafetensorsError("truncated: header needs %d bytes, file has %d" % (8 + length, size))
    raw = handle.read(length)
    if len(raw) != length:
        raise SafetensorsError("truncated: header needs %d bytes, %d could be read" % (8 + length, 8 + len(raw)))
    header = parse_header(raw)
    buffer_size = size - 8 - length
    check_layout(header["tensors"], buffer_size)
    header.update(header_bytes=length, buffer_bytes=buffer_size)
    return header


def check_bytes(data):
    """:func:`read` on an in-memory file (the fuzz tests and small callers); returns the same dict."""
    import io  # pylint: disable=import-outside-toplevel
    return read(io.BytesIO(data), len(data))
