# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang contributors
# Apache-2.0 (see LICENSE)
"""The release seal: one check that stands for every build stage of a staged release.

A release directory is immutable once its manifest is written. After a converge in which every build stage ran and
the probe gate passed, the seal (``<release>/seal.json``) records what those stages left behind:

* ``distributions``: every distribution of the release venv, ``name -> {"version", "record"}`` (the sha256 of its
  ``RECORD``, the file list with per-file hashes pip writes): an up- or downgrade, a reinstall, an added or removed
  distribution changes it;
* ``files``: ``path -> {"sha256", "stage"}``: the release's own files (``release-key.json``, the probe's result, the
  venv's install stamps) and the host files the stages' results depend on (``nvcc``, ``ptxas``, the CUDA environment
  file), each with the stage that writes it;
* ``inputs``: ``name -> sha256`` of the inventory's build settings, hashed on the controller: the values never reach
  the host;
* ``facts``: the facts the build stages publish for the later stages (the CUDA home, the SGLang commit, the kernel
  build key, the probe's result ...), handed back while the seal holds.

A re-run reads the same and either finds the seal holding (the build stages are skipped and their facts restored) or
names every change with the stage it belongs to (the stages then run, and each repairs its own part). Hand edits
inside a distribution's files that leave its ``RECORD`` alone are not seen here: ``sglang_converge_verify: deep``
and ``playbooks/audit.yml`` are the full checks (docs/release.md, "The release seal").

Shapes: ``seal = {"kind": "blackwell.sglang/release-seal", "format": 1, "release": id, "distributions": {...},
"files": {...}, "inputs": {...}, "facts": {...}}``; a change is ``{"what": "seal" | "release" | "distribution" |
"file" | "setting", "name": str, "was": any, "now": any, "stage": str}`` with ``stage`` one of :data:`STAGES` or
``"all"`` (a setting, or no usable seal).
"""

from __future__ import annotations

import json
import os
import re

from ansible_collections.blackwell.sglang.plugins.module_utils._venv_state import file_digest, write_stamp

KIND = "blackwell.sglang/release-seal"
SEAL_FORMAT = 1
SEAL_FILE = "seal.json"
STAMPS_DIR = ".blackwell-sglang-stamps"

# The build stages a seal stands for, in converge order (docs/architecture.md "Data flow").
STAGES = ("toolchain", "torch", "flashinfer", "sglang", "kernel", "probe")

# Which stage installs a distribution: torch's own companions and the CUDA runtime wheels torch pulls in; FlashInfer's
# packages; the kernel wheel (both names it has had). Everything else is SGLang or one of its dependencies.
_DISTRIBUTION_STAGES = (
    (re.compile(r"^(torch|torchvision|torchaudio|triton|pytorch-triton|nvidia-.+)$"), "torch"),
    (re.compile(r"^flashinfer(-.+)?$"), "flashinfer"),
    (re.compile(r"^(sgl-kernel|sglang-kernel)$"), "kernel"),
)
# An install stamp is named after the role that wrote it (<role>-<what>.json).
_STAMP_STAGES = {"cuda_toolchain": "toolchain", "torch_nightly": "torch", "flashinfer": "flashinfer",
                 "sglang_source": "sglang", "sgl_kernel_sm120": "kernel", "fp4_probe": "probe"}


def distribution_stage(name):
    """The build stage that installs the distribution ``name`` (a PEP 503 normalised name)."""
    for pattern, stage in _DISTRIBUTION_STAGES:
        if pattern.match(name):
            return stage
    return "sglang"


def stamp_files(venv):
    """``{path: stage}`` of every install stamp in ``venv`` (none when the directory is missing)."""
    root = os.path.join(venv, STAMPS_DIR)
    try:
        names = sorted(n for n in os.listdir(root) if n.endswith(".json"))
    except OSError:
        return {}
    return dict((os.path.join(root, n), _STAMP_STAGES.get(n.split("-", 1)[0], "release")) for n in names)


