#!/usr/bin/env bash
# Build the sandbox base image localhost/blackwell-sandbox:bookworm offline-style: debootstrap Debian 12
# (variant minbase) with systemd as PID 1, then `podman import`. No image registry is needed or contacted.
#
# The image carries a recipe hash label (blackwell.sandbox.recipe); when an image with the same hash exists the
# build is skipped. The hash covers this script, the package list, the Debian mirror and the host CA bundle, so any
# edit of this file rebuilds the image on the next `make image`.
#
# The image has openssh-server for the sandbox connection (docs/testing.md, "How Ansible reaches the sandbox"): the
# ssh service is disabled and never listens (no network port); tests/sandbox/ssh-proxy.sh starts `sshd -i` (inetd
# mode) over `podman exec -i` stdio per SSH connection. Label blackwell.sandbox.ssh=inetd marks such images.
#
# Env: SANDBOX_IMAGE (default localhost/blackwell-sandbox:bookworm), SANDBOX_DEBIAN_MIRROR (default: the host's
# Debian mirror, else http://deb.debian.org/debian), SANDBOX_CA_BUNDLE (default /etc/ssl/certs/ca-certificates.crt),
# SANDBOX_FORCE=1 to rebuild regardless of the hash, SANDBOX_WORKDIR (default <repo>/.cache/sandbox-image),
# SANDBOX_ARCH (a Debian architecture, default the host's: arm64 on an x86_64 host builds an aarch64 image whose
# programs run through qemu-user-static's binfmt_misc handler, for the DGX Spark path; see docs/testing.md).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
IMAGE=${SANDBOX_IMAGE:-localhost/blackwell-sandbox:bookworm}
SUITE=bookworm
CA_BUNDLE=${SANDBOX_CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}
ARCH=${SANDBOX_ARCH:-$(dpkg --print-architecture)}
WORKDIR=${SANDBOX_WORKDIR:-$repo/.cache/sandbox-image-$ARCH}
LABEL=blackwell.sandbox.recipe
start=$SECONDS

log() { printf '[build-image %(%H:%M:%S)T +%4ss] %s\n' -1 "$((SECONDS - start))" "$*"; }

# Packages: systemd as init, Python 3.11 for Ansible and the venvs, a C/C++ toolchain and CMake/Ninja for the
# sgl-kernel-shaped build, and the small tools the roles call (git, curl, gpg for apt keyrings, acl for become).
PACKAGES=(
  systemd systemd-sysv dbus
  python3 python3-venv python3-pip python3-dev python3-packaging python3-apt
  ca-certificates gnupg curl git sudo acl
  g++ make cmake ninja-build
  procps iproute2 pciutils kmod xz-utils tar less
  openssh-server
)

# Units that cannot work (or only add noise/locks) inside a container: consoles, udev, kernel mounts, timers that
# would take the dpkg lock in the middle of a converge.
MASK_UNITS=(
  getty.target getty@.service serial-getty@.service console-getty.service getty-static.service
  systemd-udevd.service systemd-udevd-control.socket systemd-udevd-kernel.socket systemd-udev-trigger.service
  systemd-udev-settle.service systemd-remount-fs.service systemd-firstboot.service systemd-modules-load.service
  sys-kernel-config.mount sys-kernel-debug.mount sys-kernel-tracing.mount sys-fs-fuse-connections.mount
  dev-hugepages.mount dev-mqueue.mount proc-sys-fs-binfmt_misc.automount
  apt-daily.timer apt-daily-upgrade.timer e2scrub_all.timer e2scrub_reap.service fstrim.timer
  systemd-networkd-wait-online.service systemd-timesyncd.service
)

