# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang contributors
# Apache-2.0 (see LICENSE)
"""SGLang ``launch_server`` flags: rendering, the compute-capability allow-list and parser validation.

Pure Python (stdlib only), shared by the ``sglang_server_args`` module and
the unit tests.

Three jobs:

1. :func:`render_server_args` turns the role's settings into the argv of ``python -m sglang.launch_server``
   (long option names only, ``--flag value`` pairs, boolean switches without a value).
2. :func:`check_backends` applies the compute-capability-keyed allow-list. Sources (see
   ``shared/domain/sglang-sm120.md`` section 7 and field reports B06, B12, B13):

   * ``--attention-backend fa3``: sgl-kernel's FA3 ``flash_ops`` are compiled for ``sm_90a`` only; SGLang's
     attention registry refuses FA3 outside SM80-SM90 ("FlashAttention v3 Backend requires SM>=80 and SM<=90");
     on SM120 it dies with "no kernel image" / "invalid argument" in ``hopper/flash_fwd_launch_template.h`` (B06).
   * ``trtllm_mha`` / ``trtllm_mla``: FlashInfer's TllmGenFmhaRunner accepts only SM100/103/107
     ("TRTLLM MHA backend is only supported on Blackwell GPUs (SM100)", sglang#9140, #24633).
   * ``--fp4-gemm-backend flashinfer_trtllm`` / ``flashinfer_cutedsl`` (and the pre-#17309 spelling ``trtllm``):
     FlashInfer's ``mm_fp4`` capability decorators list CC 100/103/107 only ("mm_fp4 does not support backend
     'trtllm' with capability 120", sglang#35739).
   * ``--moe-runner-backend flashinfer_trtllm`` / ``flashinfer_cutedsl``: trtllm-gen and CuTe-DSL MoE are
     SM100-only; ``flashinfer_mxfp4`` raises "requires SM90 or SM100" (B11).
   * ``auto`` for any of the three backend flags: SGLang treats "Blackwell" as CC >= 10 and its automatic
     choice has picked SM100-only kernels on SM120 (B12), so on CC 12.x every backend is explicit.

   Values not on the allow-list for CC 12.x are refused too, naming the allowed ones; other compute
   capabilities are not restricted here (SGLang's own checks apply).
3. :func:`validate_args` checks every rendered flag and choice against the *installed* SGLang's argument parser
   as recorded by :func:`parser_spec_from_actions` (argparse actions) or :func:`parse_help_text`
   (``launch_server --help``), following argparse's rules (exact long option, or an unambiguous prefix when
   ``allow_abbrev`` is on; ``--flag=value``; switches take no value).

Errors are :class:`FlagError` whose message names the flag, the value and the SGLang revision.
"""

from __future__ import annotations

import json
import re

# Flags whose value picks a kernel backend; on CC 12.x each must be explicit and on the allow-list.
BACKEND_FLAGS = (
    "--attention-backend",
    "--prefill-attention-backend",
    "--decode-attention-backend",
    "--fp4-gemm-backend",
    "--moe-runner-backend",
)

# Why a value is refused on compute capability 12.x (sglang-sm120.md section 7; field reports B06/B11/B12).
SM12X_REJECTED = {
    "--attention-backend": {
        "fa3": "FA3 (sgl-kernel flash_ops) ships sm_90a cubins only; SGLang requires SM80-SM90 for it "
               "(no kernel image / invalid argument on SM120, field report B06)",
        "trtllm_mha": "FlashInfer's TRT-LLM FMHA runner accepts SM100/103/107 only (sglang#9140)",
        "trtllm_mla": "FlashInfer's TRT-LLM MLA runner accepts SM100/103/107 only; runtime 'Unsupported "
                      "architecture' on SM12x (sglang#24633, flashinfer#3263)",
        "cutlass_mla": "CUTLASS MLA kernels are built for SM100 only",
        "flashmla": "FlashMLA is compiled for sm_90a/sm_100a only (sgl-kernel cmake/flashmla.cmake)",
    },
    "--fp4-gemm-backend": {
        "flashinfer_trtllm": "FlashInfer mm_fp4 backend 'trtllm' supports CC 100/103/107 only "
                             "(\"mm_fp4 does not support backend 'trtllm' with capability 120\", sglang#35739)",
        "trtllm": "pre-#17309 spelling of flashinfer_trtllm: CC 100/103/107 only",
        "flashinfer_cutedsl": "FlashInfer mm_fp4 backend 'cute-dsl' supports CC 100/103/107 only",
    },
    "--moe-runner-backend": {
        "flashinfer_trtllm": "trtllm-gen MoE kernels are SM100-only (SGLang logs this and NotImplementedError "
                             "follows, field report B12)",
        "flashinfer_trtllm_routed": "trtllm-gen MoE kernels are SM100-only",
        "flashinfer_cutedsl": "CuTe-DSL MoE uses tcgen05 (SM100-only); admissible_archs exclude sm_120a "
                              "(flashinfer#2723)",
        "flashinfer_mxfp4": "raises NotImplementedError('requires SM90 or SM100') on SM120 (field report B11)",
        "deep_gemm": "DeepGEMM has no SM120 kernels",
    },
}
SM12X_REJECTED["--prefill-attention-backend"] = SM12X_REJECTED["--attention-backend"]
SM12X_REJECTED["--decode-attention-backend"] = SM12X_REJECTED["--attention-backend"]

