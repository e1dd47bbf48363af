# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang contributors
# Apache-2.0 (see LICENSE)
"""The tool-call smoke test after start (field report N08; docs/field-reports.md). Pure Python, stdlib only.

With ``--reasoning-parser qwen3 --tool-call-parser qwen3_coder`` Qwen3.5 answered ``"tool_calls": null`` and left the
``<tool_call>...</tool_call>`` markup in ``reasoning_content`` (sglang#26172, vllm#42021): agents silently never run
the tool. One request with a trivial function tells the three outcomes apart:

* ``pass``: ``choices[0].message.tool_calls`` holds a call of the function;
* ``tool_call_in_reasoning``: no ``tool_calls``, and tool-call markup in ``reasoning_content``;
* ``tool_call_unparsed``: no ``tool_calls``, and tool-call markup in ``content`` (parser missing or wrong);
* ``no_tool_call``: the model answered without calling the tool (chat template / prompt problem, not the parser);
* ``bad_response``: not an OpenAI chat-completion answer.

Tool-call markup of the families SGLang has parsers for (each parser's start token, from the SGLang parsers named):
``<tool_call>`` (qwen25, hermes, qwen3_coder), ``<function=`` (qwen3_coder), ``[TOOL_CALLS]`` (mistral),
``<|python_tag|>`` (llama3), ``<｜tool▁calls▁begin｜>`` / ``<｜tool▁call▁begin｜>`` (deepseekv3/v31),
``<|tool_calls_section_begin|>`` / ``<|tool_call_begin|>`` (kimi_k2), ``<minimax:tool_call>`` (minimax-m2),
``to=functions.`` (gpt-oss harmony), ``<tool_calls>`` / ``<|tool▁sep|>`` variants.
"""

from __future__ import annotations

import json
import re

FUNCTION = {
    "type": "function",
    "function": {
        "name": "get_current_weather",
        "description": "Get the current weather in a given location",
        "parameters": {
            "type": "object",
            "properties": {"location": {"type": "string", "description": "City and state, e.g. Boston, MA"}},
            "required": ["location"],
        },
    },
}
PROMPT = "What is the weather like in Boston, MA right now? Use the get_current_weather tool."

MARKUP_RE = re.compile(r"<tool_call>|<function=|\[TOOL_CALLS\]|<\|python_tag\|>|<｜tool▁calls?▁begin｜>|"
                       r"<\|tool_calls_section_begin\|>|<\|tool_call_begin\|>|<minimax:tool_call>|to=functions\.|"
                       r"<tool_calls>")

REMEDIES = {
    "tool_call_in_reasoning": "the tool call stayed inside the reasoning block: use an SGLang with the fix of "
                              "sglang#26172 (tool calls parsed inside <think>), or check the --reasoning-parser / "
                              "--tool-call-parser pair for this model family",
    "tool_call_unparsed": "the tool-call markup reached content unparsed: set --tool-call-parser to the model "
                          "family's parser (e.g. qwen3_coder for Qwen3.5/3-Coder, hermes/qwen25 for Qwen2.5)",
    "no_tool_call": "the model answered without a tool call: check the chat template (tools must be rendered) and "
                    "the prompt",
    "bad_response": "the server did not answer with an OpenAI chat completion: see the status and body",
    "no_tokens": "the server answered but generated nothing: see the journal of the unit and the model's chat template",
}


def request_body(model, max_tokens=512):
    """The chat-completion request of the smoke test (``tool_choice: auto`` so the tool-call parser is exercised)."""
    return {"model": model, "messages": [{"role": "user", "content": PROMPT}], "tools": [FUNCTION],
            "tool_choice": "auto", "temperature": 0, "max_tokens": int(max_tokens)}


def generation_body(model, prompt, max_tokens=512):
    """One plain chat completion (the service's smoke generation): no tools, greedy."""
    return {"model": model, "messages": [{"role": "user", "content": prompt}], "temperature": 0,
            "max_tokens": int(max_tokens)}


def generation_verdict(response, status=None):
    """Judge the smoke generation: at least one choice and one completion token."""
    if isinstance(response, (str, bytes)):
        try:
            response = json.loads(response)
        except ValueError:
            response = None
    response = response if isinstance(response, dict) else {}
    choices = response.get("choices") or []
    tokens = ((response.get("usage") or {}).get("completion_tokens")) or 0
    try:
        tokens = int(tokens)
    except (TypeError, ValueError):
        tokens = 0
    if choices and tokens > 0:
        text = str(((choices[0] or {}).get("message") or {}).get("content") or "")
        return {"verdict": "pass", "ok": True, "remedy": "", "tool_calls": [], "evidence": None,
                "message": "smoke generation ok: %d tokens: %s" % (tokens, text if len(text) <= 120 else text[:117] + "...")}
    return {"verdict": "no_tokens", "ok": False, "remedy": REMEDIES["no_tokens"], "tool_calls": [], "evidence": None,
            "message": "the smoke generation returned no tokens (HTTP %s)" % (status if status is not None else "?")}


def verdict(response, function_name=FUNCTION["function"]["name"]):
    """Judge one chat-completion response (dict, or JSON text).

    :returns: dict ``verdict`` (``pass`` or a failure name above), ``ok`` (bool), ``message``, ``remedy``,
        ``tool_calls`` (names called), ``evidence`` (the markup excerpt found, or None).
    """
    if isinstance(response, (str, bytes)):
        try:
            response = json.loads(response)
        except ValueError:
            response = None
    try:
        message = response["choices"][0]["message"]
    except (TypeError, KeyError, IndexError):
        return _result("bad_response", "no choices[0].message in the response", [], None)
    calls = message.get("tool_calls") or []
    names = [((c or {}).get("function") or {}).get("name") for c in calls]
    if calls:
        if function_name in names:
            return _result("pass", "tool call %s landed in tool_calls" % function_name, names, None)
        return _result("no_tool_call", "tool_calls holds %s, not %s" % (names, function_name), names, None)
    for field, kind in (("reasoning_content", "tool_call_in_reasoning"), ("reasoning", "tool_call_in_reasoning"),
                        ("content", "tool_call_unparsed")):
        text = message.get(field)
        if isinstance(text, str):
            match = MARKUP_RE.search(text)
            if match:
                excerpt = text[max(0, match.start() - 20):match.end() + 60]
                return _result(kind, "tool_calls is empty and the tool-call markup %r is in %s"
                               % (match.group(0), field), [], excerpt)
    return _result("no_tool_call", "tool_calls is empty and no tool-call markup in the answer (finish_reason %s)"
                   % (response["choices"][0].get("finish_reason"),), [], None)


def _result(kind, message, names, evidence):
    ok = kind == "pass"
    return {"verdict": kind, "ok": ok, "message": message, "remedy": "" if ok else REMEDIES[kind],
            "tool_calls": names, "evidence": evidence}
