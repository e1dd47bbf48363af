#!/usr/bin/env bash
# Fleet convergence benchmark (a measurement, not a test): converge 1 sandbox host, then each larger fleet of
# BENCH_HOSTS (default "1 4 8"), with playbooks/rollout.yml, each on fresh containers and an empty artifact cache; then
# rerun the largest (idempotent), then one more host that joins later (--limit, everything from the controller's
# artifact cache). Writes a Markdown table to docs/benchmarks/fleet-<date>.md with the wall time, the controller's CPU
# seconds (ansible-playbook and the workers and ssh clients it waits for) and that CPU per host: on 2 cores the
# containers share the CPU with the controller, so the wall ratio alone cannot show a controller-side change. Beside
# them the whole machine's CPU seconds, and those divided by the cores: the least wall time the run's work allows here.
# Goals: 4 hosts in <= 1.5x the time of 1 with exactly one kernel build and one venv build; rerun <= 10% of the first
# converge; the joining host builds neither.
#
#   bash tests/bench/fleet_converge.sh                   # needs `make deps image mirror` first; about an hour
#   BENCH_HOSTS="1 4" bash tests/bench/fleet_converge.sh # the 1-vs-4 comparison alone
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
read -ra SIZES <<<"${BENCH_HOSTS:-1 4 8}"
[[ ${SIZES[0]} == 1 ]] || { echo "BENCH_HOSTS must start with 1 (the baseline the others are compared with)" >&2; exit 2; }
[[ -x /usr/bin/time ]] || { echo "needs /usr/bin/time for the controller's CPU time (Debian: apt install time)" >&2; exit 2; }
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

# The whole machine's busy CPU seconds (busy_cpu). Divided by the cores it is the shortest wall time this machine
# allows for that amount of work: when the larger fleet's floor is already above the goal, no change of the
# orchestration alone can meet it here.
# shellcheck source=tests/machine-cpu.sh
. "$ROOT/tests/machine-cpu.sh"

timed() {  # timed <label> <inventory> [ansible-playbook args] -> seconds on stdout, log in $WORK
  local label=$1 inv=$2 start end
  shift 2
  start=$(date +%s)
  busy_cpu > "$WORK/$label.busy0"
  (cd "$WORK" && timeout 5400 /usr/bin/time -f '%U %S' -o "$WORK/$label.cpu" \
     "$ANSIBLE_PLAYBOOK" -i "$inv" "$ROOT/playbooks/rollout.yml" "$@" > "$WORK/$label.log" 2>&1) \
    || { echo "rollout failed for $label, see $WORK/$label.log" >&2; tail -30 "$WORK/$label.log" >&2; exit 1; }
  end=$(date +%s)
  echo $(($(busy_cpu) - $(cat "$WORK/$label.busy0"))) > "$WORK/$label.busy"
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

cpu() { awk '{printf "%.0f", $1 + $2}' "$WORK/$1.cpu"; }              # controller CPU seconds of a run
per_host() { awk -v c="$(cpu "$1")" -v n="$2" 'BEGIN{printf "%.1f", c / n}'; }
machine() { cat "$WORK/$1.busy"; }                                     # the whole machine's CPU seconds of a run
floor() { awk -v c="$(machine "$1")" -v n="$(nproc)" 'BEGIN{printf "%.0f", c / n}'; }
row() {  # row <label> <hosts> <seconds> <kernel builds> <venv builds> <goal>
  printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' "$1" "$2" "$3" "$(cpu "$1")" "$(per_host "$1" "$2")" \
    "$(machine "$1")" "$(floor "$1")" "$4" "$5" "$(recap "$1")" "$6"
}

rows=""; t1=0
for n in "${SIZES[@]}"; do
  rm -rf "$BLACKWELL_ARTIFACT_CACHE"   # every size builds its own wheel (and release venv) once
  echo "== $n host(s)"; up "$n"; t=$(timed "hosts$n" "$(inventory "$n")"); b=$(builds "$n"); v=$(venvs "$n")
  if [[ $n == 1 ]]; then t1=$t; goal=""
  else goal="<= 1.5 x $t1 = $((t1 * 3 / 2)) s: $( [ "$t" -le $((t1 * 3 / 2)) ] && echo met || echo missed ) ($(awk -v a="$t" -v b="$t1" 'BEGIN{printf "%.2fx", a / b}')); 1 kernel and 1 venv build: $( [ "$b" -eq 1 ] && [ "$v" -eq 1 ] && echo met || echo missed )"; fi
  rows+=$(row "hosts$n" "$n" "$t" "$b" "$v" "$goal")$'\n'
  last=$n; tlast=$t
  [[ $n == "${SIZES[-1]}" ]] || down "$n"
done
echo "== $last hosts, rerun"; tr=$(timed rerun "$WORK/inv-$last.yml")
rows+=$(row rerun "$last" "$tr" - - "<= 10% of $tlast = $((tlast / 10)) s: $( [ "$tr" -le $((tlast / 10)) ] && echo met || echo missed )")$'\n'
# a host that joins later: the inventory grows by one, only the new host is converged (--limit), from the cache
j=$((last + 1))
echo "== host $j joins (--limit bench-$j)"; up "$j" "$j"; tj=$(timed join "$(inventory "$j")" --limit "bench-$j"); bj=$(builds "$j" "$j")
vj=$(venvs "$j" "$j")
rows+=$(row join 1 "$tj" "$bj" "$vj" "0 builds: $( [ "$bj" -eq 0 ] && [ "$vj" -eq 0 ] && echo met || echo missed )")$'\n'
down "$j"

cat > "$OUT" <<MD
# Fleet convergence benchmark, $(date -u +%Y-%m-%d)

Machine: $(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GiB RAM, $(. /etc/os-release; echo "$PRETTY_NAME"), podman $(podman --version | awk '{print $3}').
Commit: $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- roles playbooks plugins || echo ' (with uncommitted changes)').
Playbook: playbooks/rollout.yml on fresh sandbox containers (pip CUDA wheels, wheelhouse torch, SGLang mirror),
shared pip cache warm. Image $IMAGE. Connection: $CONNECTION. Load average at the end: $(uptime | sed -E 's/.*load average: //').
Script: tests/bench/fleet_converge.sh.

| run | hosts | wall time (s) | controller CPU (s) | controller CPU per host (s) | machine CPU (s) | machine floor (s) | kernel builds | venv builds | tasks (all plays, all hosts) | goal |
|---|---|---|---|---|---|---|---|---|---|---|
$rows
"machine CPU" is every process's CPU time during the run (/proc/stat: the controller, the containers, anything else
running), "machine floor" that CPU divided by the $(nproc) cores: the shortest wall time this machine allows for the
same work, whatever the orchestration.
MD
cat "$OUT"
echo "logs: $WORK"
