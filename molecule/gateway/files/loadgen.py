"""Bounded load generator for molecule/gateway: a fixed number of completions through the gateway on loopback.

Sends --requests POST /v1/completions to --url (127.0.0.1 only), --concurrency at a time, each with a 30 s
timeout, and stops by itself (also after --max-seconds: requests not sent by then count as failed). Writes
{"requests", "ok", "failed", "errors", "served_by", "first_ts", "last_ts"} as JSON to --out. The API key comes
from the environment variable LOADGEN_API_KEY.
"""
import argparse
import collections
import json
import os
import threading
import time
import urllib.request


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", default="http://127.0.0.1:8000")
    parser.add_argument("--requests", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--max-tokens", type=int, default=16)
    parser.add_argument("--max-seconds", type=float, default=400)
    parser.add_argument("--out", required=True)
    opts = parser.parse_args()
    if not opts.url.startswith(("http://127.0.0.1:", "http://localhost:")):
        raise SystemExit("loadgen: loopback URLs only")
    key = os.environ.get("LOADGEN_API_KEY", "")
    lock = threading.Lock()
    state = {"next": 0, "ok": 0, "failed": 0, "first": None, "last": None}
    errors = collections.Counter()
    served = collections.Counter()
    deadline = time.monotonic() + opts.max_seconds
    body = json.dumps({"model": "fake-model", "prompt": "hello", "max_tokens": opts.max_tokens}).encode()

    def worker():
        while True:
            with lock:
                if state["next"] >= opts.requests or time.monotonic() > deadline:
                    return
                state["next"] += 1
                if state["first"] is None:
                    state["first"] = time.time()
            req = urllib.request.Request(opts.url + "/v1/completions", data=body, method="POST",
                                         headers={"Content-Type": "application/json", "Authorization": "Bearer " + key})
            try:
                with urllib.request.urlopen(req, timeout=30) as resp:
                    payload = json.loads(resp.read())
                    good = resp.status == 200 and bool(payload.get("choices"))
                    who = payload.get("served_by", "?")
                    err = None if good else "status %s" % resp.status
            except Exception as exc:  # pylint: disable=broad-except
                good, who, err = False, None, "%s: %s" % (type(exc).__name__, str(exc)[:120])
            with lock:
                state["last"] = time.time()
                if good:
                    state["ok"] += 1
                    served[who] += 1
                else:
                    state["failed"] += 1
                    errors[err] += 1

    threads = [threading.Thread(target=worker) for _i in range(opts.concurrency)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    unsent = opts.requests - state["ok"] - state["failed"]
    result = {"requests": opts.requests, "ok": state["ok"], "failed": state["failed"] + unsent, "unsent": unsent,
              "errors": dict(errors), "served_by": dict(served), "first_ts": state["first"], "last_ts": state["last"]}
    with open(opts.out, "w") as fh:
        json.dump(result, fh)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
