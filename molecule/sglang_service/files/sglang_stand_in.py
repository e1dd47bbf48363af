# -*- coding: utf-8 -*-
# Copyright: blackwell.sglang contributors
# Apache-2.0 (see LICENSE)
"""Stand-in for SGLang in the Molecule sandbox (no GPU, so the real server cannot start).

Run by the real sglang.service through the role's launcher (a drop-in replaces ``--module sglang.launch_server``
by ``--script`` this file): it reads ``--api-key`` from ``sys.argv`` as SGLang's parser does, records the key's
sha256 (never the key) in the state directory, logs ``server_args`` with the key the way SGLang does, and sleeps
so the verifier can read ``/proc/<pid>/cmdline`` and the journal. ``/proc/<pid>/environ`` of another user's process
is not readable from outside even by the container's root (no CAP_SYS_PTRACE), so the stand-in reads its own and
records whether the key is in it.
"""

import hashlib
import json
import logging
import os
import sys
import time

logging.basicConfig(level=logging.INFO, format="%(message)s")
key = sys.argv[sys.argv.index("--api-key") + 1] if "--api-key" in sys.argv else ""
state = os.environ.get("STATE_DIRECTORY", "/var/lib/sglang")
with open(os.path.join(state, "stand-in.json.tmp"), "w") as handle:
    with open("/proc/self/environ", "rb") as env:
        key_in_environ = bool(key) and key.encode() in env.read()
    json.dump({"pid": os.getpid(), "key_sha256": hashlib.sha256(key.encode()).hexdigest(),
               "key_in_environ": key_in_environ}, handle)
os.replace(os.path.join(state, "stand-in.json.tmp"), os.path.join(state, "stand-in.json"))
logging.info("server_args=ServerArgs(model_path='/m', api_key=%r, port=30000)", key)
print("stand-in running with --api-key %s" % key, flush=True)
time.sleep(300)
