# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang contributors
# Apache-2.0 (see LICENSE)
"""Small file helpers shared by the modules: read-only fact files, and the one rule for bytes that are not UTF-8.

The rule (a file is either a log or a source/record):

* A **log** (journal, dmesg, build logs, nvidia-smi output, server logs) and the text files facts are read from
  (procfs, sysfs, headers, os-release) are decoded with replacement (``U+FFFD``) and reading goes on: one bad byte
  from a driver or a model's output must not cost the verdict. :func:`read_text`, :func:`read_log`,
  :data:`LOG_ERRORS`.
* A **source or record** (sources to patch, CMake files, JSON records, manifests, stamps) is refused, naming the
  file and the byte offset (:class:`NotUtf8`, :func:`decode_source`, :func:`read_source`, :func:`load_json`,
  :func:`parse_json`): reading it with replacement would patch, hash or trust text that is not the file's.
"""

from __future__ import annotations

import json

# ``errors=`` for decoding a log (open(), bytes.decode, subprocess, AnsibleModule.run_command)
LOG_ERRORS = "replace"


class NotUtf8(ValueError):
    """A source or record file that is not UTF-8. ``path``, ``offset`` (0-based byte), ``line``, ``column`` (1-based)
    and ``byte`` (the first bad byte, int) say where."""

    def __init__(self, path, exc, raw, what="file"):
        self.path, self.offset = path, exc.start
        self.byte = raw[exc.start] if exc.start < len(raw) else None
        self.line = raw.count(b"\n", 0, exc.start) + 1
        self.column = exc.start - (raw.rfind(b"\n", 0, exc.start) + 1) + 1
        super(NotUtf8, self).__init__(
            "%s is not UTF-8: byte %s at offset %d (line %d, column %d) cannot be decoded (%s); a %s is never read "
            "with replacement: restore it (fetch, unpack or generate it again)" % (
                path, "0x%02x" % self.byte if self.byte is not None else "?", self.offset, self.line, self.column,
                exc.reason, what))


def decode_source(raw, path, what="source or record file"):
    """``raw`` (bytes) as UTF-8 text; :raises NotUtf8: naming ``path`` and the offset of the first bad byte."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise NotUtf8(path, exc, raw, what) from None


def read_source(path, what="source or record file"):
    """The UTF-8 text of the file at ``path`` (OSError as open() raises it); :raises NotUtf8: not UTF-8."""
    with open(path, "rb") as handle:
        return decode_source(handle.read(), path, what)


def load_json(path, what="JSON record"):
    """The JSON value of the file at ``path``: :raises NotUtf8: not UTF-8 (file and offset); ValueError: not JSON;
    OSError: unreadable."""
    return json.loads(read_source(path, what))


def parse_json(raw, path, what, error, describe, object_pairs_hook=None):
    """The JSON value of ``raw`` (bytes read from ``path``), every way it can be unreadable raised as ``error``
    (the caller's operator-facing exception class): not UTF-8 (:class:`NotUtf8`'s message), nested too deeply, or
    not JSON, the last two as ``describe(reason)``. An ``error`` raised by ``object_pairs_hook`` passes through."""
    try:
        return json.loads(decode_source(raw, path, what), object_pairs_hook=object_pairs_hook)
    except error:
        raise
    except NotUtf8 as exc:
        raise error(str(exc)) from None
    except RecursionError:
        raise error(describe("nested too deeply")) from None
    except ValueError as exc:
        raise error(describe(str(exc))) from None


def read_log(path):
    """The text of a log file, undecodable bytes replaced (OSError as open() raises it)."""
    with open(path, "rb") as handle:
        return handle.read().decode("utf-8", LOG_ERRORS)


def read_text(path):
    """The text of a fact file at ``path`` (procfs, sysfs, headers), undecodable bytes replaced, or None when it is
    missing or unreadable."""
    try:
        with open(path, encoding="utf-8", errors=LOG_ERRORS) as handle:
            return handle.read()
    except (IOError, OSError):
        return None
