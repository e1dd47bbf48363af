"""Network endpoints that fail on purpose, all on 127.0.0.1 (and one name under ``.invalid``, RFC 6761, that never
resolves): nothing here reaches another machine.

* :func:`closed_port`: a port nothing listens on (bound, then closed: the kernel answers RST, "connection refused").
* :class:`Silent`: a socket that listens and never accepts: the TCP handshake completes in the kernel's backlog and
  no byte ever comes back (what a hung server or a black-holing proxy does).
* :class:`Status`: an HTTP server that answers every request with one status and a small JSON body.
* :data:`NO_SUCH_HOST`: a host name that does not resolve.
"""

import http.server
import socket
import threading

NO_SUCH_HOST = "no-such-host.invalid"


def closed_port():
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    return port


class Silent(object):
    def __enter__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        return self

    def __exit__(self, *exc):
        self.sock.close()


class Status(object):
    """``with Status(500) as srv: srv.port``; ``srv.requests`` lists ``(method, path, authorization header)``."""

    def __init__(self, code, body=b'{"error": "injected"}', content_type="application/json"):
        self.code, self.body, self.content_type = code, body, content_type
        self.requests = []

    def __enter__(self):
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def answer(self):
                outer.requests.append((self.command, self.path, self.headers.get("Authorization")))
                length = int(self.headers.get("Content-Length") or 0)
                if length:
                    self.rfile.read(length)
                self.send_response(outer.code)
                self.send_header("Content-Type", outer.content_type)
                self.send_header("Content-Length", str(len(outer.body)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(outer.body)

            do_GET = do_POST = do_HEAD = do_DELETE = do_PUT = answer  # noqa: N815 (http.server API)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()


class Endpoint(object):
    """One failing endpoint for a parametrized test: ``with Endpoint(kind) as ep: ep.base`` (``http://host:port``);
    ``ep.expect`` is the phrase the failure message must hold, ``ep.host`` the host:port it must name."""

    PHRASES = {"refused": "connection refused", "silent": "no answer from", "dns": "does not resolve",
               "500": "HTTP 500", "401": "HTTP 401", "404": "HTTP 404"}

    def __init__(self, kind):
        self.kind = kind
        self.expect = self.PHRASES[kind]
        self._ctx = None

    def __enter__(self):
        if self.kind == "refused":
            self.hostport = "127.0.0.1:%d" % closed_port()
        elif self.kind == "dns":
            self.hostport = "%s:8080" % NO_SUCH_HOST
        else:
            self._ctx = Silent() if self.kind == "silent" else Status(int(self.kind))
            self.hostport = "127.0.0.1:%d" % self._ctx.__enter__().port
        self.base = "http://" + self.hostport
        return self

    def __exit__(self, *exc):
        if self._ctx is not None:
            self._ctx.__exit__(*exc)


KINDS = ["refused", "silent", "dns", "500", "401", "404"]
