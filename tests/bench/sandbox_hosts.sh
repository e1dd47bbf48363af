#!/usr/bin/env bash
# Sourced by the benchmarks (noop_ratio.sh, fleet_converge.sh): their sandbox hosts, outside Molecule.
# Needs ROOT (the checkout), WORK (a scratch dir), IMAGE, CONNECTION (ssh | podman) and, for ssh, KEY (the private
# key of tests/sandbox/ssh-setup.sh). Containers are <name>-<i>, their inventory hosts <host>-<i>.

bench_inventory() {  # bench_inventory <file> <host prefix> <container prefix> <n>: writes the inventory, prints its path
  local f=$1 host=$2 name=$3 n=$4 i
  {
    echo "all:"; echo "  children:"; echo "    sglang_servers:"; echo "      hosts:"
    for i in $(seq 1 "$n"); do echo "        $host-$i: {ansible_host: $name-$i}"; done
    echo "      vars:"
    echo "        ansible_python_interpreter: /usr/bin/python3"
    if [[ $CONNECTION == ssh ]]; then  # as inventories/sandbox/hosts.yml, with literal paths
      echo "        ansible_connection: ssh"
      echo "        ansible_user: root"
      echo "        ansible_ssh_private_key_file: '$KEY'"
      echo "        ansible_ssh_common_args: >-"
      echo "          -o ProxyCommand=\"$ROOT/tests/sandbox/ssh-proxy.sh %h\""
      echo "          -o IdentitiesOnly=yes -o UserKnownHostsFile=/dev/null -o StrictHostKeyChecking=no -o LogLevel=ERROR"
    else
      echo "        ansible_connection: containers.podman.podman"
    fi
  } > "$f"
  mkdir -p "$(dirname "$f")/group_vars" && cp -r "$ROOT"/inventories/sandbox/group_vars/* "$(dirname "$f")/group_vars/"
  echo "$f"
}

bench_up() {  # bench_up <host prefix> <container prefix> <last> [first]: fresh containers, systemd up (bounded)
  local host=$1 name=$2 last=$3 first=${4:-1} i
  for i in $(seq "$first" "$last"); do
    podman rm -f "$name-$i" >/dev/null 2>&1 || true
    podman run -d --name "$name-$i" --hostname "$host-$i" --systemd=always --pull=never \
      --ulimit nofile=1024:20000 --ulimit nproc=4096:4096 \
      -v "$ROOT/.cache/wheelhouse:/opt/wheels:ro" -v "$ROOT/.cache/pip:/root/.cache/pip" \
      -v "$ROOT/.cache/mirror:/srv/mirror:ro" "$IMAGE" /sbin/init >/dev/null
  done
  for i in $(seq "$first" "$last"); do
    timeout 120 bash -c "until podman exec $name-$i systemctl is-system-running 2>/dev/null | grep -qE 'running|degraded'; do sleep 2; done"
  done
}

bench_down() {  # bench_down <container prefix> <n>
  local i
  for i in $(seq 1 "$2"); do podman rm -f "$1-$i" >/dev/null 2>&1 || true; done
}
