# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang contributors
# Apache-2.0 (see LICENSE)
"""One shape for every failed network call of the collection's modules (Hub, gateway, readiness, smoke, load).

A failure message says, in this order: what was being done, the request (method and URL, credentials and query
values masked), what failed, the variable that sets the endpoint, and what to check::

    Hub file listing of acme/tiny@0123456789ab: GET http://127.0.0.1:9/api/models/acme/tiny/tree/0123...
    failed: connection refused (nothing listens on 127.0.0.1:9). The endpoint is set by sglang_model_hf_endpoint
    (module option endpoint). Check: the service runs there and the address and port are right.

:func:`describe` reduces an exception of urllib, ansible's ``open_url``, ``http.client``, ``socket``, ``ssl``,
httpx or huggingface_hub to ``(kind, detail)``; it walks ``reason``, ``__cause__`` and ``__context__`` because
each of those libraries wraps the socket error it got (httpx's ``ConnectError`` wraps httpcore's, which wraps the
``ConnectionRefusedError``). Kinds:

* ``refused``: nothing accepts connections on that port (``ECONNREFUSED``).
* ``dns``: the host name does not resolve (``socket.gaierror``).
* ``timeout``: no connection, or no answer, within the request's timeout.
* ``tls``: the TLS handshake or the certificate check failed.
* ``reset``: the server closed or reset the connection without an HTTP answer (often https against an http
  port, or the reverse, or a server that crashed on the request).
* ``unreachable``: no route to the host or network (``ENETUNREACH``/``EHOSTUNREACH``).
* ``http``: an HTTP answer with an error status; ``detail`` is the status (int).
* ``error``: anything else (an invalid URL, a protocol error); ``detail`` is the first line of its message.

Stdlib only; no network access of its own.
"""

from __future__ import annotations

import errno
import socket
import ssl

try:
    from urllib.parse import urlsplit, urlunsplit
except ImportError:  # pragma: no cover - Python 2 is not supported by the collection
    urlsplit = urlunsplit = None

try:
    from ansible_collections.blackwell.sglang.plugins.module_utils._inputs import mask, mask_url
except ImportError:  # pragma: no cover - imported beside _inputs.py outside the collection
    from ._inputs import mask, mask_url  # pylint: disable=import-self

KINDS = ("refused", "dns", "timeout", "tls", "reset", "unreachable", "http", "error")

_DNS_TEXT = ("name or service not known", "nodename nor servname", "temporary failure in name resolution",
             "no address associated with hostname", "getaddrinfo failed", "name does not resolve")
_TLS_TEXT = ("certificate_verify_failed", "certificate verify failed", "wrong_version_number", "wrong version number")
_RESET_NAMES = ("RemoteDisconnected", "RemoteProtocolError", "BadStatusLine", "IncompleteRead", "ReadError",
                "WriteError", "LocalProtocolError")


class NetworkError(Exception):
    """A failed network call; ``str()`` is the whole operator-facing message.

    :ivar kind: one of :data:`KINDS`. :ivar status: the HTTP status or None. :ivar url: the masked URL.
    """

    def __init__(self, message, kind="error", status=None, url=None):
        super().__init__(message)
        self.kind, self.status, self.url = kind, status, url


def show_url(url):
    """``url`` as it may appear in a message: user info masked (:func:`_inputs.mask_url`), query values dropped
    (``?...``: signed CDN URLs carry credentials there), no fragment."""
    text = "" if url is None else str(url)
    try:
        parts = urlsplit(text)
    except ValueError:
        return mask_url(text.split("?", 1)[0])
    netloc = parts.netloc
    if "@" in netloc:
        netloc = "********@" + netloc.rsplit("@", 1)[1]
    return urlunsplit((parts.scheme, netloc, parts.path, "..." if parts.query else "", ""))