# Values known to run on SM120 (sglang-sm120.md section 7 table).
SM12X_ALLOWED = {
    "--attention-backend": ("flashinfer", "triton", "torch_native", "flex_attention"),
    "--fp4-gemm-backend": ("flashinfer_cutlass", "flashinfer_cudnn", "cutlass", "marlin"),
    "--moe-runner-backend": ("flashinfer_cutlass", "cutlass", "triton", "triton_kernel", "marlin"),
}
SM12X_ALLOWED["--prefill-attention-backend"] = SM12X_ALLOWED["--attention-backend"]
SM12X_ALLOWED["--decode-attention-backend"] = SM12X_ALLOWED["--attention-backend"]

# Flags whose value must never be written into argv (secrets go through the root-only EnvironmentFile and are
# referenced as ${VAR}, which systemd expands at exec time).
SECRET_FLAGS = ("--api-key", "--admin-api-key")


def secret_flag_for(flag):
    """The secret flag that ``flag`` names exactly or as an argparse abbreviation (``--api-k``), else None.

    argparse (``allow_abbrev``, the default in SGLang's parser) accepts any unambiguous prefix of a long option, so
    the guard must refuse prefixes too; :func:`validate_args` repeats the check against the installed parser's
    canonical option.
    """
    name = str(flag).split("=", 1)[0]
    if not name.startswith("--") or len(name) < 3:
        return None
    for secret in SECRET_FLAGS:
        if secret.startswith(name):
            return secret
    return None


class FlagError(ValueError):
    """A rendered flag or value is not acceptable (message names the flag, value and revision)."""

    def __init__(self, message, flag=None, value=None, revision=None):
        super(FlagError, self).__init__(message)
        self.flag = flag
        self.value = value
        self.revision = revision


def parse_cc(cc):
    """``"12.0"`` / ``12.0`` / ``"sm_120a"`` / ``(12, 0)`` / ``"120"`` -> ``(12, 0)``; None stays None.

    :raises ValueError: on anything else.
    """
    if cc is None or cc == "":
        return None
    if isinstance(cc, (tuple, list)):
        return int(cc[0]), int(cc[1]) if len(cc) > 1 else 0
    text = str(cc).strip().lower()
    match = re.match(r"^(?:sm_?|compute_)?(\d+)\.(\d+)$", text)
    if match:
        return int(match.group(1)), int(match.group(2))
    match = re.match(r"^(?:sm_?|compute_)?(\d{2,3})[af]?$", text)
    if match:
        digits = match.group(1)
        return int(digits[:-1]), int(digits[-1])
    raise ValueError("not a compute capability: %r (expected e.g. '12.0')" % (cc,))


def check_backends(argv, cc):
    """Apply the CC-keyed allow-list to the backend flags of ``argv``.

    :param argv: list of argv tokens (``--flag value`` or ``--flag=value``).
    :param cc: compute capability (anything :func:`parse_cc` accepts); None skips the check.
    :returns: dict ``{flag: value}`` of the backend flags found.
    :raises FlagError: on CC 12.x for ``auto``, a value with a known reason to fail, or a value not on the
        allow-list.
    """
    found = {}
    pairs = _pairs(argv)
    for flag, value in pairs:
        if flag in BACKEND_FLAGS:
            found[flag] = value
    major_minor = parse_cc(cc)
    if major_minor is None or major_minor[0] != 12:
        return found
    label = "compute capability %d.%d" % major_minor
    for flag, value in found.items():
        if value is None or value == "":
            raise FlagError("%s needs a value" % flag, flag=flag, value=value)
        if value == "auto":
            raise FlagError(
                "%s auto is refused on %s: SGLang's automatic choice has picked SM100-only kernels on SM120 "
                "(field report B12); set it explicitly to one of: %s"
                % (flag, label, ", ".join(SM12X_ALLOWED[flag])), flag=flag, value=value)
        reason = SM12X_REJECTED.get(flag, {}).get(value)
        if reason:
            raise FlagError("%s %s is not supported on %s: %s. Use one of: %s"
                            % (flag, value, label, reason, ", ".join(SM12X_ALLOWED[flag])),
                            flag=flag, value=value)
        if value not in SM12X_ALLOWED[flag]:
            raise FlagError("%s %s is not on the %s allow-list (%s)"
                            % (flag, value, label, ", ".join(SM12X_ALLOWED[flag])), flag=flag, value=value)
    return found


