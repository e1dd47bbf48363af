# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang contributors
# Apache-2.0 (see LICENSE)
"""Checkpoint facts and the KV-cache guard (pure Python, stdlib only).

Where the rules come from (``shared/domain/sglang-sm120.md`` section 6, field report B13):

* SGLang's ``--kv-cache-dtype auto`` switches the KV cache to ``fp8_e4m3`` when the checkpoint's quantisation
  config says ``kv_cache_quant_algo`` == "FP8" (case-insensitive). ModelOpt writes that into
  ``hf_quant_config.json`` (``{"quantization": {"quant_algo": "NVFP4", "kv_cache_quant_algo": "FP8"}}``) or into
  ``config.json`` ``quantization_config``; a compressed-tensors style ``kv_cache_scheme``
  ``{"type": "float", "num_bits": 8}`` is read as "FP8" too (``ModelOptFp4Config.from_config``).
* When the checkpoint has no ``k_scale``/``v_scale`` tensors SGLang silently uses scale 1.0, which measurably
  degrades accuracy (ROCm/vllm#317: PPL 2.73 -> 2.89; sgl-cookbook#237 removed fp8 KV from recipes for that
  reason). A single ``kv_scale`` per layer is duplicated into both, so it counts as present.
* On compute capability 12.x the FP8 KV path has also crashed in CUDA-graph capture (no SM120 FP8 prefill
  kernel, B13), so the recommendation there is ``bf16`` whatever the checkpoint asks for; an explicit
  ``fp8_e4m3`` request is still allowed when the scales exist.

Scale presence is read from the tensor names in ``model.safetensors.index.json`` (``weight_map``) or, when there
is no index, from each ``*.safetensors`` header (8-byte little-endian length + JSON, the safetensors format,
checked as the reference loader checks it: ``_safetensors``).

Every file is read under the link rule of ``_checkpoint_tree`` (docs/model.md "Links and special files"): a link
that leaves the model root, a dangling link, a FIFO or a device in the checkpoint is a :class:`CheckpointError`
naming it.
"""

from __future__ import annotations

import math
import os

from ansible_collections.blackwell.sglang.plugins.module_utils import _checkpoint_tree as _tree
from ansible_collections.blackwell.sglang.plugins.module_utils import _safetensors

from ansible_collections.blackwell.sglang.plugins.module_utils import _fs

INDEX_NAMES = ("model.safetensors.index.json",)
MAX_HEADER_BYTES = _safetensors.MAX_HEADER_BYTES
# huggingface_hub's local_dir metadata: not part of the checkpoint
HF_LOCAL_CACHE = ".cache"

FP8_KV_DTYPES = ("fp8_e4m3", "fp8_e5m2")
BF16_KV_DTYPES = ("bf16", "bfloat16")


class CheckpointError(ValueError):
    """The model directory cannot be read as a Hugging Face safetensors checkpoint."""


def _decode_json(raw, path):
    return _fs.parse_json(raw, path, "checkpoint JSON file", CheckpointError,
                          lambda reason: "%s is not valid JSON: %s" % (path, reason))


class _Checkpoint(object):
    """The files of one checkpoint directory, listed and read under the link rule (``_checkpoint_tree``).

    :raises CheckpointError: on construction when an entry breaks the rule (naming it and its target).
    """

    def __init__(self, model_dir):
        self.dir = model_dir
        entries, problems = _tree.scan(model_dir, skip_top=(HF_LOCAL_CACHE,))
        if problems:
            shown = "; ".join("%s/%s" % (model_dir.rstrip("/"), str(p)) for p in problems[:5])
            more = " (and %d more)" % (len(problems) - 5) if len(problems) > 5 else ""
            raise CheckpointError("%s%s" % (shown, more))
        self.entries = entries
        self.root = _tree.model_root(model_dir)[1]

    def path(self, rel):
        return os.path.join(self.dir, rel)

    def has(self, rel):
        return rel in self.entries

    def size(self, rel):
        return self.entries[rel].stat.st_size

    def open(self, rel):
        try:
            return _tree.open_entry(self.entries[rel], self.root)
        except _tree.TreeError as exc:
            raise CheckpointError("%s: %s" % (self.path(rel), exc.reason)) from None

    def json(self, rel):
        """Parsed JSON of ``rel``, or None when the checkpoint has no such file."""
        if rel not in self.entries:
            return None
        handle, _st = self.open(rel)
        with handle:
            return _decode_json(handle.read(), self.path(rel))

    def tensor_names(self, rel):
        handle, st = self.open(rel)
        with handle:
            try:
                header = _safetensors.read(handle, st.st_size)
            except _safetensors.SafetensorsError as exc:
                raise CheckpointError("%s: %s" % (self.path(rel), exc)) from None
        return list(header["tensors"])


def normalize_algo(value):
    """Normalise a quantisation algorithm name: ``"fp8"`` -> ``"FP8"``, ``"nvfp4"`` -> ``"NVFP4"``.

    ``None``, ``""``, ``"none"``, ``"null"`` -> None. ``fp8_e4m3``/``float8_e4m3fn``-style spellings of an FP8 KV
    cache become ``"FP8"``.
    """
    if value is None:
        return None
    text = str(value).strip()
    if text.lower() in ("", "none", "null"):
        return None
    upper = text.upper()
    if upper.startswith("FP8") or upper.startswith("FLOAT8"):
        return "FP8" if upper in ("FP8", "FP8_E4M3", "FP8_E5M2", "FLOAT8_E4M3FN", "FLOAT8_E5M2", "FLOAT8") \
            else upper
    return upper


