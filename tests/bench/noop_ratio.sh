#!/usr/bin/env bash
# No-op ratio benchmark (a measurement, not a test): converge <n> fresh sandbox hosts with site.yml
# (PLAYBOOK=playbooks/rollout.yml for the fleet path), converge them again unchanged, and report the rerun's share of the first converge together
# with the rerun's slowest tasks (profile_tasks) and how many stamps (blackwell.sglang.venv_stamp) matched.
# Writes docs/benchmarks/noop-<n>host-<date>-<connection>.md. Goal: rerun <= 10% of the first converge,
# changed=0. The machine load (uptime) is recorded before and after each run: on the shared 2-core lab machine other
# work changes the result.
#
#   bash tests/bench/noop_ratio.sh       # 1 host; needs `make deps image mirror` first; tens of minutes
#   bash tests/bench/noop_ratio.sh 4     # 4 hosts (the fleet variant; tests/bench/fleet_converge.sh has 1-vs-4)
#
# BENCH_CONNECTION=ssh (default: as inventories/sandbox, SSH through tests/sandbox/ssh-proxy.sh, pipelining) or
# podman (containers.podman.podman, the connection before 2026-12-01, for comparison). The containers are named
# bw-noop-<i>: never run two at once (on the lab machine: molecule-locked bash -c '...' _ -s noop-bench).
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
N=${1:-1}
case $N in (*[!0-9]*|'') echo "usage: $0 [hosts]" >&2; exit 2;; esac
ANSIBLE_PLAYBOOK=${ANSIBLE_PLAYBOOK:-$ROOT/.venv/bin/ansible-playbook}
PLAYBOOK=${PLAYBOOK:-site.yml}
IMAGE=${BLACKWELL_SANDBOX_IMAGE:-localhost/blackwell-sandbox:bookworm}
CONNECTION=${BENCH_CONNECTION:-ssh}
case $CONNECTION in (ssh|podman) ;; (*) echo "BENCH_CONNECTION must be ssh or podman" >&2; exit 2;; esac
[[ -x /usr/bin/time ]] || { echo "needs /usr/bin/time for the controller's CPU time (Debian: apt install time)" >&2; exit 2; }
WORK=$(mktemp -d /tmp/noop-bench.XXXXXX)
export BLACKWELL_ARTIFACT_CACHE=$WORK/artifacts
export ANSIBLE_COLLECTIONS_PATH=$ROOT/collections
export ANSIBLE_CONFIG=$ROOT/ansible.cfg                 # the shipped settings: profile_tasks, pipelining, forks
export ANSIBLE_CACHE_PLUGIN_CONNECTION=$WORK/facts      # fresh containers: no facts from an earlier run
export PROFILE_TASKS_TASK_OUTPUT_LIMIT=${PROFILE_TASKS_TASK_OUTPUT_LIMIT:-25}
# tests/bench/callback_plugins/task_kinds.py: one line per task result (kind: module, controller, skipped) for the
# "where the rerun's time goes" table; the shipped callbacks of ansible.cfg stay enabled
export ANSIBLE_CALLBACK_PLUGINS=$ROOT/tests/bench/callback_plugins
export ANSIBLE_CALLBACKS_ENABLED=ansible.posix.profile_tasks,blackwell.sglang.preload,task_kinds
OUT=${OUT_MD:-$ROOT/docs/benchmarks/noop-${N}host-$(date -u +%Y%m%d)-$CONNECTION.md}
mkdir -p "$(dirname "$OUT")"
NAME=bw-noop

# shellcheck source=tests/bench/sandbox_hosts.sh
. "$ROOT/tests/bench/sandbox_hosts.sh"
inventory() { bench_inventory "$WORK/inv.yml" noop "$NAME" "$N"; }
up() { bench_up noop "$NAME" "$N"; }
down() { bench_down "$NAME" "$N"; }
trap down EXIT

timed() {  # timed <label> -> seconds on stdout, log in $WORK/<label>.log
  local label=$1 start end
  start=$(date +%s)
  # /usr/bin/time: CPU of ansible-playbook and the children it waits for (its workers, the ssh clients), i.e. the
  # controller's share; the work inside the containers is not counted
  (cd "$WORK" && TASK_KINDS_TSV=$WORK/$label.tsv timeout 5400 /usr/bin/time -f '%U %S' -o "$WORK/$label.cpu" \
     "$ANSIBLE_PLAYBOOK" -i "$WORK/inv.yml" "$ROOT/$PLAYBOOK" > "$WORK/$label.log" 2>&1) \
    || { echo "rollout failed for $label, see $WORK/$label.log" >&2; tail -30 "$WORK/$label.log" >&2; exit 1; }
  end=$(date +%s)
  echo $((end - start))
}

recap() {  # "ok=.. changed=.. skipped=.. failed=.." summed over the hosts of a run's PLAY RECAP lines
  awk '/ : ok=/{for(i=1;i<=NF;i++){split($i,kv,"="); if(kv[1]~/^(ok|changed|skipped|failed)$/) s[kv[1]]+=kv[2]}}
       END{printf "ok=%d changed=%d skipped=%d failed=%d", s["ok"], s["changed"], s["skipped"], s["failed"]}' "$WORK/$1.log"
}

