#!/usr/bin/env bash
# Fleet convergence benchmark (a measurement, not a test): converge 1 sandbox host, then 4, with
# playbooks/rollout.yml, then rerun on the 4 (idempotent), then a 5th host that joins later (--limit, wheel from the
# controller artifact cache). Writes a Markdown table to docs/benchmarks/fleet-<date>.md.
# Goals: 4 hosts in <= 1.5x the time of 1 with exactly one kernel build and one venv build; rerun <= 10% of the first
# converge; the joining host builds neither.
#
#   bash tests/bench/fleet_converge.sh            # needs `make deps image mirror` first; tens of minutes
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
ANSIBLE_PLAYBOOK=${ANSIBLE_PLAYBOOK:-$ROOT/.venv/bin/ansible-playbook}
WORK=$(mktemp -d /tmp/fleet-bench.XXXXXX)
export BLACKWELL_ARTIFACT_CACHE=$WORK/artifacts
export ANSIBLE_COLLECTIONS_PATH=$ROOT/collections
# the shipped settings (forks, pipelining, fact cache, profile_tasks): the playbooks run from $WORK, where no
# ansible.cfg would be found, and a run without these settings measures something else
export ANSIBLE_CONFIG=$ROOT/ansible.cfg
export ANSIBLE_CACHE_PLUGIN_CONNECTION=$WORK/facts   # fresh containers each run: no facts from an earlier run
OUT=${OUT_MD:-$ROOT/docs/benchmarks/fleet-$(date -u +%Y%m%d).md}
IMAGE=${BLACKWELL_SANDBOX_IMAGE:-localhost/blackwell-sandbox:bookworm}
# The connection as inventories/sandbox (since 2026-12-01): SSH through tests/sandbox/ssh-proxy.sh (sshd -i over
# podman exec -i), pipelining; BENCH_CONNECTION=podman for the containers.podman connection of the earlier runs.
CONNECTION=${BENCH_CONNECTION:-ssh}
case $CONNECTION in (ssh|podman) ;; (*) echo "BENCH_CONNECTION must be ssh or podman" >&2; exit 2;; esac
[[ $CONNECTION == podman ]] || KEY=$(bash "$ROOT/tests/sandbox/ssh-setup.sh" "$IMAGE")
mkdir -p "$(dirname "$OUT")"

# shellcheck source=tests/bench/sandbox_hosts.sh
. "$ROOT/tests/bench/sandbox_hosts.sh"
inventory() { bench_inventory "$WORK/inv-$1.yml" bench bw-bench "$1"; }   # inventory <n>: bench-1..n
up() { bench_up bench bw-bench "$@"; }                                    # up <n> [first]
down() { bench_down bw-bench "$1"; }

timed() {  # timed <label> <inventory> [ansible-playbook args] -> seconds on stdout, log in $WORK
  local label=$1 inv=$2 start end
  shift 2
  start=$(date +%s)
  (cd "$WORK" && timeout 5400 "$ANSIBLE_PLAYBOOK" -i "$inv" "$ROOT/playbooks/rollout.yml" "$@" > "$WORK/$label.log" 2>&1) \
    || { echo "rollout failed for $label, see $WORK/$label.log" >&2; tail -30 "$WORK/$label.log" >&2; exit 1; }
  end=$(date +%s)
  echo $((end - start))
}

recap() {  # recap <label>: "ok=.. changed=.. failed=.." summed over the hosts of that run's PLAY RECAP lines
  awk '/ : ok=/{for(i=1;i<=NF;i++){split($i,kv,"="); if(kv[1]~/^(ok|changed|failed)$/) s[kv[1]]+=kv[2]}}
       END{printf "ok=%d changed=%d failed=%d", s["ok"], s["changed"], s["failed"]}' "$WORK/$1.log"
}

builds() { local n=$1 c=0; for i in $(seq "${2:-1}" "$n"); do
  c=$((c + $(podman exec "bw-bench-$i" sh -c 'ls /var/log/blackwell-sglang/sgl-kernel-build-*.log 2>/dev/null | wc -l'))); done; echo $c; }
# release venvs built (and archived) rather than unpacked: venv-archive.json with origin "built" (docs/fleet.md)
venvs() { local n=$1 c=0; for i in $(seq "${2:-1}" "$n"); do
  c=$((c + $(podman exec "bw-bench-$i" sh -c 'grep -l "\"origin\": \"built\"" /opt/sglang/releases/*/venv-archive.json 2>/dev/null | wc -l'))); done; echo $c; }

echo "== 1 host"; up 1; t1=$(timed one "$(inventory 1)"); b1=$(builds 1); v1=$(venvs 1); down 1
rm -rf "$BLACKWELL_ARTIFACT_CACHE"   # the 4-host run must build its own wheel and venv once
echo "== 4 hosts"; up 4; t4=$(timed four "$(inventory 4)"); b4=$(builds 4); v4=$(venvs 4)
echo "== 4 hosts, rerun"; tr=$(timed rerun "$WORK/inv-4.yml")
# a host that joins later: the inventory grows to 5, only the new host is converged (--limit), from the cache
echo "== host 5 joins (--limit bench-5)"; up 5 5; tj=$(timed join "$(inventory 5)" --limit bench-5); bj=$(builds 5 5); vj=$(venvs 5 5)
down 5

cat > "$OUT" <<MD
# Fleet convergence benchmark, $(date -u +%Y-%m-%d)

Machine: $(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GiB RAM, $(. /etc/os-release; echo "$PRETTY_NAME"), podman $(podman --version | awk '{print $3}').
Commit: $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- roles playbooks plugins || echo ' (with uncommitted changes)').
Playbook: playbooks/rollout.yml on fresh sandbox containers (pip CUDA wheels, wheelhouse torch, SGLang mirror),
shared pip cache warm. Image $IMAGE. Connection: $CONNECTION. Load average at the end: $(uptime | sed -E 's/.*load average: //').
Script: tests/bench/fleet_converge.sh.

| run | hosts | wall time (s) | kernel builds | venv builds | tasks (all plays, all hosts) | goal |
|---|---|---|---|---|---|---|
| first converge | 1 | $t1 | $b1 | $v1 | $(recap one) | |
| first converge | 4 | $t4 | $b4 | $v4 | $(recap four) | <= 1.5 x $t1 = $((t1 * 3 / 2)) s, exactly 1 build of each: $( [ "$t4" -le $((t1 * 3 / 2)) ] && echo met || echo missed ) / $( [ "$b4" -eq 1 ] && [ "$v4" -eq 1 ] && echo met || echo missed ) |
| rerun (idempotent) | 4 | $tr | - | - | $(recap rerun) | <= 10% of $t4 = $((t4 / 10)) s: $( [ "$tr" -le $((t4 / 10)) ] && echo met || echo missed ) |
| 5th host joins (\`--limit bench-5\`, wheel and venv from the artifact cache) | 1 | $tj | $bj | $vj | $(recap join) | 0 builds: $( [ "$bj" -eq 0 ] && [ "$vj" -eq 0 ] && echo met || echo missed ) |
MD
cat "$OUT"
echo "logs: $WORK"