def _kv_algo_from_scheme(scheme):
    """compressed-tensors ``kv_cache_scheme`` -> "FP8" for ``{type: float, num_bits: 8}``, else None/INTn."""
    if not isinstance(scheme, dict):
        return None
    if scheme.get("num_bits") == 8 and str(scheme.get("type", "")).lower() == "float":
        return "FP8"
    if scheme.get("num_bits") and str(scheme.get("type", "")).lower() == "int":
        return "INT%s" % scheme.get("num_bits")
    return None


def _section(data, key):
    """``data[key]`` when ``data`` is an object and it holds an object there, else ``data`` itself when it is an
    object, else {} (a hand-edited quantisation file of the wrong shape reads as "no quantisation", never a crash)."""
    if not isinstance(data, dict):
        return {}
    inner = data.get(key, data)
    return inner if isinstance(inner, dict) else {}


def read_quant_config(model_dir, checkpoint=None):
    """Read the quantisation description of a checkpoint.

    Precedence follows SGLang's loader: ``hf_quant_config.json`` (ModelOpt) first, then ``config.json``
    ``quantization_config``.

    :param checkpoint: the directory already listed (``_Checkpoint``), else ``model_dir`` is listed here.
    :returns: dict ``source`` (file it came from or None), ``quant_method``, ``quant_algo``,
        ``kv_cache_quant_algo`` (normalised, e.g. "FP8" or None), ``producer``.
    :raises CheckpointError: unreadable JSON, or an entry that breaks the link rule.
    """
    checkpoint = checkpoint or _Checkpoint(model_dir)
    result = {"source": None, "quant_method": None, "quant_algo": None, "kv_cache_quant_algo": None,
              "producer": None}
    if checkpoint.has("hf_quant_config.json"):
        data = checkpoint.json("hf_quant_config.json")
        quant = _section(data, "quantization")
        producer = data.get("producer") if isinstance(data, dict) else None
        result.update({
            "source": "hf_quant_config.json",
            "quant_method": "modelopt",
            "quant_algo": normalize_algo(quant.get("quant_algo")),
            "kv_cache_quant_algo": normalize_algo(quant.get("kv_cache_quant_algo"))
            or _kv_algo_from_scheme(quant.get("kv_cache_scheme")),
            "producer": producer.get("name") if isinstance(producer, dict) else producer,
        })
        return result
    if checkpoint.has("config.json"):
        config = checkpoint.json("config.json")
        qcfg = config.get("quantization_config") if isinstance(config, dict) else None
        if isinstance(qcfg, dict):
            result.update({
                "source": "config.json:quantization_config",
                "quant_method": qcfg.get("quant_method"),
                "quant_algo": normalize_algo(qcfg.get("quant_algo")),
                "kv_cache_quant_algo": normalize_algo(qcfg.get("kv_cache_quant_algo"))
                or _kv_algo_from_scheme(qcfg.get("kv_cache_scheme")),
            })
            if result["quant_algo"] is None and qcfg.get("quant_method"):
                method = str(qcfg["quant_method"])
                result["quant_algo"] = normalize_algo(qcfg.get("fmt") or method)
    return result


def read_safetensors_header(path):
    """Return the tensor names of one ``.safetensors`` file from its header (no tensor data is read).

    :raises CheckpointError: for every header the reference loader refuses (``_safetensors``): a short file, a header
        length above :data:`MAX_HEADER_BYTES` or beyond the file, a header that is not a JSON object, tensors that
        do not tile the data buffer, ...
    """
    try:
        with open(path, "rb") as handle:
            header = _safetensors.read(handle, os.fstat(handle.fileno()).st_size)
    except _safetensors.SafetensorsError as exc:
        raise CheckpointError("%s: %s" % (path, exc)) from None
    return list(header["tensors"])


def scan_tensor_names(names):
    """Count KV-scale tensors among checkpoint tensor names.

    :returns: dict ``k_scale``, ``v_scale``, ``kv_scale`` (counts of names ending ``.k_scale`` etc.) and
        ``has_kv_scales`` (both k and v scales present, or a combined ``kv_scale``).
    """
    k = v = kv = 0
    for name in names:
        if name.endswith(".k_scale"):
            k += 1
        elif name.endswith(".v_scale"):
            v += 1
        elif name.endswith(".kv_scale"):
            kv += 1
    return {"k_scale": k, "v_scale": v, "kv_scale": kv, "has_kv_scales": bool((k and v) or kv)}


def head_dim(config):
    """The attention head dimension of a ``config.json`` dict: ``head_dim``, else ``hidden_size /
    num_attention_heads`` (top level, then ``text_config``); None when neither can be read."""
    for section in (config, config.get("text_config") if isinstance(config.get("text_config"), dict) else {}):
        value = section.get("head_dim")
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
        hidden, heads = section.get("hidden_size"), section.get("num_attention_heads")
        if isinstance(hidden, int) and isinstance(heads, int) and heads > 0 and hidden > 0:
            return hidden // heads
    return None


