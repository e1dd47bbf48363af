#!/usr/bin/env bash
# Build the local SGLang git mirror that the sandbox installs from: .cache/mirror/sglang.git (a bare repository,
# seen in sandbox containers as /srv/mirror/sglang.git).
#
# Source: the REAL SGLang trees at the inventory's pins, from the upstream source bundle (read-only; MANIFEST.md):
#   sglang-2026-03-07-d28f35240a.tar.gz   python/ and sgl-kernel/ at d28f35240a28de1e09967975e258b3dd7e74924f
#   sglang-2026-08-18-d55f1c28e2.tar.gz   python/ (incl. python/sglang/kernels/aot) at d55f1c28e223226575d40d4449266630eaf2a277
# Refs (each commit has a fixed author and the upstream commit date, so its id depends only on the inputs; the ids
# are NOT upstream's: the bundle holds trees, not history, and the commit message names the upstream id):
#   original-20260307                 the real 0307 tree, unchanged (python/ + the real sgl-kernel/)
#   current-20260818                  the real 0818 tree, unchanged (python/, kernel tree python/sglang/kernels/aot)
#   original-20260307-fixture-kernel  child of original-20260307: the real python/, but sgl-kernel/ replaced by our
#                                     sgl-kernel-shaped TEST FIXTURE (tests/fixtures/sgl_kernel_project), so the sandbox's
#                                     kernel build compiles in about a minute on 2 cores. The real kernel trees are
#                                     configured (not compiled) by the kernel tests from the bundle itself.
#   current-20260818-fixture-kernel   child of current-20260818, built the same way: the real python/, but the kernel
#                                     tree python/sglang/kernels/aot/ replaced by the same fixture, its [project] name
#                                     and version (and the package's __version__) set to the real tree's kernel
#                                     (sglang-kernel 0.4.6.post1), so the installed distribution is the one the
#                                     current tree pins and checks at start-up.
#   main, sandbox                     aliases of original-20260307-fixture-kernel (what the sandbox inventory pins)
# The 0.5.9 sdist route of earlier versions is gone: it tested nothing the real trees do not (it was neither pin
# nor an ancestor of one).
#
# A user's clone has no ../shared/upstream: `make upstream` (tests/sandbox/fetch_upstream.py, run before `make mirror`)
# fetches the same trees from GitHub into .cache/upstream, in the bundle's layout, which this script reads the same way.
# Run on its own without either, the script builds nothing, says so, writes the reason to <out>/sglang.skip and exits
# 0; molecule/_shared/run-scenarios.sh then reports the scenarios that install SGLang from the mirror as skipped with
# that reason. SGLANG_MIRROR_REQUIRE_UPSTREAM=1 (what `make mirror` sets) makes the absence an error.
#
# Skipped when the inputs (tarball hashes, fixture tree, this script) are unchanged; rebuilt and republished
# atomically when they change. The refs and commit ids are written to <out>/sglang.env.
#
# Env: BLACKWELL_UPSTREAM (default <repo>/../shared/upstream when it holds a manifest.json, else <repo>/.cache/upstream:
#      the Makefile's rule), SGLANG_MIRROR_FIXTURE (default
#      tests/fixtures/sgl_kernel_project), SGLANG_MIRROR_FORCE=1 to rebuild, SGLANG_MIRROR_OUT (default
#      <repo>/.cache/mirror), SGLANG_MIRROR_REQUIRE_UPSTREAM=1 to fail instead of skipping without the bundle.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
if [[ -z ${BLACKWELL_UPSTREAM:-} && ! -f $repo/../shared/upstream/manifest.json ]]; then
  UPSTREAM=$repo/.cache/upstream
else
  UPSTREAM=${BLACKWELL_UPSTREAM:-$repo/../shared/upstream}
fi
FIXTURE=${SGLANG_MIRROR_FIXTURE:-$repo/tests/fixtures/sgl_kernel_project}
OUT=${SGLANG_MIRROR_OUT:-$repo/.cache/mirror}
BARE=$OUT/sglang.git
start=$SECONDS

# The pins: ref, tarball, upstream commit, its date (MANIFEST.md), the trees taken from the tarball, where the tree
# keeps its kernel (the fixture child replaces that directory).
PINS=(
  "original-20260307|sglang-2026-03-07-d28f35240a.tar.gz|d28f35240a28de1e09967975e258b3dd7e74924f|2026-03-07T15:13:25-08:00|python sgl-kernel|sgl-kernel"
  "current-20260818|sglang-2026-08-18-d55f1c28e2.tar.gz|d55f1c28e223226575d40d4449266630eaf2a277|2026-08-18T09:10:54+08:00|python|python/sglang/kernels/aot"
)
SANDBOX_REF=original-20260307-fixture-kernel

