#!/usr/bin/env bash
# Host directories that every sandbox container mounts (Molecule runs this as its `dependency` step; the
# sandbox_up playbook and `make` call it too). Idempotent.
#   .cache/pip        -> /root/.cache/pip   (shared pip cache, read-write)
#   .cache/mirror     -> /srv/mirror        (local SGLang git mirror, read-only)
#   .cache/wheelhouse -> /opt/wheels        (link to $BLACKWELL_WHEELHOUSE or /opt/wheels; else an empty dir)
# and the SSH client key the sandbox connection uses (tests/sandbox/ssh-setup.sh: .cache/sandbox-ssh/id_ed25519).
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
# (and a stale image without sshd fails here, naming `make image`; same image variable as config.yml's platform)
bash "$repo/tests/sandbox/ssh-setup.sh" "${BLACKWELL_SANDBOX_IMAGE:-localhost/blackwell-sandbox:bookworm}" >/dev/null
mkdir -p "$repo/.cache/pip" "$repo/.cache/mirror"
src=${BLACKWELL_WHEELHOUSE:-/opt/wheels}
link=$repo/.cache/wheelhouse
if [[ -d $link && ! -L $link ]]; then
  exit 0                        # a real directory: the operator's own wheelhouse, keep it
fi
if [[ -d $src ]]; then
  [[ $(readlink "$link" 2>/dev/null) == "$src" ]] || ln -sfn "$src" "$link"
else
  rm -f "$link"
  mkdir -p "$link"
fi