def checkpoint_facts(model_dir):
    """Inspect a local Hugging Face checkpoint directory.

    :param model_dir: directory holding ``config.json`` and the safetensors shards.
    :returns: dict ``model_path``, ``model_type``, ``architectures``, ``head_dim`` (:func:`head_dim`),
        ``torch_dtype``, ``quant_method``,
        ``quant_algo``, ``kv_cache_quant_algo``, ``quant_config_source``, ``has_kv_scales`` (bool),
        ``kv_scale_tensors`` ({k_scale, v_scale, kv_scale}), ``num_shards``, ``total_bytes`` (bytes: the index's
        ``metadata.total_size`` = tensor bytes when present, else the sum of shard file sizes),
        ``shard_bytes_on_disk`` (sum of shard files that exist), ``missing_shards`` (listed in the index but
        absent), ``tensor_names_from`` ("index" or "headers"), ``quant`` (:func:`canonical_quant` record or None),
        ``quant_layout_error`` (the ``quant_layout_unknown`` message or None), ``context`` (:func:`context_limits`).
    :raises CheckpointError: when the directory or ``config.json`` is missing, or no safetensors are found.
    """
    if not os.path.isdir(model_dir):
        raise CheckpointError("model directory %s does not exist" % model_dir)
    checkpoint = _Checkpoint(model_dir)
    config_path = checkpoint.path("config.json")
    if not checkpoint.has("config.json"):
        raise CheckpointError("%s has no config.json" % model_dir)
    config = checkpoint.json("config.json")
    if not isinstance(config, dict):
        raise CheckpointError("%s must hold a JSON object, got %s" % (config_path, type(config).__name__))
    quant = read_quant_config(model_dir, checkpoint)

    index_rel = next((name for name in INDEX_NAMES if checkpoint.has(name)), None)
    total_bytes = None
    missing = []
    if index_rel:
        index_path = checkpoint.path(index_rel)
        index = checkpoint.json(index_rel)
        if not isinstance(index, dict):
            raise CheckpointError("%s must hold a JSON object, got %s" % (index_path, type(index).__name__))
        weight_map = index.get("weight_map") or {}
        if not isinstance(weight_map, dict) or not all(isinstance(v, str) for v in weight_map.values()):
            raise CheckpointError("%s: key weight_map must map tensor names to shard file names" % index_path)
        names = list(weight_map)
        shards = sorted(set(weight_map.values()))
        outside = []
        for shard in shards:
            try:
                _tree.check_rel(shard)
            except _tree.TreeError:
                outside.append(shard)
        if outside:
            raise CheckpointError("%s: key weight_map names shards outside the model directory: %s"
                                  % (index_path, ", ".join(repr(x) for x in outside[:5])))
        meta = index.get("metadata") or {}
        if not isinstance(meta, dict):
            raise CheckpointError("%s: key metadata must be a JSON object" % index_path)
        if meta.get("total_size") is not None:
            value = meta["total_size"]
            if isinstance(value, bool) or not isinstance(value, (int, float, str)):
                value = None
            try:
                total_bytes = int(value) if value is not None else None
            except (TypeError, ValueError, OverflowError):
                total_bytes = None
            if total_bytes is None:
                raise CheckpointError("%s: key metadata.total_size must be a number of bytes, got %r"
                                      % (index_path, meta["total_size"]))
            if total_bytes < 0:
                raise CheckpointError("%s: key metadata.total_size must be >= 0, got %r" % (index_path, total_bytes))
        source = "index"
        missing = [s for s in shards if not checkpoint.has(s)]
    else:
        shards = sorted(rel for rel in checkpoint.entries if "/" not in rel and rel.endswith(".safetensors"))
        if not shards:
            raise CheckpointError("%s has neither %s nor *.safetensors shards" % (model_dir, INDEX_NAMES[0]))
        names = []
        for shard in shards:
            names.extend(checkpoint.tensor_names(shard))
        source = "headers"
    on_disk = sum(checkpoint.size(s) for s in shards if checkpoint.has(s))
    if total_bytes is None:
        total_bytes = on_disk
    scales = scan_tensor_names(names)
    text_config = config.get("text_config") if isinstance(config.get("text_config"), dict) else {}
    try:
        canonical, canonical_error = canonical_quant(config, checkpoint.json("hf_quant_config.json")), None
    except QuantLayoutError as exc:
        canonical, canonical_error = None, str(exc)
    tokenizer_config = checkpoint.json("tokenizer_config.json")
    return {
        "quant": canonical,
        "quant_layout_error": canonical_error,
        "context": context_limits(config, tokenizer_config if isinstance(tokenizer_config, dict) else None),
        "model_path": model_dir,
        "model_type": config.get("model_type"),
        "architectures": config.get("architectures") or [],
        "head_dim": head_dim(config),
        "torch_dtype": config.get("torch_dtype") or config.get("dtype") or text_config.get("torch_dtype"),
        "quant_method": quant["quant_method"],
        "quant_algo": quant["quant_algo"],
        "kv_cache_quant_algo": quant["kv_cache_quant_algo"],
        "quant_config_source": quant["source"],
        "has_kv_scales": scales["has_kv_scales"],
        "kv_scale_tensors": {"k_scale": scales["k_scale"], "v_scale": scales["v_scale"],
                             "kv_scale": scales["kv_scale"]},
        "num_shards": len(shards),
        "total_bytes": total_bytes,
        "shard_bytes_on_disk": on_disk,
        "missing_shards": missing,
        "tensor_names_from": source,
    }