log() { printf '[sglang-mirror %(%H:%M:%S)T +%3ss] %s\n' -1 "$((SECONDS - start))" "$*"; }
die() { echo "build_sglang_mirror.sh: $*" >&2; exit 1; }

command -v git >/dev/null || die "git is not installed"
for f in CMakeLists.txt pyproject.toml README.md; do
  [[ -f $FIXTURE/$f ]] || die "the sgl-kernel fixture project is missing or incomplete: $FIXTURE/$f not found.
  It is written by the sgl_kernel_sm120 owner (tests/fixtures/sgl_kernel_project); set SGLANG_MIRROR_FIXTURE to
  another sgl-kernel-shaped project to build the mirror without it."
done
grep -qi 'fixture' "$FIXTURE/README.md" || die "$FIXTURE/README.md must say plainly that it is a test fixture"

# --- the upstream bundle -----------------------------------------------------------------------------------------
missing=()
for pin in "${PINS[@]}"; do
  IFS='|' read -r _ tarball _ _ _ _ <<<"$pin"
  [[ -r $UPSTREAM/$tarball ]] || missing+=("$tarball")
done
if ((${#missing[@]})); then
  reason="the upstream source bundle is not at $UPSTREAM (missing: ${missing[*]}); the sandbox installs the real pinned SGLang trees from it. Run make upstream (it fetches them from GitHub into .cache/upstream) or set BLACKWELL_UPSTREAM to the directory that holds them (see MANIFEST.md there)"
  [[ ${SGLANG_MIRROR_REQUIRE_UPSTREAM:-0} == 1 ]] && die "$reason"
  mkdir -p "$OUT"
  echo "$reason" > "$OUT/sglang.skip"
  log "SKIP: $reason. No mirror was built: the Molecule scenarios that install SGLang from it are reported as skipped."
  exit 0
fi
rm -f "$OUT/sglang.skip"

# --- inputs hash: the tarballs, the fixture tree (paths, exec bits, contents), this script ------------------------
fixture_files() {
  (cd "$FIXTURE" && find . -type f \
    -not -path '*/__pycache__/*' -not -name '*.pyc' -not -name '*.whl' -not -path './build/*' \
    -not -path './dist/*' -not -path './_skbuild/*' -not -path '*.egg-info/*' -not -path './.pytest_cache/*' \
    | LC_ALL=C sort)
}
fixture_hash=$(cd "$FIXTURE" && fixture_files | while read -r f; do
  printf '%s %s %s\n' "$f" "$([[ -x $f ]] && echo x || echo -)" "$(sha256sum < "$f" | cut -d' ' -f1)"
done | sha256sum | cut -d' ' -f1)
declare -A tar_sha=()
for pin in "${PINS[@]}"; do
  IFS='|' read -r _ tarball _ _ _ _ <<<"$pin"
  tar_sha[$tarball]=$(sha256sum "$UPSTREAM/$tarball" | cut -d' ' -f1)
done
inputs=$({ for t in "${!tar_sha[@]}"; do echo "$t ${tar_sha[$t]}"; done | LC_ALL=C sort
           echo "$fixture_hash"; sha256sum < "${BASH_SOURCE[0]}"; } | sha256sum | cut -c1-16)

if [[ ${SGLANG_MIRROR_FORCE:-0} != 1 && -f $BARE/blackwell-mirror.inputs && $(cat "$BARE/blackwell-mirror.inputs") == "$inputs" ]]; then
  log "$BARE is up to date (inputs $inputs, $SANDBOX_REF at $(git --git-dir="$BARE" rev-parse "refs/heads/$SANDBOX_REF"))"
  exit 0
fi
log "building $BARE (inputs $inputs, bundle $UPSTREAM, fixture ${fixture_hash:0:16})"

work=$(mktemp -d "${TMPDIR:-/tmp}/sglang-mirror.XXXXXX")
trap 'rm -rf "$work"' EXIT
src=$work/src
export GIT_AUTHOR_NAME="blackwell.sglang sandbox" GIT_AUTHOR_EMAIL="sandbox@blackwell-sglang.invalid"
export GIT_COMMITTER_NAME="$GIT_AUTHOR_NAME" GIT_COMMITTER_EMAIL="$GIT_AUTHOR_EMAIL"
export GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null
g() { git -C "$src" -c core.autocrlf=false -c core.fileMode=true -c init.defaultBranch=main "$@"; }
mkdir -p "$src"
g init -q

# mirror_readme REF UPSTREAM_COMMIT TARBALL TEXT: the only file of a commit that is not upstream's.
mirror_readme() {
  cat > "$src/BLACKWELL-MIRROR.md" <<README
# Local sandbox mirror of blackwell.sglang: ref \`$1\`

Built by \`tests/sandbox/build_sglang_mirror.sh\` of the blackwell.sglang Ansible collection for its offline sandbox
(machines that reach PyPI but not GitHub). Only this file is not upstream's.

- Upstream: https://github.com/sgl-project/sglang commit \`$2\`, from the source bundle's \`$3\`
  (sha256 ${tar_sha[$3]}). This repository has no upstream history: its commit ids are not upstream's.
$4
README
}

declare -A commit_of=()
for pin in "${PINS[@]}"; do
  IFS='|' read -r ref tarball upstream_commit date trees kernel_dir <<<"$pin"
  g checkout -q --orphan "$ref"
  g read-tree --empty
  find "$src" -mindepth 1 -maxdepth 1 -not -name .git -exec rm -rf {} +
  read -ra tree_list <<<"$trees"
  tar -xzf "$UPSTREAM/$tarball" -C "$src" --strip-components=1 --no-same-owner "${tree_list[@]/#/sglang/}"
  listed=""
  for t in "${tree_list[@]}"; do
    [[ -d $src/$t ]] || die "$tarball has no sglang/$t"
    listed+="\`$t/\` "
  done
  [[ -f $src/python/pyproject.toml ]] || die "$tarball has no python/pyproject.toml"
  mirror_readme "$ref" "$upstream_commit" "$tarball" "- Trees: ${listed}exactly as upstream has them at that commit."
  g add -A -f .
  GIT_AUTHOR_DATE=$date GIT_COMMITTER_DATE=$date g commit -q --no-gpg-sign -m "SGLang $upstream_commit (real upstream trees: $trees)

From the upstream source bundle: $tarball, sha256 ${tar_sha[$tarball]}.
Upstream commit: $upstream_commit ($date). No upstream history: this commit's id is not upstream's."
  commit_of[$ref]=$(g rev-parse HEAD)
  log "$ref: commit ${commit_of[$ref]} = upstream $upstream_commit ($(g ls-files | wc -l) files)"

  # The fixture child: the real python/ of this pin, the fixture where this tree keeps its kernel.
  fixture_ref=$ref-fixture-kernel
  [[ -f $src/$kernel_dir/pyproject.toml ]] || die "$tarball has no kernel tree at sglang/$kernel_dir"
  # the real kernel's distribution name and version ([project] of its pyproject.toml), before the tree is replaced
  kernel_project=$(awk -F' = ' '/^\[/ {p = ($0 == "[project]")} p && $1 ~ /^(name|version)$/ {gsub(/"/, "", $2); print $1 "=" $2}' \
    "$src/$kernel_dir/pyproject.toml")
  kernel_name=$(sed -n 's/^name=//p' <<<"$kernel_project")
  kernel_version=$(sed -n 's/^version=//p' <<<"$kernel_project")
  [[ -n $kernel_name && -n $kernel_version ]] || die "$tarball: no [project] name and version in $kernel_dir/pyproject.toml"
  g checkout -q -b "$fixture_ref"
  g rm -rq "$kernel_dir"
  rm -rf "${src:?}/$kernel_dir"
  mkdir -p "$src/$kernel_dir"
  (cd "$FIXTURE" && fixture_files | tar -cf - --no-recursion -T -) | tar -xf - -C "$src/$kernel_dir" --no-same-owner
  fixture_name=$(sed -n 's/^name = "\(.*\)"$/\1/p' "$src/$kernel_dir/pyproject.toml")
  fixture_version=$(sed -n 's/^version = "\(.*\)"$/\1/p' "$src/$kernel_dir/pyproject.toml")
  renamed=""
  if [[ $kernel_name != "$fixture_name" || $kernel_version != "$fixture_version" ]]; then
    sed -i -e "s/^name = \"$fixture_name\"\$/name = \"$kernel_name\"/" \
      -e "s/^version = \"$fixture_version\"\$/version = \"$kernel_version\"/" "$src/$kernel_dir/pyproject.toml"
    sed -i "s/^__version__ = \"$fixture_version\"\$/__version__ = \"$kernel_version\"/" \
      "$src/$kernel_dir/python/sgl_kernel/__init__.py"
    if ! { grep -qx "name = \"$kernel_name\"" "$src/$kernel_dir/pyproject.toml" \
           && grep -qx "version = \"$kernel_version\"" "$src/$kernel_dir/pyproject.toml" \
           && grep -qx "__version__ = \"$kernel_version\"" "$src/$kernel_dir/python/sgl_kernel/__init__.py"; }; then
      die "the fixture's name and version could not be set to $kernel_name $kernel_version"
    fi
    renamed="
  Its \`pyproject.toml\` [project] name and version and the package's \`__version__\` are set to the real kernel tree's
  ($kernel_name $kernel_version instead of the fixture's $fixture_name $fixture_version): the installed distribution
  is the one this SGLang pins and checks at start-up."
  fi
  python_note="unchanged"
  [[ $kernel_dir == python/* ]] && python_note="unchanged but for \`$kernel_dir/\`"
  mirror_readme "$fixture_ref" "$upstream_commit" "$tarball" "- \`python/\` is the real upstream tree at that commit, $python_note.
- \`$kernel_dir/\` is **NOT** SGLang's kernel tree: it is blackwell.sglang's sgl-kernel-shaped **test fixture**
  (tests/fixtures/sgl_kernel_project, tree sha256 $fixture_hash), a small CMake/CUDA project with sgl-kernel's build
  backend, CMake structure and package layout that compiles one tiny CUDA kernel for sm_120a in about a minute.$renamed
  It stands in for the real \`$kernel_dir/\` (parent commit, ref $ref), whose build needs the fetched repositories
  and hours of nvcc. Do not use this ref for anything but testing."
  g add -A -f .
  GIT_AUTHOR_DATE=$date GIT_COMMITTER_DATE=$date g commit -q --no-gpg-sign -m "sandbox: $kernel_dir/ replaced by the sgl-kernel-shaped test fixture

python/ is upstream $upstream_commit, $kernel_dir/ is blackwell.sglang's test fixture
(tests/fixtures/sgl_kernel_project, tree $fixture_hash, as $kernel_name $kernel_version), not SGLang's kernel."
  commit_of[$fixture_ref]=$(g rev-parse HEAD)
  log "$fixture_ref: commit ${commit_of[$fixture_ref]} ($kernel_dir/ = fixture, $kernel_name $kernel_version)"
done
g branch -f main "${commit_of[$SANDBOX_REF]}"
g branch -f sandbox "${commit_of[$SANDBOX_REF]}"

mkdir -p "$OUT"
new=$OUT/.sglang.git.new.$$
rm -rf "$new"
git clone -q --bare --no-local "$src" "$new"
git --git-dir="$new" symbolic-ref HEAD refs/heads/main
git --git-dir="$new" update-server-info
echo "$inputs" > "$new/blackwell-mirror.inputs"
# Publish atomically: containers mount .cache/mirror, so swapping the child directory is seen at once.
if [[ -e $BARE ]]; then
  mv "$BARE" "$OUT/.sglang.git.old.$$"
fi
mv "$new" "$BARE"
rm -rf "$OUT/.sglang.git.old.$$"
cat > "$OUT/sglang.env" <<ENV
SGLANG_MIRROR_BRANCH=$SANDBOX_REF
SGLANG_MIRROR_COMMIT=${commit_of[$SANDBOX_REF]}
SGLANG_MIRROR_ORIGINAL_20260307_COMMIT=${commit_of[original-20260307]}
SGLANG_MIRROR_ORIGINAL_20260307_UPSTREAM=d28f35240a28de1e09967975e258b3dd7e74924f
SGLANG_MIRROR_CURRENT_20260818_COMMIT=${commit_of[current-20260818]}
SGLANG_MIRROR_CURRENT_20260818_UPSTREAM=d55f1c28e223226575d40d4449266630eaf2a277
SGLANG_MIRROR_CURRENT_20260818_FIXTURE_KERNEL_COMMIT=${commit_of[current-20260818-fixture-kernel]}
SGLANG_MIRROR_UPSTREAM=$UPSTREAM
ENV
log "published $BARE: branches ${!commit_of[*]}, main, sandbox (= $SANDBOX_REF)"
