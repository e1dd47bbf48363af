#!/usr/bin/env bash
# SSH ProxyCommand for the podman sandbox: `ssh -o ProxyCommand="tests/sandbox/ssh-proxy.sh %h" ... <container>`.
# Runs sshd in inetd mode (`sshd -i`, one session on stdin/stdout) inside the container <container> through
# `podman exec -i`, so Ansible talks real SSH (pipelining, ControlMaster multiplexing) to a container that has no
# network port at all. With ControlMaster/ControlPersist (ansible.cfg, Molecule's config) this runs once per host
# per run; every later task multiplexes over that one session.
#
# Auth: the public key of tests/sandbox/ssh-setup.sh (.cache/sandbox-ssh/id_ed25519.pub) is written to
# /run/blackwell-sandbox-ssh/authorized_keys in the container (0700 dir, 0600 file; /run is a tmpfs) and given to
# sshd as its only AuthorizedKeysFile; passwords and keyboard-interactive are off. UsePAM=no: PAM's session modules
# (pam_systemd's logind registration) would only add latency inside a container; the login environment is sshd's
# own. The container's host keys are the image's (clients use UserKnownHostsFile=/dev/null: the sandbox only).
#
# A container whose image predates the SSH connection (no /usr/sbin/sshd) fails with a message naming `make image`.
# Env: BLACKWELL_SANDBOX_SSH_DIR (default <repo>/.cache/sandbox-ssh), PODMAN (default podman).
set -euo pipefail
name=${1:?usage: ssh-proxy.sh <container>}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
dir=${BLACKWELL_SANDBOX_SSH_DIR:-$here/../../.cache/sandbox-ssh}
[[ -s $dir/id_ed25519.pub ]] || bash "$here/ssh-setup.sh" >/dev/null
pub=$(<"$dir/id_ed25519.pub")
# shellcheck disable=SC2016  # the script runs inside the container: $1/$2 are its arguments
exec "${PODMAN:-podman}" exec -i "$name" /bin/sh -c '
  if [ ! -x /usr/sbin/sshd ]; then
    echo "sandbox container $2 has no /usr/sbin/sshd: its image was built before the sandbox used SSH." >&2
    echo "Rebuild the image with \`make image\` (tests/sandbox/build-image.sh), then recreate the container." >&2
    exit 1
  fi
  umask 077
  mkdir -p /run/sshd /run/blackwell-sandbox-ssh
  printf "%s\n" "$1" > /run/blackwell-sandbox-ssh/authorized_keys.$$
  mv -f /run/blackwell-sandbox-ssh/authorized_keys.$$ /run/blackwell-sandbox-ssh/authorized_keys
  # the session gets a Debian server login umask (022), not the 077 used for the key above: sshd -i without PAM
  # keeps the umask it inherits, and with 077 every venv the roles create would be unreadable to the service users
  umask 022
  exec /usr/sbin/sshd -i -o AuthorizedKeysFile=/run/blackwell-sandbox-ssh/authorized_keys \
    -o PasswordAuthentication=no -o KbdInteractiveAuthentication=no -o UsePAM=no \
    -o PermitRootLogin=prohibit-password -o LogLevel=ERROR
' sh "$pub" "$name"