def recommend_kv_cache_dtype(facts, cc_major=None):
    """The KV-cache dtype to render when the operator did not choose one.

    :param facts: :func:`checkpoint_facts` result (or a dict with ``kv_cache_quant_algo``/``has_kv_scales``).
    :param cc_major: compute capability major (int) or None when unknown.
    :returns: ``(dtype, reason)``; dtype is ``"bf16"``, ``"fp8_e4m3"`` or ``"auto"``.
    """
    wants_fp8 = facts.get("kv_cache_quant_algo") == "FP8"
    scales = bool(facts.get("has_kv_scales"))
    if cc_major == 12:
        if wants_fp8 and not scales:
            return "bf16", ("checkpoint asks for an FP8 KV cache but has no k/v scales (SGLang would use 1.0); "
                            "bf16 on compute capability 12.x")
        return "bf16", ("compute capability 12.x: explicit bf16 (auto may pick FP8 KV, which lacks an SM120 "
                        "prefill kernel, field report B13)")
    if wants_fp8 and scales:
        return "fp8_e4m3", "checkpoint asks for an FP8 KV cache and carries calibrated k/v scales"
    if wants_fp8:
        return "bf16", "checkpoint asks for an FP8 KV cache but has no k/v scales (SGLang would use 1.0)"
    return "auto", "checkpoint does not ask for an FP8 KV cache; auto = the model dtype"


def decide_kv_cache_dtype(facts, requested=None, allow_fp8_without_scales=False, cc_major=None):
    """Apply the KV-cache guard.

    :param facts: :func:`checkpoint_facts` result, or None when the checkpoint could not be inspected (e.g. a
        Hub id that is downloaded at first start).
    :param requested: the operator's ``--kv-cache-dtype`` choice; None/""/"auto" = let the guard decide.
    :param allow_fp8_without_scales: the explicit override for forcing FP8 without scales.
    :param cc_major: compute capability major or None.
    :returns: dict ``dtype`` (what to render), ``reason``, ``warnings`` (list of str).
    :raises ValueError: when an FP8 KV cache is requested, the checkpoint has no k/v scales and the override is
        off; or when ``auto`` is requested on CC 12.x with a checkpoint that asks for FP8 KV (auto would
        silently become FP8, B13).
    """
    warnings = []
    requested = (requested or "").strip() or None
    if facts is None:
        if requested in (None, "auto"):
            dtype = "bf16" if cc_major == 12 or requested is None else "auto"
            if requested == "auto" and cc_major == 12:
                raise ValueError("--kv-cache-dtype auto is refused on compute capability 12.x (B13); choose bf16")
            warnings.append("checkpoint not inspected (not a local directory); KV cache dtype %s" % dtype)
            return {"dtype": dtype, "reason": "checkpoint not inspected", "warnings": warnings}
        if requested in FP8_KV_DTYPES and not allow_fp8_without_scales:
            raise ValueError("--kv-cache-dtype %s requested but the checkpoint could not be inspected for k/v "
                             "scales; set sglang_service_allow_fp8_kv_without_scales: true to force it" % requested)
        return {"dtype": requested, "reason": "operator choice (checkpoint not inspected)", "warnings": warnings}

    wants_fp8 = facts.get("kv_cache_quant_algo") == "FP8"
    scales = bool(facts.get("has_kv_scales"))
    if requested is None:
        dtype, reason = recommend_kv_cache_dtype(facts, cc_major)
        if wants_fp8 and not scales:
            warnings.append("fp8_kv_without_scales: %s declares kv_cache_quant_algo FP8 but has no k_scale/v_scale "
                            "tensors; rendering --kv-cache-dtype bf16 instead of letting SGLang default the "
                            "scales to 1.0" % facts.get("model_path"))
        return {"dtype": dtype, "reason": reason, "warnings": warnings}
    if requested == "auto":
        if cc_major == 12:
            raise ValueError("--kv-cache-dtype auto is refused on compute capability 12.x: it follows the "
                             "checkpoint (%s) and may pick FP8 (B13); choose bf16 or fp8_e4m3 explicitly"
                             % (facts.get("kv_cache_quant_algo") or "no KV quantisation"))
        if wants_fp8 and not scales:
            if not allow_fp8_without_scales:
                raise ValueError("--kv-cache-dtype auto would select FP8 for %s, which has no k/v scales; choose "
                                 "bf16 or set sglang_service_allow_fp8_kv_without_scales: true"
                                 % facts.get("model_path"))
            warnings.append("fp8_kv_without_scales: auto selects FP8 with scale 1.0 (override set)")
        return {"dtype": "auto", "reason": "operator choice", "warnings": warnings}
    if requested in FP8_KV_DTYPES:
        if not scales:
            if not allow_fp8_without_scales:
                raise ValueError("--kv-cache-dtype %s requested but %s has no k_scale/v_scale tensors: SGLang would "
                                 "use scale 1.0 and lose accuracy (B13). Use bf16, or set "
                                 "sglang_service_allow_fp8_kv_without_scales: true to force it"
                                 % (requested, facts.get("model_path")))
            warnings.append("fp8_kv_without_scales: forcing --kv-cache-dtype %s without k/v scales (override set); "
                            "SGLang defaults the scales to 1.0" % requested)
        if cc_major == 12:
            warnings.append("--kv-cache-dtype %s on compute capability 12.x: FP8 KV has crashed in CUDA-graph "
                            "capture on SM120 (B13); verify with the smoke test" % requested)
        return {"dtype": requested, "reason": "operator choice", "warnings": warnings}
    return {"dtype": requested, "reason": "operator choice", "warnings": warnings}


# --- field reports part 2 (N-kinds; docs/field-reports.md) -----------------------------------------------------------

# FP4 KV cache (N04): NVFP4 KV needs the trtllm-gen FP4 FMHA, built for sm_100/sm_103 only (club-3090#574:
# "--kv-cache-dtype nvfp4 requires sm100f"). A family allow-list, never "cc >= 10" (which lets 12.x through).
FP4_KV_CAPABLE = frozenset([(10, 0), (10, 3)])