def host_port(url):
    """``(host, port)`` of ``url``; the port defaults from the scheme (80/443); ``("?", None)`` when unparsable."""
    try:
        parts = urlsplit(str(url))
        port = parts.port
    except ValueError:
        return "?", None
    if port is None:
        port = {"http": 80, "https": 443}.get(parts.scheme)
    return parts.hostname or "?", port


def _chain(exc):
    """``exc`` and everything it wraps (``reason`` of URLError, ``__cause__``, ``__context__``, exception args)."""
    seen, todo = [], [exc]
    while todo and len(seen) < 16:
        item = todo.pop(0)
        if item is None or not isinstance(item, BaseException) or any(item is s for s in seen):
            continue
        seen.append(item)
        reason = getattr(item, "reason", None)
        if isinstance(reason, BaseException):
            todo.append(reason)
        todo.extend([item.__cause__, item.__context__])
        todo.extend(a for a in getattr(item, "args", ()) if isinstance(a, BaseException))
    return seen


def http_status(exc):
    """The HTTP status an exception carries (urllib's HTTPError ``code``, an httpx/huggingface_hub ``response``)."""
    for item in _chain(exc):
        code = getattr(item, "code", None)
        if isinstance(code, int) and 100 <= code <= 599 and hasattr(item, "headers"):     # urllib's HTTPError
            return code
        response = getattr(item, "response", None)
        status = getattr(response, "status_code", None)
        if isinstance(status, int) and 100 <= status <= 599:
            return status
    return None


def failed_url(exc, default=None):
    """The URL the request really went to (an httpx error's ``request.url``: a redirect to a CDN host), else
    ``default``."""
    for item in _chain(exc):
        try:
            request = getattr(item, "request", None)
        except RuntimeError:                 # httpx raises when an error has no request attached
            request = None
        url = getattr(request, "url", None)
        if url is not None:
            return str(url)
    return default


def _first_line(exc):
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def describe(exc):
    """``(kind, detail)`` of a failed request (see the module docstring); never raises."""
    chain = _chain(exc)
    status = http_status(exc)
    if status is not None and status >= 400:
        return "http", status
    for item in chain:
        if isinstance(item, socket.gaierror):
            return "dns", _first_line(item)
    for item in chain:
        if isinstance(item, (ssl.SSLError, ssl.CertificateError)):
            return "tls", _first_line(item)
    for item in chain:
        if isinstance(item, ConnectionRefusedError) or getattr(item, "errno", None) == errno.ECONNREFUSED:
            return "refused", _first_line(item)
        if getattr(item, "errno", None) in (errno.ENETUNREACH, errno.EHOSTUNREACH):
            return "unreachable", _first_line(item)
    for item in chain:
        if isinstance(item, (socket.timeout, TimeoutError)) or "Timeout" in type(item).__name__:
            return "timeout", _first_line(item)
    for item in chain:
        if isinstance(item, (ConnectionResetError, BrokenPipeError, ConnectionAbortedError)) or \
                type(item).__name__ in _RESET_NAMES:
            return "reset", _first_line(item)
    text = " ".join(_first_line(item) for item in chain).lower()
    if any(t in text for t in _DNS_TEXT):
        return "dns", _first_line(exc)
    if "connection refused" in text:
        return "refused", _first_line(exc)
    if "timed out" in text:
        return "timeout", _first_line(exc)
    if any(t in text for t in _TLS_TEXT):
        return "tls", _first_line(exc)
    return "error", _first_line(exc)


def reason_text(kind, detail, url, timeout=None):
    """What failed, in words, for :func:`message`."""
    host, port = host_port(url)
    if kind == "refused":
        return "connection refused (nothing listens on %s:%s)" % (host, port)
    if kind == "dns":
        return "the host name %s does not resolve (%s)" % (host, detail)
    if kind == "timeout":
        within = ("within %s s" % _num(timeout)) if timeout else "within the request's timeout"
        return "no answer from %s:%s %s (%s)" % (host, port, within, detail)
    if kind == "tls":
        return "TLS with %s:%s failed (%s)" % (host, port, detail)
    if kind == "reset":
        return "%s:%s closed the connection without an HTTP answer (%s)" % (host, port, detail)
    if kind == "unreachable":
        return "no route to %s (%s)" % (host, detail)
    if kind == "http":
        return "HTTP %s" % detail
    return str(detail)