def _pairs(argv):
    """Split argv into ``(flag, value-or-None)`` pairs; a token not starting with ``--`` is a value."""
    pairs = []
    i = 0
    tokens = [str(t) for t in argv]
    while i < len(tokens):
        tok = tokens[i]
        if not tok.startswith("-"):
            raise FlagError("stray value %r without a flag in the rendered arguments" % tok, value=tok)
        if "=" in tok and tok.startswith("--"):
            flag, value = tok.split("=", 1)
            pairs.append((flag, value))
            i += 1
            continue
        values = []
        j = i + 1
        while j < len(tokens) and not _looks_like_flag(tokens[j]):
            values.append(tokens[j])
            j += 1
        pairs.append((tok, values[0] if len(values) == 1 else (values or None)))
        i = j
    return pairs


def _looks_like_flag(tok):
    # Negative numbers are values, not flags (argparse treats them the same way when no option looks numeric).
    return tok.startswith("-") and not re.match(r"^-\d", tok)


def _fmt_number(value):
    if isinstance(value, float):
        text = repr(value)
        return text[:-2] if text.endswith(".0") else text
    return str(value)


# FlashInfer prefill has no kernel for head dims below this, and SGLang's automatic choice picks FlashInfer anyway:
# the scheduler aborts with -9, which reads like an OOM kill (field report S19).
SMALL_HEAD_DIM = 64


def attention_backend_for(settings):
    """``--attention-backend``: the operator's choice when set (also through ``extra_args``, which then render it);
    otherwise ``triton`` for a checkpoint whose ``head_dim`` is below :data:`SMALL_HEAD_DIM` (S19), else None
    (SGLang chooses)."""
    chosen = settings.get("attention_backend")
    if chosen:
        return chosen
    extra = [str(t).split("=", 1)[0] for t in settings.get("extra_args") or []]
    head_dim = settings.get("head_dim")
    if "--attention-backend" in extra or head_dim in (None, ""):
        return None
    return "triton" if int(head_dim) < SMALL_HEAD_DIM else None


def render_server_args(settings):
    """Render the launch_server argv from the role's settings.

    :param settings: dict with keys ``model_path`` (required), ``served_model_name``, ``host``, ``port``,
        ``tp_size``, ``mem_fraction_static`` (0 < x < 1, None = SGLang's automatic value), ``context_length``
        (tokens, None = model default), ``enable_metrics`` (bool), ``attention_backend`` (empty: ``triton`` when
        ``head_dim``, the checkpoint's, is below 64, S19), ``fp4_gemm_backend``,
        ``moe_runner_backend``, ``kv_cache_dtype``, ``extra_args`` (list of tokens appended
        verbatim, e.g. ``sglang_stack_service_args``), and for a server over several hosts ``nnodes`` (rendered only
        when > 1), ``node_rank`` (0..nnodes-1) and ``dist_init_addr`` (rank 0's ``host:port``);
        ``quantization`` (``--quantization``, from the checkpoint's canonical layout, N12), ``tool_call_parser``,
        ``reasoning_parser``, ``speculative`` (dict ``algorithm``, ``draft_model_path``, ``num_steps``,
        ``eagle_topk``, ``num_draft_tokens``, ``draft_model_quantization``; N05/N06) with the context for
        :func:`spec_decode_findings` and ``speculative_known_crash_action`` (``warn``/``fail``).
        Empty strings and None mean "not rendered".
    :returns: list of str.
    :raises FlagError: on a missing model path, a port outside 1-65535, a TP size < 1, a fraction outside (0, 1),
        a secret flag (or an abbreviation of one) in ``extra_args``, a flag rendered twice, or ``nnodes`` > 1 without
        ``dist_init_addr`` / with a rank outside 0..nnodes-1.
    """
    model_path = settings.get("model_path")
    if not model_path:
        raise FlagError("model_path is required", flag="--model-path")
    argv = ["--model-path", str(model_path)]

    def add(flag, value):
        if value is None or value == "":
            return
        argv.extend([flag, _fmt_number(value)])

    add("--served-model-name", settings.get("served_model_name"))
    add("--host", settings.get("host"))
    port = settings.get("port")
    if port is not None:
        if not 1 <= int(port) <= 65535:
            raise FlagError("--port %s is outside 1-65535" % port, flag="--port", value=port)
        add("--port", int(port))
    tp_size = settings.get("tp_size")
    if tp_size is not None:
        if int(tp_size) < 1:
            raise FlagError("--tp-size must be >= 1, got %s" % tp_size, flag="--tp-size", value=tp_size)
        add("--tp-size", int(tp_size))
    fraction = settings.get("mem_fraction_static")
    if fraction is not None and fraction != "":
        if not 0.0 < float(fraction) < 1.0:
            raise FlagError("--mem-fraction-static must be in (0, 1), got %s" % fraction,
                            flag="--mem-fraction-static", value=fraction)
        add("--mem-fraction-static", float(fraction))
    context_length = settings.get("context_length")
    if context_length is not None and context_length != "":
        if int(context_length) < 1:
            raise FlagError("--context-length must be >= 1", flag="--context-length", value=context_length)
        add("--context-length", int(context_length))
    nnodes = int(settings.get("nnodes") or 1)
    if nnodes > 1:
        # one server over several hosts (module_utils/_multinode.plan_multinode checked ranks, TP and the address)
        if not settings.get("dist_init_addr"):
            raise FlagError("--nnodes %d needs --dist-init-addr (rank 0's host:port)" % nnodes, flag="--dist-init-addr")
        rank = int(settings.get("node_rank") or 0)
        if not 0 <= rank < nnodes:
            raise FlagError("--node-rank %d is outside 0..%d" % (rank, nnodes - 1), flag="--node-rank", value=rank)
        add("--nnodes", nnodes)
        add("--node-rank", rank)
        add("--dist-init-addr", settings.get("dist_init_addr"))
    add("--attention-backend", attention_backend_for(settings))
    add("--fp4-gemm-backend", settings.get("fp4_gemm_backend"))
    add("--moe-runner-backend", settings.get("moe_runner_backend"))
    add("--kv-cache-dtype", settings.get("kv_cache_dtype"))
    add("--quantization", settings.get("quantization"))
    add("--tool-call-parser", settings.get("tool_call_parser"))
    add("--reasoning-parser", settings.get("reasoning_parser"))
    _render_speculative(settings, add)
    if settings.get("enable_metrics"):
        argv.append("--enable-metrics")
    if settings.get("api_key_env"):
        raise FlagError("api_key_env is gone: the API key reaches SGLang through a systemd credential and the "
                        "launcher, never through argv (docs/service.md)", flag="--api-key")
    extra = [str(t) for t in (settings.get("extra_args") or [])]
    for flag, _value in _pairs(extra):
        name = flag.split("=", 1)[0]
        secret = secret_flag_for(name)
        if secret:
            raise FlagError("%s (%s) must not be in extra args: its value would be world-readable in the unit file "
                            "and in argv; set sglang_service_api_key (vault), which reaches SGLang as a systemd "
                            "credential" % (name, secret), flag=name)
    argv.extend(extra)
    seen = set()
    for flag, _value in _pairs(argv):
        if flag in seen:
            raise FlagError("%s is rendered twice (check extra args against the role's own settings)" % flag,
                            flag=flag)
        seen.add(flag)
    return argv


