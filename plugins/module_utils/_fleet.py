# -*- coding: utf-8 -*-
# Apache-2.0 (see LICENSE)
"""Fleet drift: compare release manifests across hosts and against what each host runs now.

A manifest is the JSON that ``sglang_release`` writes to ``<release dir>/manifest.json`` (schema 1): release id and
key, SGLang repo/commit/version, torch build, installed distributions, wheel sha256s, unit sha256 and the FP4 probe's
recommendation. Two kinds of drift are reported:

- *fleet drift*: a host whose value for a compared field differs from the value most hosts in the same scope have
  (the majority is the reference; a tie is broken by the sorted value so the report is deterministic);
- *host drift*: a host whose live state (distributions, torch, unit file hash read now) differs from its own manifest,
  e.g. somebody ran ``pip install`` in the release venv or edited the unit by hand;
- *pin drift*: a host whose recorded model revision is not the commit its inventory pins (``sglang_model_revision``).

It also reads one manifest for a rollback (:func:`read_manifest`): the model a release served (path or Hub id, its
revision, the digest of its verification manifest, the service environment it ran with), so that the release
returned to is served with its own model and not with the one configured now.

Pure Python; no Ansible imports, so the same code runs in the ``manifest_drift`` filter and in unit tests.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections import Counter

# Fields compared across hosts: (label, path into the manifest).
FLEET_FIELDS = (
    ("release id", ("release", "id")),
    ("sglang commit", ("sglang", "commit")),
    ("sglang version", ("sglang", "version")),
    ("torch", ("torch", "version")),
    ("torch cuda", ("torch", "cuda")),
    ("python", ("python",)),
    ("unit sha256", ("unit", "fleet_sha256")),      # per-node flags masked (sglang_release tasks_from: manifest)
    ("fp4 gemm backend", ("probe", "recommended", "fp4_gemm_backend")),
    ("moe runner backend", ("probe", "recommended", "moe_runner_backend")),
    # the checkpoint sglang_model verified (docs/model.md): same commit, same files (sha256 of the manifest)
    ("model revision", ("model", "revision")),
    ("model manifest digest", ("model", "manifest_digest")),
)

_COMMIT = re.compile(r"^[0-9a-f]{40}$")

# Distributions whose versions must match across the fleet (others may differ without it being drift).
KEY_DISTRIBUTIONS = ("torch", "sglang", "sgl-kernel", "sglang-kernel", "flashinfer-python", "flashinfer-cubin",
                     "flashinfer-jit-cache", "triton", "pytorch-triton", "transformers")


_MODEL_PATH = re.compile(r'(?:^|\s)--model-path(?:=|[ \t]+)("(?:[^"\\]|\\.)*"|[^\s"]+)')


def unit_model_path(text):
    """The ``--model-path`` value of an ``ExecStart=`` in a unit's text, unquoted as systemd reads it.

    The service role writes each flag on its own continuation line, quoted by ``systemd_exec_args`` (double quotes
    with backslash escapes, ``%%`` and ``$$`` for a literal ``%`` and ``$``).

    :param text: str, the unit file's content (None -> None).
    :returns: str, or None when the text has no ``--model-path``.
    """
    if text is None:
        return None
    found = _MODEL_PATH.search(str(text))
    if not found:
        return None
    value = found.group(1)
    if value.startswith('"') and value.endswith('"') and len(value) >= 2:
        value = re.sub(r"\\(.)", r"\1", value[1:-1])
    return value.replace("%%", "%").replace("$$", "$")


def _model_of(manifest, where="manifest.json"):
    """The model section of a manifest as a rollback uses it (see :func:`read_manifest`)."""
    model = manifest.get("model") if isinstance(manifest, dict) else None
    model = model if isinstance(model, dict) else {}
    path = model.get("path")
    env = model.get("service_env")
    if not (isinstance(env, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in env.items())):
        env = None                                    # not recorded (manifests before it was), or not a str->str map

    def text(key):
        value = model.get(key)
        return value if isinstance(value, str) and value else None
    recorded = isinstance(path, str) and bool(path.strip())
    return {"recorded": recorded, "path": path if recorded else None, "revision": text("revision"),
            "manifest_digest": text("manifest_digest"), "source": text("source"),
            "repository": text("repository"), "service_env": env,
            "problem": None if recorded else ("%s records no model (no model.path: written before release manifests "
                                              "recorded the model)" % where)}


# The service settings a stack decides, as sglang_service records them (sglang_service_result.settings) and the
# manifest keeps them (service.settings): name -> type
SERVICE_SETTINGS = {"kv_cache_dtype": str, "fp4_gemm_backend": str, "moe_runner_backend": str, "render_fp4_flags": bool}


def _service_of(manifest):
    """The service settings a manifest recorded (``service.settings``), or None when it records none usable (written
    before manifests recorded them, by a play in which the service did not run, or not of the shape
    SERVICE_SETTINGS gives): ``{"kv_cache_dtype": str, "fp4_gemm_backend": str, "moe_runner_backend": str,
    "render_fp4_flags": bool}``, "" meaning the role decided (the checkpoint's guard, the probe)."""
    service = manifest.get("service") if isinstance(manifest, dict) else None
    settings = service.get("settings") if isinstance(service, dict) else None
    if not (isinstance(settings, dict) and all(isinstance(settings.get(key), kind)
                                               for key, kind in SERVICE_SETTINGS.items())):
        return None
    return dict((key, settings[key]) for key in SERVICE_SETTINGS)


def read_manifest(content, path="manifest.json", error=None, encoded=True):
    """Parse a release manifest as read from a host; never raises.

    :param content: the file's bytes as ``slurp`` returns them (base64 text; ``encoded=False``: the text itself), or
        None when the file could not be read.
    :param path: the file's path, for the messages.
    :param error: why the file could not be read (``slurp``'s message), used when ``content`` is None.
    :returns: ``{"manifest": dict ({} when unusable), "problem": str or None, "model": {"recorded": bool, "path",
        "revision", "manifest_digest", "source", "repository" (str or None), "service_env" (dict or None: not
        recorded), "problem" (str or None: why no model is recorded)}, "service": the recorded service settings
        (see :func:`_service_of`) or None}``. A problem names the file and, for bytes that are not UTF-8, the byte
        offset.
    """
    def out(manifest, problem):
        model = _model_of(manifest, path)
        if problem:
            model["problem"] = problem
        return {"manifest": manifest, "problem": problem, "model": model, "service": _service_of(manifest)}

    if content is None:
        return out({}, "%s cannot be read: %s" % (path, error or "no such file"))
    raw = content
    if encoded:
        try:
            raw = base64.b64decode(str(content), validate=True)
        except (binascii.Error, ValueError) as exc:
            return out({}, "%s: not base64 as slurp returns it (%s)" % (path, exc))
    if isinstance(raw, bytes):
        try:
            raw = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            return out({}, "%s is not UTF-8: byte 0x%02x at offset %d" % (path, raw[exc.start], exc.start))
    try:
        manifest = json.loads(raw)
    except ValueError as exc:
        return out({}, "%s is not valid JSON (%s)" % (path, exc))
    if not isinstance(manifest, dict):
        return out({}, "%s is not a JSON object but a %s" % (path, type(manifest).__name__))
    return out(manifest, None)


def _get(mapping, path):
    cur = mapping
    for part in path:
        if not isinstance(cur, dict) or part not in cur:
            return None
        cur = cur[part]
    return cur


def _canon(value):
    return json.dumps(value, sort_keys=True) if isinstance(value, (dict, list)) else value


def _wheel_hashes(manifest):
    """``{wheel file name: sha256}``: compared by name so different release paths don't count as drift."""
    out = {}
    for path, digest in (manifest.get("wheels") or {}).items():
        out[str(path).rsplit("/", 1)[-1]] = digest
    return out


def _fields(manifest):
    fields = {}
    for label, path in FLEET_FIELDS:
        fields[label] = _get(manifest, path)
    for label in ("model revision", "model manifest digest"):
        fields[label] = fields[label] or None       # "" (no model known) = no model section (older manifests)
    if fields["unit sha256"] is None:                # manifests written before fleet_sha256 existed
        fields["unit sha256"] = _get(manifest, ("unit", "sha256"))
    packages = manifest.get("packages") or {}
    for name in KEY_DISTRIBUTIONS:
        if name in packages:
            fields["package " + name] = packages[name]
    for name, digest in _wheel_hashes(manifest).items():
        fields["wheel " + name] = digest
    return fields


def fleet_drift(manifests):
    """Compare manifests across hosts.

    :param manifests: ``{host: manifest dict or None}``; None (or ``{}``) means the host has no manifest.
    :returns: list of ``{"host", "field", "value", "expected", "hosts_with_expected"}`` sorted by host and field,
        plus one ``{"host", "field": "manifest", "value": None, "expected": "present"}`` per host without a manifest.
    """
    missing = sorted(h for h, m in manifests.items() if not m)
    present = {h: _fields(m) for h, m in manifests.items() if m}
    drift = [{"host": h, "field": "manifest", "value": None, "expected": "present", "hosts_with_expected": len(present)}
             for h in missing]
    labels = sorted({label for f in present.values() for label in f})
    for label in labels:
        counts = Counter(_canon(f.get(label)) for f in present.values())
        if len(counts) <= 1:
            continue
        # majority value; ties broken by the string form so the reference is deterministic
        expected, votes = sorted(counts.items(), key=lambda kv: (-kv[1], str(kv[0])))[0]
        for host in sorted(present):
            value = _canon(present[host].get(label))
            if value != expected:
                drift.append({"host": host, "field": label, "value": value, "expected": expected,
                              "hosts_with_expected": votes})
    return sorted(drift, key=lambda d: (d["host"], d["field"]))


def host_drift(host, manifest, live):
    """Compare one host's manifest with what it runs now.

    :param manifest: the manifest dict (may be empty).
    :param live: ``{"distributions": {name: version}, "unit_sha256": str or None, "unit_text": str or None,
        "seal_breaks": [str]}`` read now; with ``unit_text`` the unit's ``--model-path`` is compared with the manifest's
        ``model.path`` (field ``model path``: the service runs another model than the release recorded, e.g. a
        rollback that rendered the model configured now); each of ``seal_breaks`` (what the live release's broken
        seal names, module sglang_release_seal) is one ``seal`` entry.
    :returns: list of ``{"host", "field", "value" (live), "expected" (manifest)}``.
    """
    if not manifest:
        return [{"host": host, "field": "manifest", "value": None, "expected": "present"}]
    out = []
    recorded = manifest.get("packages") or {}
    now = (live or {}).get("distributions") or {}
    for name in sorted(set(recorded) | set(now)):
        if recorded.get(name) != now.get(name):
            out.append({"host": host, "field": "package " + name, "value": now.get(name), "expected": recorded.get(name)})
    unit_now = (live or {}).get("unit_sha256")
    unit_rec = _get(manifest, ("unit", "sha256"))
    if unit_now != unit_rec:
        out.append({"host": host, "field": "unit sha256", "value": unit_now, "expected": unit_rec})
    model = _model_of(manifest)
    unit_text = (live or {}).get("unit_text")
    if model["recorded"] and unit_text is not None:
        serving = unit_model_path(unit_text)
        if serving != model["path"]:
            out.append({"host": host, "field": "model path", "value": serving, "expected": model["path"]})
    for reason in (live or {}).get("seal_breaks") or []:
        out.append({"host": host, "field": "seal", "value": reason, "expected": "as sealed"})
    return out


def pin_drift(host, manifest, pin):
    """Compare one host's recorded model revision with the commit its inventory pins.

    :param manifest: the manifest dict (may be empty: nothing to compare, the fleet drift reports it).
    :param pin: ``{"model_revision": str}`` from the inventory; only a 40-hex commit is compared (a branch pinned
        with ``sglang_model_allow_branch`` is resolved on the host, empty means no model is pinned).
    :returns: list of ``{"host", "field": "model revision", "value" (manifest), "expected" (pin)}``.
    """
    want = str((pin or {}).get("model_revision") or "").strip().lower()
    if not manifest or not _COMMIT.match(want):
        return []
    have = _get(manifest, ("model", "revision"))
    if have == want:
        return []
    return [{"host": host, "field": "model revision", "value": have, "expected": want}]


def drift_report(manifests, live=None, pins=None):
    """The three kinds of drift plus a Markdown-ish text summary.

    :param manifests: ``{host: manifest}``.
    :param live: optional ``{host: live state}`` (see :func:`host_drift`).
    :param pins: optional ``{host: {"model_revision": str}}`` from the inventory (see :func:`pin_drift`).
    :returns: ``{"fleet": [...], "hosts": [...], "pins": [...], "drift": bool, "summary": [str, ...]}``.
    """
    fleet = fleet_drift(manifests)
    hosts = []
    for host in sorted((live or {})):
        hosts.extend(host_drift(host, manifests.get(host) or {}, live[host]))
    pinned = []
    for host in sorted((pins or {})):
        pinned.extend(pin_drift(host, manifests.get(host) or {}, pins[host]))
    summary = []
    for d in fleet:
        summary.append("fleet drift on %s: %s = %r, %d host(s) have %r" % (
            d["host"], d["field"], d["value"], d["hosts_with_expected"], d["expected"]))
    for d in hosts:
        summary.append("host drift on %s: %s is %r now, manifest says %r" % (d["host"], d["field"], d["value"], d["expected"]))
    for d in pinned:
        summary.append("pin drift on %s: %s = %r, the inventory pins %r" % (d["host"], d["field"], d["value"], d["expected"]))
    if not summary:
        summary.append("no drift across %d host(s)" % len(manifests))
    return {"fleet": fleet, "hosts": hosts, "pins": pinned, "drift": bool(fleet or hosts or pinned), "summary": summary}