def _num(value):
    try:
        return ("%g" % float(value))
    except (TypeError, ValueError):
        return str(value)


def check_text(kind, status=None, credential=None, timeout_var=None):
    """What the operator should check, for :func:`message`."""
    if kind == "refused":
        return "the service runs there and the address and port are right"
    if kind == "dns":
        return "the host name is spelled right and resolves on this host (DNS, /etc/hosts); an IP address avoids DNS"
    if kind == "timeout":
        return ("a firewall or proxy that drops the traffic, or a server that accepts but hangs%s"
                % ("; the limit is %s" % timeout_var if timeout_var else ""))
    if kind == "tls":
        return "the scheme (https against a plain-http port fails this way) and the server's certificate and CA"
    if kind == "reset":
        return "the scheme (http vs https) and the server's log"
    if kind == "unreachable":
        return "the network route (VPN, interface, address)"
    if kind == "http":
        if status in (401, 403):
            return "the credentials%s: the server refused them or none were sent" % (
                " (%s)" % credential if credential else "")
        if status == 407:
            return "the proxy's credentials (https_proxy/http_proxy)"
        if status == 404:
            return "the URL's path and the name asked for exist on that server (is it the right server?)"
        if status == 429:
            return "the server's rate limit; retry later"
        if status is not None and status >= 500:
            return "the server's own log: it failed to answer the request"
        return "the request and the server's log"
    return "the URL and the server's log"


def message(action, url, exc=None, status=None, method="GET", variable=None, credential=None, timeout=None,
            timeout_var=None, body=None, secrets=None, extra=None):
    """The failure message of one request (see the module docstring).

    :param action: what was being done, e.g. ``"Hub file listing of acme/tiny@0123456789ab"``.
    :param url: the URL asked for (the one that failed, when the exception names another, is used instead).
    :param exc: the exception, or None for an HTTP answer with ``status``.
    :param variable: the variable (and module option) that sets the endpoint.
    :param credential: the variable of the credential sent (for 401/403).
    :param timeout: seconds the request was allowed; ``timeout_var`` the variable that sets it.
    :param body: an excerpt of the answer's body (HTTP errors), kept to 200 characters.
    :param secrets: values masked anywhere in the message (tokens, keys).
    :param extra: a sentence appended (what was or was not written).
    :returns: ``(text, kind, status)``.
    """
    if exc is not None:
        kind, detail = describe(exc)
        url = failed_url(exc, url)
    else:
        kind, detail = "http", status
    if kind == "http":
        status = detail
    text = "%s: %s %s failed: %s" % (action, method, show_url(url), reason_text(kind, detail, url, timeout))
    if kind == "http" and body:
        excerpt = " ".join(str(body).split())[:200]
        if excerpt:
            text += " (%s)" % excerpt
    text += "."
    if variable:
        text += " The endpoint is set by %s." % variable
    text += " Check: %s." % check_text(kind, status, credential, timeout_var)
    if extra:
        text += " " + extra
    return mask(text, secrets), kind, status


def error(action, url, exc=None, status=None, **kwargs):
    """:class:`NetworkError` carrying :func:`message` (raise it)."""
    text, kind, status = message(action, url, exc=exc, status=status, **kwargs)
    return NetworkError(text, kind=kind, status=status, url=show_url(url))


def label(exc):
    """Short label of a failed request for counters: ``"refused"``, ``"timeout"``, ``"HTTP 503"``, ..."""
    kind, detail = describe(exc)
    return "HTTP %s" % detail if kind == "http" else kind