# --- speculative decoding (field reports N05, N06; docs/field-reports.md) ---------------------------------------------
SPEC_FLAGS = (
    ("algorithm", "--speculative-algorithm"),
    ("draft_model_path", "--speculative-draft-model-path"),
    ("num_steps", "--speculative-num-steps"),
    ("eagle_topk", "--speculative-eagle-topk"),
    ("num_draft_tokens", "--speculative-num-draft-tokens"),
    ("draft_model_quantization", "--speculative-draft-model-quantization"),
)
SPEC_SETTINGS = frozenset(key for key, _flag in SPEC_FLAGS)
# Algorithms that load a separate draft checkpoint (NEXTN/MTP use the target's own layers, NGRAM none).
DRAFT_MODEL_ALGORITHMS = ("EAGLE", "EAGLE3", "STANDALONE")

# Combinations reported to crash the whole server (illegal memory access on every TP rank, N06). Each entry:
# report, algorithms, a predicate over the settings and a text. Sources: the reports named.
SPEC_CRASH_REPORTS = (
    {"report": "sglang#34239", "algorithms": ("NEXTN", "EAGLE", "EAGLE3", "MTP"),
     "when": lambda s: s.get("native_context_length") and s.get("context_length") and
     int(s["context_length"]) > int(s["native_context_length"]) - int(s["speculative"].get("num_draft_tokens") or 0),
     "text": "context length within the draft tokens of the native limit: draft KV is written past the context "
             "(NEXTN with Qwen3.5-397B at 262144 crashed with an illegal memory access)"},
    {"report": "sglang#24361", "algorithms": ("NGRAM",),
     "when": lambda s: s.get("cc_major") == 12 and str(s.get("attention_backend") or "") == "flashinfer",
     "text": "NGRAM speculative decoding with the flashinfer prefill replay crashed with an illegal memory access "
             "on an RTX PRO 6000 (sm_120)"},
    {"report": "vllm#40756", "algorithms": ("NEXTN", "MTP", "EAGLE", "EAGLE3"),
     "when": lambda s: str(s.get("cuda_version") or "").startswith("13.2") and
     str(s.get("driver_version") or "").startswith("595."),
     "text": "MTP on long sequences crashed with CUDA 13.2 and driver 595 (illegal memory access)"},
)