slowest() {  # the profile_tasks recap of the last play of a run, as Markdown rows
  awk '/TASKS RECAP/{buf=""; on=1; next} on && / -+ +[0-9.]+s$/{buf=buf $0 "\n"} END{printf "%s", buf}' "$WORK/$1.log" \
    | sed -E 's/^(.*[^ -]) -+ +([0-9.]+)s$/| \1 | \2 |/' | head -"$PROFILE_TASKS_TASK_OUTPUT_LIMIT"
}

stamps() {  # "matched/all" of a run's venv_stamp checks (task_kinds TSV; no -v: a user's run does not print results)
  awk -F'\t' '$5 == "blackwell.sglang.venv_stamp" && $8 != "" {all++; if ($8 == "true") m++}
               END{printf "%d/%d", m, all}' "$WORK/$1.tsv"
}

kinds() {  # the run's task time by kind and by role (task_kinds TSV), as Markdown rows
  python3 - "$WORK/$1.tsv" <<'PY'
import collections
import sys

rows = [line.rstrip("\n").split("\t") for line in open(sys.argv[1], encoding="utf-8")]
kinds = ("module", "controller", "skipped")
for kind in kinds:
    sel = [float(r[3]) for r in rows if r[2] == kind]
    print("| %s | %d | %.1f |" % (kind, len(sel), sum(sel)))
print("| (distinct modules) | %d | |" % len({r[4] for r in rows if r[2] == "module"}))
print()
print("| role | module tasks | s | controller tasks | s | skipped | s |")
print("|---|---|---|---|---|---|---|")
roles = collections.defaultdict(lambda: collections.defaultdict(list))
for r in rows:
    roles[r[5].rsplit(".", 1)[-1]][r[2]].append(float(r[3]))
for role, by in sorted(roles.items(), key=lambda kv: -sum(map(sum, kv[1].values()))):
    print("| %s | %s |" % (role, " | ".join("%d | %.1f" % (len(by[k]), sum(by[k])) for k in kinds)))
PY
}

load() { uptime | sed -E 's/.*load average: //'; }

cpu() { awk '{printf "%.0f", $1 + $2}' "$WORK/$1.cpu"; }   # controller CPU seconds (user + sys) of a run

[[ $CONNECTION == podman ]] || KEY=$(bash "$ROOT/tests/sandbox/ssh-setup.sh" "$IMAGE")
inventory >/dev/null
echo "== $N host(s), first converge ($CONNECTION)"; up; l0=$(load); t1=$(timed first); l1=$(load)
echo "== $N host(s), no-op rerun ($CONNECTION)"; t2=$(timed rerun); l2=$(load)
changed=$(recap rerun | sed -E 's/.*changed=([0-9]+).*/\1/')

cat > "$OUT" <<MD
# No-op converge benchmark, $N host(s), $(date -u +%Y-%m-%d)

Machine: $(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GiB RAM, $(. /etc/os-release; echo "$PRETTY_NAME"), podman $(podman --version | awk '{print $3}').
Commit: $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- roles playbooks plugins || echo ' (with uncommitted changes)').
Playbook: $PLAYBOOK on fresh sandbox containers of image $IMAGE ($(podman image inspect --format '{{.Id}}' "$IMAGE" | cut -c1-12); inventories/sandbox group_vars), then again unchanged. Script: tests/bench/noop_ratio.sh.
Connection: $CONNECTION$( [[ $CONNECTION == ssh ]] && echo " (ProxyCommand tests/sandbox/ssh-proxy.sh: sshd -i over podman exec -i; pipelining, ControlPersist from ansible.cfg)" || echo " (containers.podman.podman: no pipelining)").

| run | wall time (s) | controller CPU (s) | tasks (all hosts) | venv_stamp results matched/all | load average (1/5/15 min) before; after | goal |
|---|---|---|---|---|---|---|
| first converge | $t1 | $(cpu first) | $(recap first) | $(stamps first) | $l0; $l1 | |
| no-op rerun | $t2 | $(cpu rerun) | $(recap rerun) | $(stamps rerun) | $l1; $l2 | <= 10% of $t1 = $((t1 / 10)) s: $( [ "$t2" -le $((t1 / 10)) ] && echo met || echo missed ); changed=0: $( [ "$changed" -eq 0 ] && echo met || echo missed ) |

Ratio: $(awk -v a="$t2" -v b="$t1" 'BEGIN{printf "%.1f%%", 100 * a / b}').

Where the rerun's task time goes (tests/bench/callback_plugins/task_kinds.py; a loop is one task; per-task prices:
tests/bench/task_cost.sh):

| kind | tasks | s |
|---|---|---|
$(kinds rerun)

Slowest tasks of the rerun's last play (profile_tasks):

| task | s |
|---|---|
$(slowest rerun)
MD
cat "$OUT"
cp "$WORK/rerun.tsv" "${OUT%.md}.rerun.tsv"   # for tests/bench/task_cost.sh (TASK_KINDS_TSV=...)
echo "logs: $WORK"