def is_fp4_kv_dtype(value):
    """``fp4_e2m1``, ``nvfp4``, ``fp4*`` (any spelling) are FP4 KV-cache dtypes."""
    text = str(value or "").strip().lower()
    return text.startswith("fp4") or text.startswith("nvfp4") or text.startswith("mxfp4")


def is_fp4_kv_capable(cc):
    """True only for compute capabilities on :data:`FP4_KV_CAPABLE` (``(10, 0)``, ``(10, 3)``); ``cc`` a tuple."""
    if not cc:
        return False
    return (int(cc[0]), int(cc[1]) if len(cc) > 1 and cc[1] is not None else -1) in FP4_KV_CAPABLE


def guard_fp4_kv(requested, facts, cc, allow_experimental=False):
    """Apply the FP4 KV rules before :func:`decide_kv_cache_dtype`.

    :param requested: the operator's ``--kv-cache-dtype`` (may be None).
    :param facts: checkpoint facts or None.
    :param cc: ``(major, minor)`` or None.
    :returns: ``(requested, warnings)``: ``requested`` unchanged, or ``"bf16"`` when the checkpoint declares an FP4
        KV cache and nothing was requested (``auto`` would turn into FP4).
    :raises ValueError: ``fp4_kv_unsupported_on_sm12x`` (or ``fp4_kv_unsupported``) when FP4 is requested for a GPU
        off the allow-list without ``allow_experimental``; ``auto`` with an FP4-KV checkpoint off the allow-list.
    """
    warnings = []
    ckpt_fp4 = bool(facts) and is_fp4_kv_dtype(facts.get("kv_cache_quant_algo"))
    if cc and cc[1] is not None:
        label = "compute capability %d.%d" % tuple(cc)
    else:
        label = "compute capability %s" % ("%s.x" % cc[0] if cc else "unknown")
    kind = "fp4_kv_unsupported_on_sm12x" if cc and int(cc[0]) == 12 else "fp4_kv_unsupported"
    if is_fp4_kv_dtype(requested) and not is_fp4_kv_capable(cc):
        if not allow_experimental:
            raise ValueError("%s: --kv-cache-dtype %s needs the sm_100/sm_103 FP4 FMHA; %s is not on the FP4-KV "
                             "allow-list (10.0, 10.3): it fails at boot ('requires sm100f') or gives silent garbage "
                             "(field report N04). Use bf16, or set sglang_service_allow_experimental_fp4_kv: true"
                             % (kind, requested, label))
        warnings.append("%s: experimental FP4 KV cache forced on %s (override set); check outputs for '!' "
                        "(token id 0) garbage" % (kind, label))
    if ckpt_fp4 and (requested or "").strip() in ("", "auto") and not is_fp4_kv_capable(cc):
        if (requested or "").strip() == "auto":
            raise ValueError("%s: --kv-cache-dtype auto would follow the checkpoint's kv_cache_quant_algo %s into an "
                             "FP4 KV cache on %s (N04); choose bf16" % (kind, facts.get("kv_cache_quant_algo"), label))
        warnings.append("checkpoint declares kv_cache_quant_algo %s; rendering --kv-cache-dtype bf16 (never FP4 "
                        "or auto on %s, N04)" % (facts.get("kv_cache_quant_algo"), label))
        return "bf16", warnings
    return requested, warnings


# --- transformers / SGLang know the model type (N07) -----------------------------------------------------------------
# Minimum transformers versions that the reports name for a model_type (a hint in the message; the verdict itself
# comes from the venv's CONFIG_MAPPING_NAMES): unsloth#5237 "minimum required version is 5.2.0" for Qwen3.5.
KNOWN_MIN_TRANSFORMERS = {
    "qwen3_5": ("5.2.0", "unsloth#5237"),
    "qwen3_5_moe": ("5.2.0", "unsloth#5237"),
}

MODEL_SUPPORT_PROBE = r"""
import json, sys
out = {"transformers_version": None, "config_mapping": None, "sglang_version": None, "sglang_archs": None,
       "errors": []}
try:
    import transformers
    out["transformers_version"] = transformers.__version__
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING_NAMES
    out["config_mapping"] = sorted(CONFIG_MAPPING_NAMES)
except Exception as exc:
    out["errors"].append("transformers: %s: %s" % (type(exc).__name__, exc))
if sys.argv[1:2] == ["1"]:
    try:
        import sglang
        out["sglang_version"] = getattr(sglang, "__version__", None)
        from sglang.srt.models.registry import ModelRegistry
        out["sglang_archs"] = sorted(ModelRegistry.get_supported_archs())
    except Exception as exc:
        out["errors"].append("sglang registry: %s: %s" % (type(exc).__name__, exc))
print(json.dumps(out))
"""


