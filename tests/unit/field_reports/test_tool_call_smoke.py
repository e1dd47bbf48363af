"""N08: the ``sglang_tool_call_smoke`` module against a fake OpenAI-compatible server on 127.0.0.1.

The fake server is a stand-in at the network boundary: it answers each POST to /v1/chat/completions with a recorded
response body (the sglang#26172 "before" and "after" shapes from shared/domain/field-reports-2.md, plus variants),
records the request, serves at most a few requests and stops by itself after a timeout.
"""

import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

import ansible_run
from ansible_collections.blackwell.sglang.plugins.module_utils import _tool_call


BEFORE = {"choices": [{"message": {"role": "assistant", "content": None,
                                   "reasoning_content": "<tool_call>\n<function=get_current_weather>\n<parameter=location>"
                                                        "\nBoston, MA\n</parameter>\n</function>\n</tool_call>",
                                   "tool_calls": None}, "finish_reason": "stop"}]}
AFTER = {"choices": [{"message": {"role": "assistant", "content": None, "tool_calls": [
    {"type": "function", "function": {"name": "get_current_weather", "arguments": "{\"location\": \"Boston, MA\"}"}}]},
    "finish_reason": "tool_calls"}]}
IN_CONTENT = {"choices": [{"message": {"role": "assistant", "tool_calls": [],
                                       "content": "<tool_call>\n{\"name\": \"get_current_weather\", \"arguments\": "
                                                  "{\"location\": \"Boston, MA\"}}\n</tool_call>"},
                           "finish_reason": "stop"}]}


class FakeServer(object):
    """Serves ``responses`` in order (status, body), then 503; stops after ``max_requests`` or ``timeout`` s."""

    def __init__(self, responses, max_requests=3, timeout=30.0):
        self.responses = list(responses)
        self.requests = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 (http.server API)
                length = int(self.headers.get("Content-Length") or 0)
                owner.requests.append({"path": self.path, "auth": self.headers.get("Authorization"),
                                       "body": json.loads(self.rfile.read(length) or b"{}")})
                status, body = owner.responses.pop(0) if owner.responses else (503, {"error": "no more answers"})
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.httpd = HTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.timeout = 1.0
        self.url = "http://127.0.0.1:%d/v1/chat/completions" % self.httpd.server_address[1]
        self.max_requests = max_requests
        self.timeout = timeout
        self.thread = threading.Thread(target=self._serve, daemon=True)

    def _serve(self):
        import time
        deadline = time.time() + self.timeout
        handled = 0
        while handled < self.max_requests and time.time() < deadline:
            before = len(self.requests)
            self.httpd.handle_request()
            handled += len(self.requests) - before
        self.httpd.server_close()

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.thread.join(timeout=self.timeout + 2)


def run_module(args, tmp_path):
    return ansible_run.module_file("sglang_tool_call_smoke", args, tmp_path, env={"no_proxy": "*"}, timeout=60)


@pytest.mark.parametrize("body,verdict", [(BEFORE, "tool_call_in_reasoning"), (AFTER, "pass"),
                                          (IN_CONTENT, "tool_call_unparsed")])
def test_module_against_fake_server(tmp_path, body, verdict):
    with FakeServer([(200, body)], max_requests=1) as server:
        result = run_module({"url": server.url, "model": "qwen3.5", "api_key": "s3cret", "timeout": 10}, tmp_path)
    assert result["verdict"] == verdict
    assert bool(result.get("failed")) is (verdict != "pass")
    sent = server.requests[0]
    assert sent["path"] == "/v1/chat/completions" and sent["auth"] == "Bearer s3cret"
    assert sent["body"]["tools"][0]["function"]["name"] == "get_current_weather"
    assert sent["body"]["tool_choice"] == "auto"
    assert "s3cret" not in json.dumps(result)


def test_module_reports_http_errors(tmp_path):
    with FakeServer([(400, {"error": {"message": "tools are not supported"}})], max_requests=1) as server:
        result = run_module({"url": server.url, "model": "m", "timeout": 10}, tmp_path)
    assert result["failed"] and result["verdict"] == "bad_response" and result["status"] == 400


@pytest.mark.parametrize("field,text,verdict", [
    ("reasoning_content", "I should call it. [TOOL_CALLS]get_current_weather{\"location\": \"Boston\"}",
     "tool_call_in_reasoning"),
    ("content", "<|python_tag|>{\"name\": \"get_current_weather\", \"parameters\": {\"location\": \"Boston\"}}",
     "tool_call_unparsed"),
    ("content", "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_current_weather:0",
     "tool_call_unparsed"),
    ("reasoning", "<minimax:tool_call><invoke name=\"get_current_weather\">", "tool_call_in_reasoning"),
    ("content", "It is sunny in Boston.", "no_tool_call"),
])
def test_variants_of_other_parser_families(field, text, verdict):
    message = {"role": "assistant", "tool_calls": None, field: text}
    assert _tool_call.verdict({"choices": [{"message": message, "finish_reason": "stop"}]})["verdict"] == verdict


def test_wrong_function_and_garbage():
    other = json.loads(json.dumps(AFTER))
    other["choices"][0]["message"]["tool_calls"][0]["function"]["name"] = "search"
    assert _tool_call.verdict(other)["verdict"] == "no_tool_call"
    assert _tool_call.verdict("not json")["verdict"] == "bad_response"
    assert _tool_call.verdict({"object": "error"})["verdict"] == "bad_response"
