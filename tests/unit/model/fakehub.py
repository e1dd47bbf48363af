"""A stand-in for the Hugging Face Hub on 127.0.0.1 (the Hub itself is never reached by the tests).

It implements only what huggingface_hub 1.33's ``snapshot_download`` / ``HfApi`` call:

* ``GET /api/models/<repo>/revision/<rev>``  -> ``{"id", "sha", "siblings"}`` (branch -> commit)
* ``GET /api/models/<repo>/tree/<rev>[/<path>]?recursive=...`` -> file entries with ``oid`` (git blob id),
  ``size`` and, for LFS files, ``lfs: {oid: sha256, size, pointerSize}``
* ``HEAD|GET /<repo>/resolve/<rev>/<file>``: small files are served directly with ``ETag`` (git blob id),
  ``X-Repo-Commit`` and ``Content-Length``; LFS files answer 302 with ``Location`` (an absolute "CDN" URL on the same
  server), ``X-Linked-Etag`` (sha256), ``X-Linked-Size`` and ``X-Repo-Commit``, as the Hub does
* ``GET /cdn/<sha256>``: the bytes, with ``Range`` support (resume)

Unknown revisions answer 404 with ``X-Error-Code: RevisionNotFound`` (what huggingface_hub maps to
RevisionNotFoundError). Faults: ``resolve_status`` (every file request answers that HTTP status), ``cdn_base``
(LFS files redirect there instead: a CDN that cannot be reached), ``drop_once`` / ``drop_always`` (a file's body is cut off after half its bytes and
the connection closed), ``wrong_sha`` (the tree lists a different sha256), and a truncated shard is simply served
consistently truncated by the test (metadata agrees with the bytes: only the structural check can catch it).
The server listens on 127.0.0.1 only, serves at most ``max_requests`` and stops after ``lifetime`` seconds.
"""

import hashlib
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlparse


def git_sha1(data):
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


class FakeHub(object):
    def __init__(self, repo, commit, files, lfs_suffixes=(".safetensors",), branches=None, max_requests=2000,
                 lifetime=120):
        self.repo, self.commit, self.files = repo, commit, dict(files)
        self.lfs_suffixes = lfs_suffixes
        self.branches = dict(branches or {"main": commit})
        self.faults = {}
        self.log = []
        self.bytes_served = 0
        self.max_requests, self.lifetime = max_requests, lifetime
        self._server = None

    # ------------------------------------------------------------------ metadata
    def is_lfs(self, path):
        return path.endswith(self.lfs_suffixes)

    def entry(self, path):
        data = self.files[path]
        sha = hashlib.sha256(data).hexdigest()
        if self.faults.get("wrong_sha") == path:
            sha = hashlib.sha256(data + b"x").hexdigest()
        item = {"type": "file", "oid": git_sha1(data), "size": len(data), "path": path}
        if self.is_lfs(path):
            item["lfs"] = {"oid": sha, "size": len(data), "pointerSize": 134}
        return item

    def resolve(self, rev):
        if rev == self.commit:
            return rev
        return self.branches.get(rev)

    # ------------------------------------------------------------------ server
    def __enter__(self):
        hub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def send(self, code, body=b"", headers=None, ctype="application/json"):
                self.send_response(code)
                for key, value in (headers or {}).items():
                    self.send_header(key, value)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body)

            def not_found(self, code):
                self.send(404, b'{"error": "not found"}', {"X-Error-Code": code, "X-Error-Message": code})

            def do_HEAD(self):
                self.route()

            def do_GET(self):
                self.route()

            def route(self):
                hub.log.append((self.command, self.path, self.headers.get("Range")))
                if len(hub.log) > hub.max_requests:
                    self.send(503, b"{}")
                    return
                url = urlparse(self.path)
                path = unquote(url.path)
                api = "/api/models/%s/" % hub.repo
                resolve = "/%s/resolve/" % hub.repo
                if path.startswith(api + "revision/"):
                    rev = hub.resolve(path[len(api + "revision/"):])
                    if rev is None:
                        return self.not_found("RevisionNotFound")
                    body = {"id": hub.repo, "sha": rev, "siblings": [{"rfilename": p} for p in sorted(hub.files)]}
                    return self.send(200, json.dumps(body).encode())
                if path.startswith(api + "tree/"):
                    rest = path[len(api + "tree/"):]
                    rev = rest.split("/", 1)[0]
                    if hub.resolve(rev) is None:
                        return self.not_found("RevisionNotFound")
                    body = [hub.entry(p) for p in sorted(hub.files)]
                    return self.send(200, json.dumps(body).encode())
                if path.startswith(resolve):
                    if hub.faults.get("resolve_status"):
                        return self.send(hub.faults["resolve_status"], b'{"error": "injected"}')
                    rev, fname = path[len(resolve):].split("/", 1)
                    commit = hub.resolve(rev)
                    if commit is None:
                        return self.not_found("RevisionNotFound")
                    if fname not in hub.files:
                        return self.not_found("EntryNotFound")
                    entry = hub.entry(fname)
                    common = {"X-Repo-Commit": commit}
                    if "lfs" in entry:
                        host = hub.faults.get("cdn_base") or "http://localhost:%d" % hub.port   # another host, as the CDN
                        common.update({"Location": "%s/cdn/%s?f=%s" % (host, entry["lfs"]["oid"], fname),
                                       "X-Linked-Etag": '"%s"' % entry["lfs"]["oid"],
                                       "X-Linked-Size": str(entry["size"])})
                        return self.send(302, b"", common)
                    common["ETag"] = '"%s"' % entry["oid"]
                    return self.body(fname, common)
                if path.startswith("/cdn/"):
                    fname = unquote(url.query.split("f=", 1)[1])
                    return self.body(fname, {"ETag": '"%s"' % hub.entry(fname)["lfs"]["oid"]})
                return self.not_found("RepoNotFound")

            def body(self, fname, headers):
                data = hub.files[fname]
                start = 0
                rng = self.headers.get("Range")
                if rng and rng.startswith("bytes="):
                    start = int(rng[6:].split("-")[0])
                chunk = data[start:]
                self.send_response(206 if start else 200)
                for key, value in headers.items():
                    self.send_header(key, value)
                self.send_header("Accept-Ranges", "bytes")
                self.send_header("Content-Length", str(len(chunk)))
                if start:
                    self.send_header("Content-Range", "bytes %d-%d/%d" % (start, len(data) - 1, len(data)))
                self.end_headers()
                if self.command == "HEAD":
                    return
                drop = hub.faults.get("drop_always") == fname or (
                    hub.faults.get("drop_once") == fname and not hub.faults.get("dropped"))
                if drop and len(chunk) > 1:
                    hub.faults["dropped"] = True
                    half = chunk[: len(chunk) // 2]
                    self.wfile.write(half)
                    hub.bytes_served += len(half)
                    self.wfile.flush()
                    self.close_connection = True
                    self.connection.shutdown(2)
                    return
                self.wfile.write(chunk)
                hub.bytes_served += len(chunk)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        self.endpoint = "http://127.0.0.1:%d" % self.port
        thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.2}, daemon=True)
        thread.start()
        self._timer = threading.Timer(self.lifetime, self._server.shutdown)
        self._timer.daemon = True
        self._timer.start()
        self._started = time.time()
        return self

    def __exit__(self, *exc):
        self._timer.cancel()
        self._server.shutdown()
        self._server.server_close()