def check_model_support(model_type, architectures, probe):
    """Does the venv know this checkpoint's ``model_type`` (transformers) and architectures (SGLang)?

    :param probe: the JSON of :data:`MODEL_SUPPORT_PROBE` run with the venv python.
    :returns: dict ``status`` (``pass`` / ``fail`` / ``skip``), ``cause`` (``model_type_unsupported`` or None),
        ``message``.
    """
    probe = probe or {}
    mapping = probe.get("config_mapping")
    version = probe.get("transformers_version") or "unknown"
    if not model_type:
        return {"status": "skip", "cause": None, "message": "config.json has no model_type"}
    if mapping is None:
        return {"status": "skip", "cause": None, "message": "transformers registry not readable: %s"
                % "; ".join(probe.get("errors") or ["no probe output"])}
    problems, warnings = [], []
    if model_type not in mapping:
        hint = KNOWN_MIN_TRANSFORMERS.get(model_type)
        problems.append("%s not in transformers %s%s" % (
            model_type, version, "; %s reports >= %s needed" % (hint[1], hint[0]) if hint else ""))
    archs = probe.get("sglang_archs")
    if archs is not None:
        missing = [a for a in architectures or [] if a not in archs]
        if missing and len(missing) == len(architectures or []):
            # SGLang's registry skips (and only logs) every model module that fails to import, e.g. for a missing
            # optional dependency, so absence is a hint, not proof: a warning, never the failure cause
            warnings.append("architectures %s not in SGLang %s's model registry as imported in this venv (SGLang "
                            "leaves out models whose module fails to import)" % (
                                ", ".join(missing), probe.get("sglang_version") or "(version unknown)"))
    if problems:
        return {"status": "fail", "cause": "model_type_unsupported",
                "message": "model_type_unsupported: %s (field report N07): upgrade transformers / SGLang in the "
                           "release" % "; ".join(problems)}
    if warnings:
        return {"status": "warn", "cause": None, "message": "; ".join(warnings)}
    return {"status": "pass", "cause": None, "message": "%s is known to transformers %s" % (model_type, version)}


# --- context length against the native window (N09) -----------------------------------------------------------------
_POSITION_KEYS = ("max_position_embeddings", "max_sequence_length", "seq_length", "n_positions", "max_seq_len")
# RoPE scalings that extend the window statically (SGLang's derived limit grows by the factor): YaRN, linear.
STATIC_ROPE_TYPES = ("yarn", "linear")
# transformers writes int(1e30) as model_max_length when a tokenizer sets no limit.
_NO_TOKENIZER_LIMIT = 10 ** 18


def _rope(section):
    for key in ("rope_scaling", "rope_parameters"):
        value = section.get(key)
        if isinstance(value, dict) and value:
            return key, value
    return None, None


def context_limits(config, tokenizer_config=None):
    """The context window a checkpoint supports.

    :param config: parsed ``config.json`` (top level and ``text_config`` are both read; ``text_config`` wins for
        multimodal wrappers).
    :param tokenizer_config: parsed ``tokenizer_config.json`` or None.
    :returns: dict ``native`` (positions the model was trained for, or None), ``limit`` (native, or
        ``factor x original_max_position_embeddings`` under a static YaRN/linear RoPE scaling, whichever is larger),
        ``rope`` (``{type, factor, original, source}`` or None), ``tokenizer_max`` (int or None).
    """
    config = config if isinstance(config, dict) else {}
    sections = [config]
    if isinstance(config.get("text_config"), dict):
        sections.insert(0, config["text_config"])
    native = None
    for section in sections:
        for key in _POSITION_KEYS:
            if isinstance(section.get(key), int) and not isinstance(section.get(key), bool):
                native = section[key]
                break
        if native is not None:
            break
    rope = None
    for label, section in (("text_config", config.get("text_config")), ("config", config)):
        if not isinstance(section, dict):
            continue
        key, value = _rope(section)
        if value is None:
            continue
        rtype = str(value.get("rope_type") or value.get("type") or "").lower()
        rope = {"type": rtype, "factor": value.get("factor"), "source": "%s.%s" % (label, key),
                "original": value.get("original_max_position_embeddings") or native}
        break
    limit = native
    factor, original = _finite(rope.get("factor")) if rope else None, _finite(rope.get("original")) if rope else None
    extended = _finite(factor * int(original)) if factor and original else None
    if rope and rope["type"] in STATIC_ROPE_TYPES and extended:
        # a factor or window that is no number, or whose product overflows (a hand-edited config), extends nothing
        limit = max(native or 0, int(extended))
    tok = _finite((tokenizer_config if isinstance(tokenizer_config, dict) else {}).get("model_max_length"))
    tok = int(tok) if tok is not None and 0 <= tok < _NO_TOKENIZER_LIMIT else None
    return {"native": native, "limit": limit, "rope": rope, "tokenizer_max": tok}


