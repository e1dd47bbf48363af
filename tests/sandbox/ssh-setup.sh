#!/usr/bin/env bash
# The sandbox's SSH client key: .cache/sandbox-ssh/id_ed25519 (+ .pub), made once per checkout (.cache), mode 0600 in
# a 0700 directory, never committed (.cache/ is ignored). Idempotent and safe to run from parallel scenarios (flock).
# Called by molecule/_shared/host-dirs.sh (Molecule's dependency step), `make sandbox-up` and tests/bench/noop_ratio.sh;
# tests/sandbox/ssh-proxy.sh calls it too when the key is missing. Prints the private key's path.
#   bash tests/sandbox/ssh-setup.sh [IMAGE]   # with IMAGE: also fail unless IMAGE (when it exists) has sshd
#
# How the key is used (docs/testing.md, "How Ansible reaches the sandbox"): the inventories connect with
# ansible_connection ssh and ProxyCommand tests/sandbox/ssh-proxy.sh, which runs `sshd -i` inside the container
# over `podman exec -i` and hands it this public key as the only authorized key. The key opens nothing else: no
# container listens on a port.
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
dir=${BLACKWELL_SANDBOX_SSH_DIR:-$repo/.cache/sandbox-ssh}
key=$dir/id_ed25519
mkdir -p "$dir"
chmod 0700 "$dir"
exec 7>"$dir/.lock"
flock -w 60 7 || { echo "ssh-setup: timeout waiting for $dir/.lock" >&2; exit 1; }
if [[ ! -s $key || ! -s $key.pub ]]; then
  rm -f "$key" "$key.pub"
  (umask 077 && ssh-keygen -q -t ed25519 -N '' -C "blackwell-sandbox@$(hostname)" -f "$key")
fi
chmod 0600 "$key"
image=${1:-}
if [[ -n $image ]] && podman image exists "$image" 2>/dev/null; then
  # Images built before the SSH connection have no sshd (label blackwell.sandbox.ssh, tests/sandbox/build-image.sh).
  ssh_label=$(podman image inspect --format '{{ index .Labels "blackwell.sandbox.ssh" }}' "$image" 2>/dev/null || true)
  if [[ $ssh_label != inetd ]]; then
    echo "ssh-setup: the sandbox image $image has no sshd (built before the sandbox connection became SSH):" >&2
    echo "  rebuild it with \`make image\` (tests/sandbox/build-image.sh; BLACKWELL_SANDBOX_IMAGE names the tag)." >&2
    exit 1
  fi
fi
echo "$key"