def spec_decode_findings(settings):
    """Speculative-decoding combinations reported to crash, for the rendered settings.

    :param settings: render settings; reads ``speculative`` (dict), ``context_length``, ``native_context_length``
        (the checkpoint's limit), ``cc_major``, ``attention_backend``, ``cuda_version``, ``driver_version``.
    :returns: list of ``{report, message}`` (empty when speculative decoding is off or nothing matches).
    """
    spec = settings.get("speculative") or {}
    algorithm = str(spec.get("algorithm") or "").upper()
    if not algorithm:
        return []
    view = dict(settings, speculative=spec)
    found = []
    for entry in SPEC_CRASH_REPORTS:
        if algorithm in entry["algorithms"] and entry["when"](view):
            found.append({"report": entry["report"],
                          "message": "spec_decode_crash risk (%s, field report N06): --speculative-algorithm %s: %s; "
                                     "fallback: sglang_service_speculative: {} (no speculative flags) or fewer draft "
                                     "tokens" % (entry["report"], algorithm, entry["text"])})
    return found


def _render_speculative(settings, add):
    spec = settings.get("speculative") or {}
    unknown = sorted(set(spec) - SPEC_SETTINGS)
    if unknown:
        raise FlagError("speculative settings %s are not known (use %s)" % (", ".join(unknown),
                                                                            ", ".join(sorted(SPEC_SETTINGS))),
                        flag="--speculative-algorithm")
    algorithm = str(spec.get("algorithm") or "").upper()
    if not algorithm:
        if any(spec.get(k) for k in SPEC_SETTINGS):
            raise FlagError("speculative settings without an algorithm", flag="--speculative-algorithm")
        return
    if algorithm in DRAFT_MODEL_ALGORITHMS and not spec.get("draft_model_path"):
        raise FlagError("--speculative-algorithm %s needs draft_model_path" % algorithm,
                        flag="--speculative-draft-model-path")
    if spec.get("draft_model_path") and settings.get("quantization") and not spec.get("draft_model_quantization"):
        raise FlagError("draft_quant_unspecified: the target is quantised (--quantization %s) and the draft model's "
                        "quantization is not known: SGLang would copy --quantization to the draft ('Cannot find the "
                        "config file for %s', field report N05); let the checkpoint facts read the draft, or set "
                        "draft_model_quantization (unquant for a BF16 draft)"
                        % (settings["quantization"], settings["quantization"]),
                        flag="--speculative-draft-model-quantization")
    spec = dict(spec, algorithm=algorithm)
    for key, flag in SPEC_FLAGS:
        add(flag, spec.get(key))
    for finding in spec_decode_findings(settings):
        if settings.get("speculative_known_crash_action") == "fail":
            raise FlagError(finding["message"], flag="--speculative-algorithm", value=algorithm)


def check_draft_quantization_choice(argv, spec, revision="unknown revision"):
    """FAIL ``draft_quant_unspecified`` when the rendered draft quantization is not a choice of this SGLang (N05)."""
    value = dict((f, v) for f, v in _pairs(argv)).get("--speculative-draft-model-quantization")
    if value is None:
        return None
    entry = (spec.get("options") or {}).get("--speculative-draft-model-quantization")
    if entry is None:
        raise FlagError("draft_quant_unspecified: %s has no --speculative-draft-model-quantization; the draft would "
                        "inherit --quantization (field report N05)" % revision,
                        flag="--speculative-draft-model-quantization", revision=revision)
    if entry.get("choices") is not None and value not in entry["choices"]:
        raise FlagError("draft_quant_unspecified: --speculative-draft-model-quantization %s is not a choice of %s "
                        "(choices: %s)" % (value, revision, ", ".join(entry["choices"])),
                        flag="--speculative-draft-model-quantization", value=value, revision=revision)
    return value


def _get(action, key, default=None):
    if isinstance(action, dict):
        return action.get(key, default)
    return getattr(action, key, default)


def parser_spec_from_actions(actions, prog=None, allow_abbrev=True):
    """Describe argparse actions as a JSON-safe parser spec.

    :param actions: iterable of :class:`argparse.Action` (``parser._actions``) or of the dicts that
        :data:`INTROSPECT_SCRIPT` prints for them (keys ``option_strings``, ``dest``, ``nargs``, ``choices``,
        ``default``, ``type``).
    :returns: ``{"allow_abbrev": bool, "prog": str, "options": {option_string: {"dest", "nargs", "takes_value",
        "choices", "default", "type", "aliases"}}}`` with ``choices`` a list of str or None.
    """
    options = {}
    for action in actions:
        strings = list(_get(action, "option_strings") or [])
        if not strings:
            continue
        nargs = _get(action, "nargs")
        choices = _get(action, "choices")
        if choices is not None:
            choices = [str(c) for c in choices]
        typ = _get(action, "type")
        typ_name = typ if isinstance(typ, str) or typ is None else getattr(typ, "__name__", repr(typ))
        default = _get(action, "default")
        if not isinstance(default, (str, int, float, bool, type(None))):
            default = repr(default)
        entry = {
            "dest": _get(action, "dest"),
            "nargs": nargs if isinstance(nargs, (int, type(None))) else str(nargs),
            "takes_value": nargs != 0,
            "choices": choices,
            "default": default,
            "type": typ_name,
            "aliases": strings,
        }
        for opt in strings:
            options[opt] = entry
    return {"allow_abbrev": bool(allow_abbrev), "options": options, "prog": prog}