def _finite(value):
    """``value`` as a finite float when it is a JSON number (not a boolean), else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        value = float(value)
    except OverflowError:
        return None
    return value if math.isfinite(value) else None


def _truthy(value):
    return str(value).strip().lower() in ("1", "true", "yes", "on")


def check_context_length(limits, requested, env=None, draft_tokens=0):
    """Validate ``sglang_service_context_length`` against :func:`context_limits`.

    :returns: dict ``status`` (``pass``/``warn``/``fail``), ``cause`` (``context_beyond_native``,
        ``context_override_without_yarn`` or None), ``messages`` (list), ``warnings`` (list: ``tokenizer_caps_context``,
        ``spec_context_headroom``).
    """
    env = env or {}
    messages, warnings = [], []
    cause = None
    limit = limits.get("limit")
    native = limits.get("native")
    yarn = bool(limits.get("rope")) and limits["rope"]["type"] in STATIC_ROPE_TYPES
    if _truthy(env.get("SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN", "")) and not yarn:
        cause = "context_override_without_yarn"
        messages.append("SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN is set but the checkpoint has no static YaRN rope "
                        "scaling: positions past %s run on unscaled RoPE and the model silently forgets (N09); drop "
                        "the variable, or use a config with rope_scaling/rope_parameters type yarn" % native)
    if requested:
        requested = int(requested)
        if limit and requested > limit:
            cause = cause or "context_beyond_native"
            messages.append("context_beyond_native: context_length %d > %d (%s) of this checkpoint (N09); lower "
                            "sglang_service_context_length or add static YaRN rope scaling"
                            % (requested, limit, "native window" if limit == native else "YaRN-extended window"))
        tok = limits.get("tokenizer_max")
        if tok and tok < requested:
            warnings.append("tokenizer_caps_context: tokenizer_config.json model_max_length %d < requested %d: a "
                            "stale tokenizer limit caps prompts silently (N09)" % (tok, requested))
        if draft_tokens and limit and requested > limit - int(draft_tokens):
            warnings.append("spec_context_headroom: context_length %d leaves fewer than %d positions for the "
                            "speculative draft tokens below the limit %d; illegal memory accesses near the boundary "
                            "were reported (sglang#34239, N06)" % (requested, int(draft_tokens), limit))
    status = "fail" if cause else ("warn" if warnings else "pass")
    return {"status": status, "cause": cause, "messages": messages, "warnings": warnings}


# --- one canonical record for the quantisation layouts (N12) ----------------------------------------------------------

class QuantLayoutError(ValueError):
    """``quant_layout_unknown``: a quantisation description this collection cannot map to a format."""


def _ct_scheme(scheme):
    """compressed-tensors weight/activation scheme -> ``NVFP4`` / ``MXFP4`` / ``FP8`` / ``INT8`` / ``INT4`` / None."""
    if not isinstance(scheme, dict):
        return None
    bits = scheme.get("num_bits")
    kind = str(scheme.get("type") or "").lower()
    if bits == 4 and kind == "float":
        return "NVFP4" if scheme.get("group_size") in (16, None) else "MXFP4"
    if bits == 8 and kind == "float":
        return "FP8"
    if bits in (4, 8) and kind == "int":
        return "INT%d" % bits
    return None


# method names per format, preferred first; the first one the installed SGLang's parser offers is rendered
QUANT_METHODS = {
    "NVFP4": ["modelopt_fp4"],
    "FP8": ["modelopt_fp8", "modelopt"],
    "MIXED_NVFP4": ["modelopt_mixed", "modelopt_fp4"],
    "MIXED_FP8_INT4": ["w4afp8"],
}
PASSTHROUGH_METHODS = ("fp8", "awq", "gptq", "mxfp4", "bitsandbytes", "gguf", "mxfp8", "auto-round", "w8a8_fp8",
                       "w8a8_int8", "moe_wna16", "modelslim", "petit_nvfp4")


def canonical_quant(config, hf_quant=None):
    """Normalise every quantisation layout to one record (field report N12).

    :param config: parsed ``config.json``. :param hf_quant: parsed ``hf_quant_config.json`` or None.
    :returns: None for an unquantised checkpoint, else dict ``layout`` (``modelopt``, ``modelopt_mixed``,
        ``compressed-tensors``, ``hybrid_fp8_nvfp4_moe``, ``quant_method``), ``weights`` (``NVFP4``, ``FP8``,
        ``MIXED`` ...), ``weight_formats`` (for MIXED), ``activations``, ``linear``, ``moe``, ``producer``,
        ``methods`` (``--quantization`` candidates, preferred first), ``method`` (the first).
    :raises QuantLayoutError: for a layout or algorithm that cannot be mapped.
    """
    config = config if isinstance(config, dict) else {}
    qcfg = config.get("quantization_config") if isinstance(config.get("quantization_config"), dict) else None
    if qcfg is None and isinstance(config.get("text_config"), dict):
        inner = config["text_config"].get("quantization_config")
        qcfg = inner if isinstance(inner, dict) else None
    record = {"layout": None, "weights": None, "weight_formats": [], "activations": None, "linear": None,
              "moe": None, "producer": None, "methods": [], "method": None}
    if isinstance(hf_quant, dict):
        quant = _section(hf_quant, "quantization")
        producer = hf_quant.get("producer")
        record["producer"] = producer.get("name") if isinstance(producer, dict) else producer
        algo = normalize_algo(quant.get("quant_algo"))
        moe = normalize_algo(quant.get("moe_quant_algo"))
        cfg_method = str((qcfg or {}).get("quant_method") or "").lower()
        if algo == "MIXED_PRECISION":
            layers = quant.get("quantized_layers") if isinstance(quant.get("quantized_layers"), dict) else {}
            formats = sorted(set(normalize_algo(v.get("quant_algo")) for v in layers.values()
                                 if isinstance(v, dict) and v.get("quant_algo")))
            if not formats:
                raise QuantLayoutError("quant_layout_unknown: hf_quant_config.json says MIXED_PRECISION but lists no "
                                       "quantized_layers with a quant_algo")
            nvfp4 = any(f in ("NVFP4", "W4A16_NVFP4") for f in formats)
            record.update({"layout": "modelopt_mixed", "weights": "MIXED", "weight_formats": formats,
                           "methods": list(QUANT_METHODS["MIXED_NVFP4" if nvfp4 else "MIXED_FP8_INT4"])})
        elif moe == "NVFP4" and (algo == "FP8" or cfg_method == "fp8"):
            record.update({"layout": "hybrid_fp8_nvfp4_moe", "weights": "MIXED", "weight_formats": ["FP8", "NVFP4"],
                           "linear": "FP8", "moe": "NVFP4", "methods": ["fp8"]})
        elif algo in ("NVFP4", "FP4", "W4A16_NVFP4") or (algo and "FP4" in algo):
            record.update({"layout": "modelopt", "weights": "NVFP4", "linear": "NVFP4",
                           "activations": "NVFP4" if algo != "W4A16_NVFP4" else None,
                           "moe": moe or "NVFP4", "methods": list(QUANT_METHODS["NVFP4"])})
        elif algo == "FP8":
            record.update({"layout": "modelopt", "weights": "FP8", "linear": "FP8", "activations": "FP8",
                           "moe": moe or "FP8", "methods": list(QUANT_METHODS["FP8"])})
        else:
            raise QuantLayoutError("quant_layout_unknown: hf_quant_config.json quant_algo %r (moe_quant_algo %r) is "
                                   "not a layout this collection knows; set sglang_service_quantization explicitly"
                                   % (quant.get("quant_algo"), quant.get("moe_quant_algo")))
    elif qcfg is not None:
        method = str(qcfg.get("quant_method") or "").lower()
        if method in ("compressed-tensors", "compressed_tensors"):
            groups = qcfg.get("config_groups") if isinstance(qcfg.get("config_groups"), dict) else {}
            weights = sorted(set(_ct_scheme(g.get("weights")) for g in groups.values() if isinstance(g, dict)) - {None})
            acts = sorted(set(_ct_scheme(g.get("input_activations")) for g in groups.values()
                              if isinstance(g, dict)) - {None})
            if not weights:
                raise QuantLayoutError("quant_layout_unknown: compressed-tensors config without a weight scheme this "
                                       "collection can read (config_groups %s)" % sorted(groups))
            record.update({"layout": "compressed-tensors", "weights": weights[0] if len(weights) == 1 else "MIXED",
                           "weight_formats": weights, "activations": acts[0] if len(acts) == 1 else (acts or None),
                           "linear": weights[0] if len(weights) == 1 else "MIXED",
                           "methods": ["compressed-tensors"], "producer": "llm-compressor"})
        elif method == "modelopt":
            algo = normalize_algo(qcfg.get("quant_algo"))
            if algo and "FP4" in algo:
                record.update({"layout": "modelopt", "weights": "NVFP4", "linear": "NVFP4", "activations": "NVFP4",
                               "methods": list(QUANT_METHODS["NVFP4"])})
            elif algo == "FP8":
                record.update({"layout": "modelopt", "weights": "FP8", "linear": "FP8",
                               "methods": list(QUANT_METHODS["FP8"])})
            else:
                raise QuantLayoutError("quant_layout_unknown: config.json quantization_config modelopt with quant_algo "
                                       "%r" % qcfg.get("quant_algo"))
        elif method in PASSTHROUGH_METHODS:
            fmt = normalize_algo(qcfg.get("fmt") or method)
            record.update({"layout": "quant_method", "weights": fmt, "linear": fmt, "methods": [method]})
        elif method:
            raise QuantLayoutError("quant_layout_unknown: config.json quantization_config quant_method %r is not a "
                                   "layout this collection knows; set sglang_service_quantization explicitly" % method)
        else:
            return None
    else:
        return None
    record["method"] = record["methods"][0] if record["methods"] else None
    return record


def choose_quantization(record, choices=None):
    """The ``--quantization`` value for a canonical record: the first candidate the parser offers.

    :param choices: the installed SGLang's ``--quantization`` choices (None = not known: the first candidate).
    :returns: ``(value_or_None, warnings)``.
    :raises QuantLayoutError: when the parser offers none of the candidates.
    """
    if not record:
        return None, []
    if choices is None:
        return record["method"], []
    for index, method in enumerate(record["methods"]):
        if method in choices:
            warnings = [] if index == 0 else [
                "%s checkpoint: this SGLang has no --quantization %s; rendering %s (check the FP4 probe)"
                % (record["layout"], record["methods"][0], method)]
            return method, warnings
    raise QuantLayoutError("quant_layout_unknown: none of %s is a --quantization choice of this SGLang (%s)"
                           % (", ".join(record["methods"]), ", ".join(choices)))


def draft_quantization(draft_dir, target_record=None, explicit=None):
    """``--speculative-draft-model-quantization`` for an EAGLE/MTP draft checkpoint (field report N05).

    SGLang copies ``--quantization`` to the draft when this flag is unset; a BF16 draft then fails with
    ``Cannot find the config file for <q>`` (sglang#28196).

    :param draft_dir: local draft checkpoint directory.
    :param target_record: :func:`canonical_quant` of the target (or None).
    :param explicit: the operator's value (wins, never refused).
    :returns: dict ``value`` (``unquant`` or the draft's method), ``draft`` (its canonical record or None),
        ``reason``.
    :raises ValueError: ``draft_quant_mismatch`` when the draft is quantised in another format than the target
        and nothing explicit was given; :class:`CheckpointError` when the draft directory has no config.json.
    """
    if explicit:
        return {"value": explicit, "draft": None, "reason": "operator choice"}
    if not os.path.isdir(draft_dir):
        raise CheckpointError("speculative draft model %s has no config.json (no such directory)" % draft_dir)
    checkpoint = _Checkpoint(draft_dir)
    if not checkpoint.has("config.json"):
        raise CheckpointError("speculative draft model %s has no config.json" % draft_dir)
    record = canonical_quant(checkpoint.json("config.json"), checkpoint.json("hf_quant_config.json"))
    if record is None:
        return {"value": "unquant", "draft": None,
                "reason": "draft %s has no quantization_config / hf_quant_config.json: unquant (it would otherwise "
                          "inherit the target's --quantization)" % draft_dir}
    if target_record and record["weights"] != target_record.get("weights"):
        raise ValueError("draft_quant_mismatch: draft %s is %s but the target is %s; set "
                         "sglang_service_speculative.draft_model_quantization explicitly (N05)"
                         % (draft_dir, record["weights"], target_record.get("weights")))
    return {"value": record["method"], "draft": record, "reason": "draft's own quantisation (%s)" % record["layout"]}
