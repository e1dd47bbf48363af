#!/usr/bin/env bash
# The DGX Spark host path on an x86_64 machine: an emulated aarch64 Debian 12 container (qemu-user-static through
# binfmt_misc) converged with site.yml's first stages (preflight, release staging, cuda_toolchain by method pip: the
# aarch64 CUDA 13 wheels from PyPI and the compile proof for the inventory's targets), from the sandbox inventory.
# Not part of `make test`: under emulation the CUDA wheels' install alone takes 15-20 minutes (docs/benchmarks.md).
#
#   bash tests/sandbox/arm64-toolchain.sh          # KEEP=1 keeps the container (bw-arm64-1) afterwards
#
# Needs: root, podman, debootstrap (tests/sandbox/setup-host.sh), qemu-user-static + binfmt-support (Debian packages).
set -euo pipefail
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
IMAGE=${SANDBOX_ARM64_IMAGE:-localhost/blackwell-sandbox:bookworm-arm64}
NAME=bw-arm64-1
INV=$repo/.cache/arm64-inventory
LOG=$repo/.cache/arm64-toolchain.log
ANSIBLE_PLAYBOOK=${ANSIBLE_PLAYBOOK:-$repo/.venv/bin/ansible-playbook}

handler=/proc/sys/fs/binfmt_misc/qemu-aarch64
if [[ ! -e /proc/sys/fs/binfmt_misc/status ]]; then
  mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc \
    || { echo "cannot mount binfmt_misc at /proc/sys/fs/binfmt_misc (a container without that right cannot run foreign binaries)" >&2; exit 1; }
fi
if ! grep -qx enabled "$handler" 2>/dev/null; then
  if command -v update-binfmts >/dev/null; then update-binfmts --enable qemu-aarch64 >/dev/null 2>&1 || true; fi
  grep -qx enabled "$handler" 2>/dev/null \
    || { echo "no aarch64 binfmt_misc handler ($handler): apt-get install qemu-user-static binfmt-support" >&2; exit 1; }
fi
[[ -x $ANSIBLE_PLAYBOOK ]] || { echo "no $ANSIBLE_PLAYBOOK: run make venv first" >&2; exit 1; }

SANDBOX_ARCH=arm64 SANDBOX_IMAGE=$IMAGE bash "$repo/tests/sandbox/build-image.sh"

podman rm -f "$NAME" >/dev/null 2>&1 || true
[[ ${KEEP:-0} == 1 ]] || trap 'podman rm -f "$NAME" >/dev/null 2>&1 || true' EXIT
# the amd64-expected-platform warning is podman's: the image is arm64 on purpose
podman run -d --name "$NAME" --hostname sandbox-arm64 --systemd=always --pull=never \
  --ulimit nofile=1024:20000 --ulimit nproc=4096:4096 "$IMAGE" /sbin/init 2>&1 | grep -v 'does not match the expected platform' || true
for _ in $(seq 60); do
  state=$(podman exec "$NAME" systemctl is-system-running 2>/dev/null || true)
  [[ $state == running || $state == degraded ]] && break
  sleep 5
done
echo "== $NAME: $(podman exec "$NAME" uname -m), systemd ${state:-not up}"
[[ $(podman exec "$NAME" uname -m) == aarch64 ]] || { echo "$NAME does not run aarch64 code" >&2; exit 1; }

mkdir -p "$INV"
ln -sfn "$repo/inventories/sandbox/group_vars" "$INV/group_vars"
cat >"$INV/hosts.yml" <<YAML
# written by tests/sandbox/arm64-toolchain.sh: the sandbox settings on one emulated aarch64 host
all:
  children:
    sglang_servers:
      hosts:
        $NAME:
          ansible_connection: containers.podman.podman
          ansible_python_interpreter: /usr/bin/python3
YAML
echo "== site.yml --tags preflight,toolchain on $NAME (log $LOG); the CUDA wheels take long under emulation"
cd "$repo"
timeout "${ARM64_TIMEOUT:-3600}" "$ANSIBLE_PLAYBOOK" site.yml -i "$INV/hosts.yml" --tags preflight,toolchain 2>&1 | tee "$LOG" \
  | grep --line-buffered -E '^(TASK|fatal|PLAY RECAP)|(PASS|WARN|FAIL) \| (distribution|aarch64_dependencies|gpu_family)'
grep -qE "$NAME +: .*failed=0" "$LOG" || { echo "the aarch64 converge failed: $LOG" >&2; exit 1; }
N=/opt/blackwell-sglang/cuda-13.0/lib/python3.11/site-packages/nvidia/cu13/bin/nvcc
echo "== nvcc on $NAME: $(podman exec "$NAME" "$N" --version | tail -1); ELF machine $(podman exec "$NAME" od -An -tx1 -j18 -N2 "$N")(b7 00 = AArch64)"