# Runs under the *service venv's* python (not Ansible's): imports the installed SGLang, builds the same
# argparse parser that ``prepare_server_args`` builds (``ServerArgs.add_cli_args``) and prints its actions, the
# version and the commit as JSON. argv[1] is a JSON list of module names that may be replaced by stand-in modules
# when (and only when) importing them fails, e.g. ``torchvision`` on a CPU-only sandbox whose PyPI torchvision needs
# CUDA torch; the stand-ins are reported in ``stubbed_modules``. Argument parsing never calls into them (they are
# imported by multimodal processors and image helpers at module level).
# - They apply to ``import sglang`` as well as to the parser's module: from 2026-08 SGLang's package itself imports
#   torchvision (sglang/__init__.py -> sglang.srt.utils.common).
# - A stand-in is a package with a module spec, served for every submodule (torchvision.transforms.v2.functional),
#   whose attributes are classes whose attributes are classes again (InterpolationMode.NEAREST_EXACT), version
#   "0.0.0" (older than any release: version-gated code takes its oldest path). Probes then agree with imports:
#   transformers 5 asks ``importlib.util.find_spec`` whether torchvision is there, and SGLang's parser module
#   registers image processors whose transformers class needs it (AutoImageProcessor), so a module that imports
#   but looks absent would fail the parser all the same.
INTROSPECT_SCRIPT = r"""
import argparse, importlib, importlib.machinery, json, os, subprocess, sys, types
stub_names = json.loads(sys.argv[1]) if len(sys.argv) > 1 else []
out = {"method": None, "stubbed_modules": [], "import_error": None, "actions": None}

class _StubType(type):
    def __getattr__(cls, name):
        if name.startswith("__"):
            raise AttributeError(name)
        value = _StubType(name, (), {})
        setattr(cls, name, value)
        return value

class _Stub(types.ModuleType):
    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        value = _StubType(name, (), {})
        setattr(self, name, value)
        return value

class _StubFinder(object):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in out["stubbed_modules"]:
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
        return None

    def create_module(self, spec):
        return _Stub(spec.name)

    def exec_module(self, module):
        module.__path__ = []
        if "." not in module.__name__:
            module.__version__ = "0.0.0"

sys.meta_path.insert(0, _StubFinder())

def _import(name):
    for attempt in range(len(stub_names) + 1):
        try:
            return importlib.import_module(name)
        except Exception as exc:
            missing = getattr(exc, "name", None)
            root = (missing or "").split(".")[0]
            broken = [n for n in stub_names if n == root or (root == "" and n in str(exc))]
            if not broken or broken[0] in out["stubbed_modules"]:
                raise
            for key in [k for k in list(sys.modules) if k == broken[0] or k.startswith(broken[0] + ".")]:
                del sys.modules[key]
            for key in [k for k in list(sys.modules) if k.startswith("sglang")]:
                del sys.modules[key]
            out["stubbed_modules"].append(broken[0])
    raise RuntimeError("unreachable")

try:
    sglang = _import("sglang")
    out["version"] = getattr(sglang, "__version__", None)
    out["package_dir"] = os.path.dirname(os.path.abspath(sglang.__file__))
except Exception as exc:
    out["import_error"] = "import sglang: %s: %s" % (type(exc).__name__, exc)
    print(json.dumps(out)); sys.exit(0)

commit, source = None, None
try:
    from sglang import _version as _v
    commit = getattr(_v, "__commit_id__", None)
    source = "sglang._version" if commit else None
except Exception:
    pass
if not commit:
    try:
        from importlib import metadata
        dist = metadata.distribution("sglang")
        raw = dist.read_text("direct_url.json")
        if raw:
            info = json.loads(raw)
            commit = (info.get("vcs_info") or {}).get("commit_id")
            source = "direct_url.json vcs_info" if commit else None
            url = info.get("url", "")
            if not commit and url.startswith("file://"):
                path = url[len("file://"):]
                res = subprocess.run(["git", "-C", path, "rev-parse", "HEAD"], capture_output=True, text=True)
                if res.returncode == 0:
                    commit, source = res.stdout.strip(), "git rev-parse in %s" % path
    except Exception:
        pass
if not commit:
    try:
        res = subprocess.run(["git", "-C", out["package_dir"], "rev-parse", "HEAD"], capture_output=True, text=True)
        if res.returncode == 0:
            commit, source = res.stdout.strip(), "git rev-parse in %s" % out["package_dir"]
    except Exception:
        pass
out["commit"], out["commit_source"] = commit, source

try:
    sa = _import("sglang.srt.server_args")
    parser = argparse.ArgumentParser()
    sa.ServerArgs.add_cli_args(parser)
    actions = []
    for a in parser._actions:
        choices = list(a.choices) if a.choices is not None else None
        default = a.default if isinstance(a.default, (str, int, float, bool, type(None))) else repr(a.default)
        typ = getattr(a.type, "__name__", None) if a.type is not None else None
        actions.append({"option_strings": list(a.option_strings), "dest": a.dest,
                        "nargs": a.nargs if isinstance(a.nargs, (int, type(None))) else str(a.nargs),
                        "choices": [str(c) for c in choices] if choices is not None else None,
                        "default": default, "type": typ})
    out["actions"] = actions
    out["allow_abbrev"] = parser.allow_abbrev
    out["method"] = "ServerArgs.add_cli_args"
except Exception as exc:
    out["import_error"] = "sglang.srt.server_args: %s: %s" % (type(exc).__name__, exc)
print(json.dumps(out))
"""


