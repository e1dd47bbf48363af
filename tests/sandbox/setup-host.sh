#!/usr/bin/env bash
# Prepare this machine (as root) to run the blackwell.sglang podman sandbox: podman with runc, debootstrap,
# and a containers.conf drop-in with the settings that are known to work on the CI/VM hosts:
#   - runtime runc (crun fails where the host lacks CAP_SYS_RESOURCE: it cannot raise rlimits),
#   - explicit default ulimits (so podman does not try to copy the host's unlimited ones),
#   - cgroupfs manager + file events logger when the host itself is not booted with systemd.
# Idempotent: a second run installs nothing and rewrites nothing.
set -euo pipefail

log() { printf '[setup-host %(%H:%M:%S)T] %s\n' -1 "$*"; }

if [[ $(id -u) -ne 0 ]]; then
  echo "setup-host.sh must run as root (it installs packages and writes /etc/containers)" >&2
  exit 1
fi

PACKAGES=(podman runc debootstrap debian-archive-keyring uidmap slirp4netns fuse-overlayfs ca-certificates git make zstd
          python3 python3-venv shellcheck curl)
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if ((${#missing[@]})); then
  log "installing: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  timeout 900 apt-get update -q
  timeout 1800 apt-get install -y -q --no-install-recommends "${missing[@]}"
else
  log "packages already installed: ${PACKAGES[*]}"
fi

# --- promtool (Debian's prometheus package) for the monitoring tests ---------------------------------------
# tests/unit/monitoring checks the alert rules and the scrape config with `promtool check rules/config`. Only the
# tool is wanted on this machine, not a running Prometheus: the package's service is kept from starting during the
# install (policy-rc.d, Debian policy 9.3.3) and disabled afterwards, so nothing listens on :9090 here.
if ! command -v promtool >/dev/null 2>&1; then
  log "installing prometheus (for promtool; its service stays off)"
  export DEBIAN_FRONTEND=noninteractive
  policy=/usr/sbin/policy-rc.d
  own_policy=0
  if [[ ! -e $policy ]]; then
    printf '#!/bin/sh\nexit 101\n' > "$policy" && chmod 0755 "$policy" && own_policy=1
  fi
  timeout 900 apt-get update -q
  timeout 1800 apt-get install -y -q --no-install-recommends prometheus || { ((own_policy)) && rm -f "$policy"; exit 1; }
  ((own_policy)) && rm -f "$policy"
  if [[ -d /run/systemd/system ]]; then
    systemctl disable --now prometheus.service >/dev/null 2>&1 || true
  fi
else
  log "promtool already installed: $(promtool --version 2>&1 | head -1)"
fi

# --- containers.conf drop-in -------------------------------------------------------------------------------
# Drop-ins in /etc/containers/containers.conf.d/ are read after /etc/containers/containers.conf by podman >= 4.x
# (containers/common), so an operator's own containers.conf is left untouched and ours only adds keys.
if [[ -d /run/systemd/system ]]; then
  cgroup_manager=systemd; events_logger="journald"
else
  cgroup_manager=cgroupfs; events_logger="file"
fi
conf_dir=/etc/containers/containers.conf.d
conf_file=$conf_dir/50-blackwell-sandbox.conf
desired=$(cat <<CONF
# Managed by blackwell.sglang tests/sandbox/setup-host.sh -- the podman sandbox settings.
[containers]
default_ulimits = ["nofile=1024:20000", "nproc=4096:4096"]

[engine]
runtime = "runc"
cgroup_manager = "$cgroup_manager"
events_logger = "$events_logger"
CONF
)
mkdir -p "$conf_dir"
if [[ -f $conf_file ]] && [[ "$(cat "$conf_file")" == "$desired" ]]; then
  log "$conf_file up to date"
else
  printf '%s\n' "$desired" > "$conf_file.tmp" && mv "$conf_file.tmp" "$conf_file"
  log "wrote $conf_file"
fi
if [[ -f /etc/containers/containers.conf ]] && grep -Eq '^\s*runtime\s*=\s*"crun"' /etc/containers/containers.conf; then
  log "NOTE: /etc/containers/containers.conf sets runtime=crun; the drop-in overrides it"
fi

# --- prove podman works ---------------------------------------------------------------------------------------
log "podman info:"
timeout 120 podman info --format 'podman {{.Version.Version}}; runtime {{.Host.OCIRuntime.Name}} ({{.Host.OCIRuntime.Path}}); cgroups {{.Host.CgroupsVersion}} ({{.Host.CgroupManager}}); storage {{.Store.GraphDriverName}}'
runtime=$(podman info --format '{{.Host.OCIRuntime.Name}}')
if [[ $runtime != runc ]]; then
  echo "podman uses OCI runtime '$runtime', expected runc: is $conf_file read? (podman too old for containers.conf.d?)" >&2
  exit 1
fi
log "host ready"