def build(release, records, files, inputs, facts):
    """The seal for the live state.

    :param release: the release id. :param records: the venv reader's ``records`` (``{name: {"version", "record"}}``).
    :param files: ``{path: stage}``; each is hashed now (a missing file is recorded as missing: it must stay missing).
    :param inputs: ``{name: sha256 hex}``. :param facts: ``{name: any JSON value}``.
    """
    return {"kind": KIND, "format": SEAL_FORMAT, "release": release,
            "distributions": dict((name, {"version": item.get("version"), "record": item.get("record")})
                                  for name, item in sorted((records or {}).items())),
            "files": dict((path, {"sha256": file_digest(path), "stage": stage})
                          for path, stage in sorted((files or {}).items())),
            "inputs": dict(sorted((inputs or {}).items())), "facts": facts or {}}


def load(path):
    """The seal at ``path``, or None when it is missing, unreadable or not a seal of this format."""
    try:
        with open(path, encoding="utf-8") as handle:
            seal = json.load(handle)
    except (IOError, OSError, ValueError):
        return None
    ok = isinstance(seal, dict) and seal.get("kind") == KIND and seal.get("format") == SEAL_FORMAT
    return seal if ok else None


def write(path, seal):
    """Write ``seal`` atomically (0644); returns True when the file's content changed."""
    return write_stamp(path, seal)


def evaluate(seal, release, records, inputs):
    """Compare a loaded seal with the live host: ``(holds, changes)``; the recorded files are hashed again here.

    :param seal: :func:`load`'s result (None: no usable seal). :param records: the venv reader's ``records``.
    :param inputs: ``{name: sha256 hex}`` of the inventory's build settings now; None: not compared.
    """
    if seal is None:
        return False, [{"what": "seal", "name": SEAL_FILE, "was": None, "now": "absent or unreadable", "stage": "all"}]
    changes = []
    if seal.get("release") != release:
        changes.append({"what": "release", "name": "release", "was": seal.get("release"), "now": release, "stage": "all"})
    was, now = seal.get("distributions") or {}, records or {}
    for name in sorted(set(was) | set(now)):
        before, after = was.get(name), now.get(name)
        if before is not None and after is not None and before.get("record") == after.get("record") \
                and before.get("version") == after.get("version"):
            continue
        changes.append({"what": "distribution", "name": name, "was": (before or {}).get("version"),
                        "now": (after or {}).get("version"), "stage": distribution_stage(name)})
    for path, item in sorted((seal.get("files") or {}).items()):
        digest = file_digest(path)
        if digest != item.get("sha256"):
            changes.append({"what": "file", "name": path, "was": item.get("sha256"), "now": digest,
                            "stage": item.get("stage") or "all"})
    was, now = seal.get("inputs") or {}, inputs if inputs is not None else seal.get("inputs") or {}
    for name in sorted(set(was) | set(now)):
        if was.get(name) != now.get(name):
            changes.append({"what": "setting", "name": name, "was": name in was, "now": name in now, "stage": "all"})
    return not changes, changes


def describe(change):
    """One line for a change, naming what changed and the stage that repairs it."""
    what, name, was, now = change["what"], change["name"], change["was"], change["now"]
    stage = "every build stage" if change["stage"] == "all" else "stage " + change["stage"]
    if what == "seal":
        text = "no seal (%s %s)" % (name, now)
    elif what == "release":
        text = "the seal is release %s's, not %s's" % (was, now)
    elif what == "distribution":
        if was is None:
            text = "%s %s was installed" % (name, now)
        elif now is None:
            text = "%s %s was removed" % (name, was)
        elif was != now:
            text = "%s %s -> %s" % (name, was, now)
        else:
            text = "%s %s was reinstalled (its RECORD changed)" % (name, now)
    elif what == "file":
        text = "%s %s" % (name, "is missing" if now is None else ("appeared" if was is None else "changed"))
    else:
        text = "setting %s %s" % (name, "changed" if was and now else ("was set" if now else "was unset"))
    return "%s (%s)" % (text, stage)


def stages(changes):
    """The stages the changes name, in converge order (all of them for a change of stage ``all``)."""
    named = set(c["stage"] for c in changes)
    return list(STAGES) if "all" in named else [s for s in STAGES if s in named]