_HELP_OPT_RE = re.compile(
    r"(?<![\w-])(--?[A-Za-z0-9][\w-]*)"
    r"(?:[ =](?P<arg>\{[^}]*\}|\[[^\]]*\]|[A-Z][A-Z0-9_]*(?:\s\[[^\]]*\])*))?")


def run_bounded(module, argv, timeout, environ_update=None):
    """``module.run_command(argv)`` from ``/`` with Python warnings off, under coreutils ``timeout`` when present.

    :returns: ``(rc, stdout, stderr)``; rc 124 when the time ran out.
    """
    timeout_bin = module.get_bin_path("timeout")
    prefix = [timeout_bin, str(timeout)] if timeout_bin else []
    env = dict({"PYTHONWARNINGS": "ignore"}, **(environ_update or {}))
    # tool output (--help text, JSON, tracebacks): bytes that are not UTF-8 are replaced, never fatal
    return module.run_command(prefix + list(argv), environ_update=env, cwd="/", check_rc=False, errors="replace")


def run_introspection(module, python, script, arg, timeout):
    """Run a parser-introspection ``script`` (:data:`INTROSPECT_SCRIPT`, ``_gateway.INTROSPECT_SCRIPT``) in a venv.

    The venv's ``python`` gets ``-c script json(arg)`` (docs/architecture.md, "Running code in the target venv"),
    from ``/``, with warnings off and bounded by coreutils ``timeout`` when present, so a hanging import cannot hang
    the play.

    :param module: the AnsibleModule (``run_command``, ``get_bin_path``).
    :returns: ``(rc, stdout, stderr, data)``; ``data`` is the JSON of the last stdout line, None when there is none.
    """
    rc, out, err = run_bounded(module, [python, "-c", script, json.dumps(arg)], timeout)
    try:
        data = json.loads(out.strip().splitlines()[-1])
    except (ValueError, IndexError):
        data = None
    return rc, out, err, data


def flag_table(spec):
    """``{option: {"takes_value", "choices"}}`` of a parser spec, sorted by option (the modules' ``flags`` result)."""
    return dict((opt, {"takes_value": e["takes_value"], "choices": e["choices"]})
                for opt, e in sorted(spec["options"].items()))


def parse_help_text(text):
    """Build a parser spec from argparse ``--help`` output (the fallback when ServerArgs cannot be imported).

    Reads the option-invocation lines of argparse's "options:" section, e.g.
    ``  --model-path MODEL_PATH, --model MODEL_PATH`` or ``  --kv-cache-dtype {auto,fp8_e5m2,bf16}``: a metavar
    or ``{choices}`` after the option means it takes a value. Help prose is ignored (argparse indents it to the
    help column, 24 spaces by default, deeper than the 2-space invocation lines).

    :returns: the same shape as :func:`parser_spec_from_actions`; ``default``/``type``/``dest`` are None.
    """
    options = {}
    lines = (text or "").splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        stripped = line.lstrip(" ")
        indent = len(line) - len(stripped)
        if not stripped.startswith("-") or indent < 1 or indent > 8:
            i += 1
            continue
        # argparse prints each invocation on one line (HelpFormatter never wraps it); help prose follows on
        # the same line after two or more spaces, or on the next lines at the help column.
        invocation = stripped
        j = i + 1
        # Cut off help prose that argparse puts on the same line after two+ spaces.
        invocation = re.split(r"\s{2,}", invocation, maxsplit=1)[0]
        strings = []
        takes_value = False
        optional = False
        choices = None
        for part in invocation.split(", "):
            match = _HELP_OPT_RE.match(part.strip())
            if not match:
                continue
            strings.append(match.group(1))
            arg = match.group("arg")
            if arg:
                takes_value = True
                if arg.startswith("["):
                    optional = True  # nargs="?": "--flag [METAVAR]"
                    arg = arg[1:-1]
                braces = re.match(r"^\{([^}]*)\}", arg)
                if braces:
                    choices = [c for c in braces.group(1).split(",") if c != ""]
        if strings:
            entry = {"dest": None, "nargs": ("?" if optional else None) if takes_value else 0,
                     "takes_value": takes_value,
                     "choices": choices, "default": None, "type": None, "aliases": strings}
            for opt in strings:
                options[opt] = entry
        i = j
    return {"allow_abbrev": True, "options": options, "prog": None}