host_mirror() {
  # The Debian mirror the host uses (deb822 .sources or one-line sources.list), else deb.debian.org.
  local m=""
  if compgen -G '/etc/apt/sources.list.d/*.sources' >/dev/null; then
    m=$(awk '/^URIs:/ {print $2}' /etc/apt/sources.list.d/*.sources | grep -E '/debian/?$' | head -n1 || true)
  fi
  if [[ -z $m && -f /etc/apt/sources.list ]]; then
    m=$(awk '$1 == "deb" && $2 ~ /\/debian\/?$/ {print $2; exit}' /etc/apt/sources.list || true)
  fi
  echo "${m:-http://deb.debian.org/debian}"
}
MIRROR=${SANDBOX_DEBIAN_MIRROR:-$(host_mirror)}
MIRROR=${MIRROR%/}
SECURITY_MIRROR=${SANDBOX_DEBIAN_SECURITY_MIRROR:-${MIRROR%/debian}/debian-security}

[[ -r $CA_BUNDLE ]] || { echo "CA bundle $CA_BUNDLE not readable (set SANDBOX_CA_BUNDLE)" >&2; exit 1; }
command -v podman >/dev/null || { echo "podman missing: run tests/sandbox/setup-host.sh first" >&2; exit 1; }
command -v debootstrap >/dev/null || { echo "debootstrap missing: run tests/sandbox/setup-host.sh first" >&2; exit 1; }
if [[ $ARCH != "$(dpkg --print-architecture)" ]]; then
  # a foreign root file system: debootstrap's second stage and every later chroot run through the kernel's binfmt_misc
  # handler for that architecture (F flag: the interpreter is opened at registration, so it works inside the chroot)
  qemu=/proc/sys/fs/binfmt_misc/qemu-$( [[ $ARCH == arm64 ]] && echo aarch64 || echo "$ARCH")
  grep -qx enabled "$qemu" 2>/dev/null || { echo "SANDBOX_ARCH=$ARCH needs the binfmt_misc handler $qemu: apt-get install qemu-user-static binfmt-support, and mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc" >&2; exit 1; }
fi

recipe=$( {
  cat "${BASH_SOURCE[0]}" "$here/blackwell_zipimport_cache.py"
  printf '%s\n' "$SUITE" "$ARCH" "$MIRROR" "$SECURITY_MIRROR" "${PACKAGES[@]}" "${MASK_UNITS[@]}"
  sha256sum < "$CA_BUNDLE"
} | sha256sum | cut -c1-16)

current=$(podman image inspect --format "{{ index .Labels \"$LABEL\" }}" "$IMAGE" 2>/dev/null || true)
previous_id=$(podman image inspect --format '{{.Id}}' "$IMAGE" 2>/dev/null || true)
if [[ ${SANDBOX_FORCE:-0} != 1 && $current == "$recipe" ]]; then
  log "$IMAGE is up to date (recipe $recipe); nothing to build"
  exit 0
fi
log "building $IMAGE (recipe $recipe; existing: ${current:-none}) from $MIRROR"

[[ $(id -u) -eq 0 ]] || { echo "debootstrap needs root" >&2; exit 1; }
rootfs=$WORKDIR/rootfs
mkdir -p "$WORKDIR"
rm -rf "$rootfs"
trap 'rm -rf "$rootfs"' EXIT

log "debootstrap $SUITE (minbase, ${#PACKAGES[@]} extra packages) -- this takes a few minutes"
include=$(IFS=,; echo "${PACKAGES[*]}")
timeout 2400 debootstrap --arch="$ARCH" --variant=minbase --include="$include" --components=main \
  "$SUITE" "$rootfs" "$MIRROR" 2>&1 \
  | grep --line-buffered -E '^(I: (Retrieving Release|Validating Packages|Resolving|Found|Checking|Extracting|Installing|Configuring|Base system)|E:|W:)' \
  | awk '/^I: (Retrieving|Validating|Extracting|Unpacking|Configuring)/ {n[$2]++; if (n[$2] % 25 != 1) next}
         {print "  " $0; fflush()}'
# (pipefail carries a debootstrap failure through the filter above; check the result as well)
[[ -x $rootfs/lib/systemd/systemd && -e $rootfs/sbin/init && -x $rootfs/usr/bin/python3 ]] \
  || { echo "debootstrap did not produce a systemd + python3 root file system" >&2; exit 1; }

log "configuring the root file system"
cat > "$rootfs/etc/apt/sources.list" <<SRC
deb $MIRROR $SUITE main
deb $MIRROR $SUITE-updates main
deb $SECURITY_MIRROR $SUITE-security main
SRC
# The host's CA bundle (it may hold a TLS-inspecting proxy's CA): split into single certificates below
# /usr/local/share/ca-certificates so that update-ca-certificates (now and on any later run inside the
# container) keeps them in /etc/ssl/certs/ca-certificates.crt.
mkdir -p "$rootfs/usr/local/share/ca-certificates/blackwell-host"
awk -v dir="$rootfs/usr/local/share/ca-certificates/blackwell-host" '
  /-----BEGIN CERTIFICATE-----/ {n++; f=sprintf("%s/host-%04d.crt", dir, n)}
  f {print > f}
  /-----END CERTIFICATE-----/ {close(f); f=""}' "$CA_BUNDLE"
chroot "$rootfs" update-ca-certificates --fresh >/dev/null 2>&1 \
  || { echo "update-ca-certificates failed in the new root" >&2; exit 1; }
echo "  $(grep -c BEGIN "$rootfs/etc/ssl/certs/ca-certificates.crt") certificates in the sandbox CA bundle"
# pip inside the sandbox: the CA bundle (the host's pip constraints/indexes are host-specific), and no byte-compiling
# at install time. Sandbox-only speed-up (docs/testing.md): compiling every .py of torch and SGLang's dependencies
# to .pyc takes most of each install (docs/benchmarks.md); Python compiles what it imports on first import instead.
# Real hosts keep pip's default (compile). The key is `compile = false`: pip reads a config key as the option of that
# name, and `no-compile = true` sets --no-compile's destination to true, which compiles (its PIP_NO_COMPILE=1 does too);
# tests/unit/sandbox/test_pip_conf.py installs a wheel under this file and checks that no .pyc was written.
cat > "$rootfs/etc/pip.conf" <<'PIP'
[global]
cert = /etc/ssl/certs/ca-certificates.crt
disable-pip-version-check = true
timeout = 120

[install]
compile = false
PIP
# zipimport's compiles kept on disk for Ansible's module runs in the sandbox (AnsiballZ payloads are zip archives,
# which Python never caches); the hook's docstring says what it changes. Sandbox-only, like no-compile above: the
# release venvs do not see the system site-packages, and real hosts never get it.
site_packages=$(chroot "$rootfs" python3 -c 'import site; print(site.getsitepackages()[0])')
mkdir -p "$rootfs$site_packages"
cp "$here/blackwell_zipimport_cache.py" "$rootfs$site_packages/"
echo "import blackwell_zipimport_cache; blackwell_zipimport_cache.install('/var/cache/blackwell-zipimport')" \
  > "$rootfs$site_packages/blackwell_zipimport_cache.pth"
for unit in "${MASK_UNITS[@]}"; do
  ln -sfn /dev/null "$rootfs/etc/systemd/system/$unit"
done
# sshd: installed for `sshd -i` over podman exec (tests/sandbox/ssh-proxy.sh), never as a listening service.
# Disabled (socket too), and Debian's ssh.service has ConditionPathExists=!/etc/ssh/sshd_not_to_be_run, so even a
# `systemctl start ssh` does not open port 22. `sshd -i` is not affected by either. The host keys are generated once
# per image build by the package (all containers of one image share them; clients use UserKnownHostsFile=/dev/null).
[[ -x $rootfs/usr/sbin/sshd && -x $rootfs/usr/lib/openssh/sftp-server ]] \
  || { echo "openssh-server did not install sshd and sftp-server" >&2; exit 1; }
chroot "$rootfs" systemctl disable ssh.service ssh.socket >/dev/null 2>&1 || true
rm -f "$rootfs/etc/systemd/system/sshd.service" "$rootfs/etc/systemd/system/multi-user.target.wants/ssh.service" \
  "$rootfs/etc/systemd/system/sockets.target.wants/ssh.socket"
touch "$rootfs/etc/ssh/sshd_not_to_be_run"
compgen -G "$rootfs/etc/ssh/ssh_host_*_key" >/dev/null || chroot "$rootfs" ssh-keygen -A >/dev/null
# Empty machine-id: systemd generates one per container at boot.
: > "$rootfs/etc/machine-id"
rm -f "$rootfs/var/lib/dbus/machine-id"
echo blackwell-sandbox > "$rootfs/etc/hostname"
# Keep the image small: apt lists and caches come back with the first apt-get update.
chroot "$rootfs" apt-get clean
rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/*.bin "$rootfs"/var/log/*.log "$rootfs"/tmp/*

log "podman import -> $IMAGE ($(du -sh "$rootfs" | cut -f1) uncompressed)"
tar --numeric-owner --xattrs -C "$rootfs" -c . \
  | timeout 900 podman import \
      --arch "$ARCH" \
      --change 'CMD ["/sbin/init"]' \
      --change 'STOPSIGNAL SIGRTMIN+3' \
      --change "LABEL $LABEL=$recipe" \
      --change 'LABEL blackwell.sandbox.ssh=inetd' \
      --change 'LABEL org.opencontainers.image.description=blackwell.sglang sandbox: Debian 12 with systemd' \
      --message "blackwell.sglang sandbox recipe $recipe" \
      - "$IMAGE" >/dev/null
# Remove the previous image of this name (now untagged) to save disk, unless a container still uses it. Only that
# one image: other untagged sandbox images may be in use by ID (BLACKWELL_SANDBOX_IMAGE=<id>) by someone else.
if [[ -n $previous_id && $previous_id != "$(podman image inspect --format '{{.Id}}' "$IMAGE")" ]]; then
  podman rmi "$previous_id" >/dev/null 2>&1 || true
fi
log "done: $IMAGE $(podman image inspect --format '{{.Id}}' "$IMAGE" | cut -c1-12), $(( (SECONDS - start) / 60 ))m$(( (SECONDS - start) % 60 ))s"
