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
is no index, from each ``*.safetensors`` header (8-byte little-endian length + JSON, the safetensors format).
"""

from __future__ import annotations

import json
import os
import struct

INDEX_NAMES = ("model.safetensors.index.json",)
# A safetensors header is JSON describing tensors; real ones are kilobytes to a few MiB. Refuse absurd sizes
# rather than reading gigabytes into memory from a corrupt file.
MAX_HEADER_BYTES = 100 * 1024 * 1024

FP8_KV_DTYPES = ("fp8_e4m3", "fp8_e5m2")
BF16_KV_DTYPES = ("bf16", "bfloat16")


class CheckpointError(ValueError):
    """The model directory cannot be read as a Hugging Face safetensors checkpoint."""


def _load_json(path):
    try:
        with open(path, "rb") as handle:
            return json.loads(handle.read().decode("utf-8"))
    except ValueError as exc:
        raise CheckpointError("%s is not valid JSON: %s" % (path, exc))


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


def read_quant_config(model_dir):
    """Read the quantisation description of a checkpoint.

    Precedence follows SGLang's loader: ``hf_quant_config.json`` (ModelOpt) first, then ``config.json``
    ``quantization_config``.

    :returns: dict ``source`` (file it came from or None), ``quant_method``, ``quant_algo``,
        ``kv_cache_quant_algo`` (normalised, e.g. "FP8" or None), ``producer``.
    """
    result = {"source": None, "quant_method": None, "quant_algo": None, "kv_cache_quant_algo": None,
              "producer": None}
    hf_quant = os.path.join(model_dir, "hf_quant_config.json")
    if os.path.isfile(hf_quant):
        data = _load_json(hf_quant)
        quant = data.get("quantization", data) if isinstance(data, dict) else {}
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
    config_path = os.path.join(model_dir, "config.json")
    if os.path.isfile(config_path):
        config = _load_json(config_path)
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

    :raises CheckpointError: on a short file, a header length above :data:`MAX_HEADER_BYTES` or invalid JSON.
    """
    with open(path, "rb") as handle:
        prefix = handle.read(8)
        if len(prefix) != 8:
            raise CheckpointError("%s: too short for a safetensors header" % path)
        (length,) = struct.unpack("<Q", prefix)
        if length > MAX_HEADER_BYTES:
            raise CheckpointError("%s: header length %d bytes is implausible (limit %d)"
                                  % (path, length, MAX_HEADER_BYTES))
        raw = handle.read(length)
        if len(raw) != length:
            raise CheckpointError("%s: header truncated (%d of %d bytes)" % (path, len(raw), length))
    try:
        header = json.loads(raw.decode("utf-8"))
    except ValueError as exc:
        raise CheckpointError("%s: header is not JSON: %s" % (path, exc))
    return [name for name in header if name != "__metadata__"]


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


def checkpoint_facts(model_dir):
    """Inspect a local Hugging Face checkpoint directory.

    :param model_dir: directory holding ``config.json`` and the safetensors shards.
    :returns: dict ``model_path``, ``model_type``, ``architectures``, ``torch_dtype``, ``quant_method``,
        ``quant_algo``, ``kv_cache_quant_algo``, ``quant_config_source``, ``has_kv_scales`` (bool),
        ``kv_scale_tensors`` ({k_scale, v_scale, kv_scale}), ``num_shards``, ``total_bytes`` (bytes: the index's
        ``metadata.total_size`` = tensor bytes when present, else the sum of shard file sizes),
        ``shard_bytes_on_disk`` (sum of shard files that exist), ``missing_shards`` (listed in the index but
        absent), ``tensor_names_from`` ("index" or "headers").
    :raises CheckpointError: when the directory or ``config.json`` is missing, or no safetensors are found.
    """
    if not os.path.isdir(model_dir):
        raise CheckpointError("model directory %s does not exist" % model_dir)
    config_path = os.path.join(model_dir, "config.json")
    if not os.path.isfile(config_path):
        raise CheckpointError("%s has no config.json" % model_dir)
    config = _load_json(config_path)
    if not isinstance(config, dict):
        raise CheckpointError("%s must hold a JSON object, got %s" % (config_path, type(config).__name__))
    quant = read_quant_config(model_dir)

    index_path = None
    for name in INDEX_NAMES:
        if os.path.isfile(os.path.join(model_dir, name)):
            index_path = os.path.join(model_dir, name)
            break
    total_bytes = None
    missing = []
    if index_path:
        index = _load_json(index_path)
        if not isinstance(index, dict):
            raise CheckpointError("%s must hold a JSON object, got %s" % (index_path, type(index).__name__))
        weight_map = index.get("weight_map") or {}
        if not isinstance(weight_map, dict) or not all(isinstance(v, str) for v in weight_map.values()):
            raise CheckpointError("%s: key weight_map must map tensor names to shard file names" % index_path)
        names = list(weight_map)
        shards = sorted(set(weight_map.values()))
        real_dir = os.path.realpath(model_dir)
        outside = [sh for sh in shards if os.path.isabs(sh) or not os.path.realpath(
            os.path.join(model_dir, sh)).startswith(real_dir + os.sep)]
        if outside:
            raise CheckpointError("%s: key weight_map names shards outside the model directory: %s"
                                  % (index_path, ", ".join(repr(x) for x in outside[:5])))
        meta = index.get("metadata") or {}
        if not isinstance(meta, dict):
            raise CheckpointError("%s: key metadata must be a JSON object" % index_path)
        if meta.get("total_size") is not None:
            try:
                total_bytes = int(meta["total_size"])
            except (TypeError, ValueError):
                raise CheckpointError("%s: key metadata.total_size must be a number of bytes, got %r"
                                      % (index_path, meta["total_size"]))
            if total_bytes < 0:
                raise CheckpointError("%s: key metadata.total_size must be >= 0, got %r" % (index_path, total_bytes))
        source = "index"
        missing = [s for s in shards if not os.path.isfile(os.path.join(model_dir, s))]
    else:
        shards = sorted(f for f in os.listdir(model_dir) if f.endswith(".safetensors"))
        if not shards:
            raise CheckpointError("%s has neither %s nor *.safetensors shards" % (model_dir, INDEX_NAMES[0]))
        names = []
        for shard in shards:
            names.extend(read_safetensors_header(os.path.join(model_dir, shard)))
        source = "headers"
    on_disk = sum(os.path.getsize(os.path.join(model_dir, s)) for s in shards
                  if os.path.isfile(os.path.join(model_dir, s)))
    if total_bytes is None:
        total_bytes = on_disk
    scales = scan_tensor_names(names)
    text_config = config.get("text_config") if isinstance(config.get("text_config"), dict) else {}
    return {
        "model_path": model_dir,
        "model_type": config.get("model_type"),
        "architectures": config.get("architectures") or [],
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