def resolve_option(spec, flag):
    """Find the parser option for ``flag`` the way argparse does.

    :returns: ``(canonical_option_string, entry)``.
    :raises FlagError: when the flag is unknown or an ambiguous abbreviation.
    """
    options = spec.get("options") or {}
    if flag in options:
        return flag, options[flag]
    if flag.startswith("--") and spec.get("allow_abbrev", True):
        matches = sorted(set(o for o in options if o.startswith(flag) and o.startswith("--")))
        dests = set(id(options[o]) for o in matches)
        if len(dests) == 1:
            return matches[0], options[matches[0]]
        if len(dests) > 1:
            raise FlagError("%s is an ambiguous abbreviation (%s)" % (flag, ", ".join(matches)), flag=flag)
    raise FlagError("unknown flag %s" % flag, flag=flag)


def validate_args(argv, spec, revision="unknown revision"):
    """Validate every flag and value in ``argv`` against a recorded parser spec.

    Values that are systemd environment references (``${NAME}``) are accepted for any value-taking flag
    without choices. Multi-value flags (``nargs`` ``+``/``*`` or an int > 1) accept several values.

    :param argv: rendered argv tokens.
    :param spec: from :func:`parser_spec_from_actions` or :func:`parse_help_text`.
    :param revision: human-readable SGLang revision, e.g. ``"sglang 0.5.9 (commit 1a2b3c4)"``.
    :returns: list of ``{"flag", "option", "value"}`` (``option`` = the parser's canonical string).
    :raises FlagError: naming the flag, the value, the allowed choices and ``revision``.
    """
    checked = []
    seen = {}
    for flag, value in _pairs(argv):
        try:
            option, entry = resolve_option(spec, flag)
        except FlagError as exc:
            raise FlagError("%s: %s does not know this flag" % (exc, revision),
                            flag=flag, value=value, revision=revision)
        nargs = entry.get("nargs")
        if not entry.get("takes_value"):
            if value is not None:
                raise FlagError("%s is a switch in %s and takes no value (got %r)" % (flag, revision, value),
                                flag=flag, value=value, revision=revision)
        else:
            if value is None:
                if nargs not in ("?", "*"):
                    raise FlagError("%s needs a value in %s" % (flag, revision), flag=flag,
                                    revision=revision)
            values = value if isinstance(value, list) else ([] if value is None else [value])
            multi = nargs in ("+", "*") or (isinstance(nargs, int) and nargs > 1)
            if len(values) > 1 and not multi:
                raise FlagError("%s takes one value in %s, got %s" % (flag, revision, values), flag=flag,
                                value=value, revision=revision)
            choices = entry.get("choices")
            if choices is not None:
                for one in values:
                    if one not in choices:
                        raise FlagError(
                            "%s %s is not a valid choice in %s (choices: %s)"
                            % (flag, one, revision, ", ".join(choices)),
                            flag=flag, value=one, revision=revision)
        canonical = sorted(entry.get("aliases") or [option])[0]
        key = entry.get("dest") or canonical
        if option in SECRET_FLAGS or any(a in SECRET_FLAGS for a in entry.get("aliases") or []):
            values = value if isinstance(value, list) else [value]
            if not all(isinstance(v, str) and re.match(r"^\$\{[A-Za-z_][A-Za-z0-9_]*\}$", v) for v in values):
                raise FlagError("%s resolves to %s in %s: a secret flag must not carry a literal value in argv"
                                % (flag, option, revision), flag=flag, revision=revision)
        if key in seen:
            raise FlagError("%s and %s are the same option (%s) in %s: rendered twice (check extra args against "
                            "the role's own settings)" % (seen[key], flag, option, revision),
                            flag=flag, value=value, revision=revision)
        seen[key] = flag
        checked.append({"flag": flag, "option": option, "value": value})
    return checked


def merge_extra_args(computed, user):
    """Merge preflight's computed safety flags with the inventory's ``extra_args``.

    :param computed: argv tokens computed by preflight (e.g. ``["--disable-custom-all-reduce"]``).
    :param user: argv tokens from the inventory.
    :returns: ``{"args": [...], "overridden": [flag, ...]}``: every computed flag the user does not give, then the
        user's tokens; ``overridden`` lists the computed flags whose user value replaced the computed one (exact
        flag names; abbreviations are caught later as duplicates by :func:`validate_args`).
    """
    user_pairs = _pairs([str(t) for t in (user or [])])
    user_flags = set(flag.split("=", 1)[0] for flag, _v in user_pairs)
    args, overridden = [], []
    for flag, value in _pairs([str(t) for t in (computed or [])]):
        name = flag.split("=", 1)[0]
        if name in user_flags:
            overridden.append(name)
            continue
        args.append(flag)
        if "=" not in flag and value is not None:
            args.extend(value if isinstance(value, list) else [value])
    return {"args": args + [str(t) for t in (user or [])], "overridden": overridden}
