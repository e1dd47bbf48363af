#!/usr/bin/env bash
# Build the local SGLang git mirror that the sandbox installs from: .cache/mirror/sglang.git (a bare repository,
# seen in sandbox containers as /srv/mirror/sglang.git).
#
# Contents of its single commit (upstream layout):
#   python/      the REAL SGLang source release from PyPI (the sglang sdist, default 0.5.9), unpacked unchanged
#   sgl-kernel/  our sgl-kernel-shaped TEST FIXTURE (tests/fixtures/sgl_kernel_project): the 0.5.9 sdist has no
#                kernel directory, so the fixture stands in for it (it says so in its README)
#   README.md    says plainly what is real and what is a fixture
# Author, committer and dates are fixed, so the commit id depends only on the inputs. Refs: branches `main` and
# `sandbox`, tag `v<version>-sandbox`. Skipped when the inputs (sdist hash, fixture tree, this script) are unchanged;
# rebuilt and republished atomically when they change. The commit id is written to .cache/mirror/sglang.env.
#
# Env: SGLANG_MIRROR_VERSION (default 0.5.9), SGLANG_MIRROR_FIXTURE (default tests/fixtures/sgl_kernel_project),
#      SGLANG_MIRROR_INDEX (default https://pypi.org/simple), SGLANG_MIRROR_FORCE=1 to rebuild,
#      SGLANG_MIRROR_OUT (default <repo>/.cache/mirror).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
VERSION=${SGLANG_MIRROR_VERSION:-0.5.9}
FIXTURE=${SGLANG_MIRROR_FIXTURE:-$repo/tests/fixtures/sgl_kernel_project}
INDEX=${SGLANG_MIRROR_INDEX:-https://pypi.org/simple}
OUT=${SGLANG_MIRROR_OUT:-$repo/.cache/mirror}
SDIST_DIR=$repo/.cache/sglang-sdist
BARE=$OUT/sglang.git
TAG=v$VERSION-sandbox
FIXED_DATE="2026-03-07T00:00:00+0000"
start=$SECONDS

log() { printf '[sglang-mirror %(%H:%M:%S)T +%3ss] %s\n' -1 "$((SECONDS - start))" "$*"; }
die() { echo "build_sglang_mirror.sh: $*" >&2; exit 1; }

command -v git >/dev/null || die "git is not installed"
for f in CMakeLists.txt pyproject.toml README.md; do
  [[ -f $FIXTURE/$f ]] || die "the sgl-kernel fixture project is missing or incomplete: $FIXTURE/$f not found.
  It is written by the sgl_kernel_sm120 owner (tests/fixtures/sgl_kernel_project); set SGLANG_MIRROR_FIXTURE to
  another sgl-kernel-shaped project to build the mirror without it."
done
grep -qi 'fixture' "$FIXTURE/README.md" || die "$FIXTURE/README.md must say plainly that it is a test fixture"

# --- the real SGLang sdist from PyPI ---------------------------------------------------------------------------
sdist=$SDIST_DIR/sglang-$VERSION.tar.gz
if [[ ! -s $sdist ]]; then
  log "downloading the sglang $VERSION sdist from $INDEX"
  mkdir -p "$SDIST_DIR"
  pip=$(command -v pip3 || true)
  [[ -x $repo/.venv/bin/pip ]] && pip=$repo/.venv/bin/pip
  [[ -n $pip ]] || die "pip is needed to download the sdist (run make deps)"
  cert=()
  [[ -r /etc/ssl/certs/ca-certificates.crt ]] && cert=(--cert /etc/ssl/certs/ca-certificates.crt)
  # PIP_CONFIG_FILE=/dev/null: host-specific indexes/constraints must not decide which sdist we get.
  env -u PIP_FIND_LINKS -u PIP_EXTRA_INDEX_URL -u PIP_INDEX_URL -u PIP_CONSTRAINT PIP_CONFIG_FILE=/dev/null \
    timeout 600 "$pip" download --no-deps --no-binary :all: --progress-bar off \
    --index-url "$INDEX" "${cert[@]}" -d "$SDIST_DIR" "sglang==$VERSION"
  [[ -s $sdist ]] || die "pip download did not produce $sdist"
fi
sdist_sha=$(sha256sum "$sdist" | cut -d' ' -f1)

# --- inputs hash: the sdist, the fixture tree (paths, exec bits, contents), this script --------------------------
fixture_files() {
  (cd "$FIXTURE" && find . -type f \
    -not -path '*/__pycache__/*' -not -name '*.pyc' -not -name '*.whl' -not -path './build/*' \
    -not -path './dist/*' -not -path './_skbuild/*' -not -path '*.egg-info/*' -not -path './.pytest_cache/*' \
    | LC_ALL=C sort)
}
fixture_hash=$(cd "$FIXTURE" && fixture_files | while read -r f; do
  printf '%s %s %s\n' "$f" "$([[ -x $f ]] && echo x || echo -)" "$(sha256sum < "$f" | cut -d' ' -f1)"
done | sha256sum | cut -d' ' -f1)
inputs=$(printf '%s\n' "$VERSION" "$sdist_sha" "$fixture_hash" "$(sha256sum < "${BASH_SOURCE[0]}")" | sha256sum | cut -c1-16)

if [[ ${SGLANG_MIRROR_FORCE:-0} != 1 && -f $BARE/blackwell-mirror.inputs && $(cat "$BARE/blackwell-mirror.inputs") == "$inputs" ]]; then
  log "$BARE is up to date (inputs $inputs, commit $(git --git-dir="$BARE" rev-parse "refs/heads/sandbox"))"
  exit 0
fi
log "building $BARE (inputs $inputs; sglang $VERSION sdist sha256 ${sdist_sha:0:16}, fixture ${fixture_hash:0:16})"

work=$(mktemp -d "${TMPDIR:-/tmp}/sglang-mirror.XXXXXX")
trap 'rm -rf "$work"' EXIT
src=$work/src
mkdir -p "$src/python" "$src/sgl-kernel"
tar -xzf "$sdist" -C "$src/python" --strip-components=1 --no-same-owner
[[ -f $src/python/pyproject.toml ]] || die "the sdist has no pyproject.toml at its top level"
(cd "$FIXTURE" && fixture_files | tar -cf - --no-recursion -T -) | tar -xf - -C "$src/sgl-kernel" --no-same-owner

cat > "$src/README.md" <<README
# SGLang $VERSION -- local sandbox mirror for blackwell.sglang

This repository is built by \`tests/sandbox/build_sglang_mirror.sh\` of the blackwell.sglang Ansible collection
for its offline sandbox (machines that reach PyPI but not GitHub).

- \`python/\` is the real SGLang $VERSION source release, unpacked unchanged from the sdist on PyPI
  (sglang-$VERSION.tar.gz, sha256 $sdist_sha).
- \`sgl-kernel/\` is **NOT** SGLang's sgl-kernel. It is a small **test fixture** written for blackwell.sglang: a
  CMake/CUDA project shaped like sgl-kernel (same build backend, CMake structure and Python package layout) that
  really compiles a tiny CUDA kernel for sm_120a. The $VERSION release has no kernel directory; this fixture lets
  the kernel build role run for real. Do not use this repository for anything but testing.
README

export GIT_AUTHOR_NAME="blackwell.sglang sandbox" GIT_AUTHOR_EMAIL="sandbox@blackwell-sglang.invalid"
export GIT_COMMITTER_NAME="$GIT_AUTHOR_NAME" GIT_COMMITTER_EMAIL="$GIT_AUTHOR_EMAIL"
export GIT_AUTHOR_DATE="$FIXED_DATE" GIT_COMMITTER_DATE="$FIXED_DATE"
export GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null
g() { git -C "$src" -c core.autocrlf=false -c core.fileMode=true -c init.defaultBranch=main "$@"; }
g init -q
g add -A -f .
g commit -q --no-gpg-sign -m "SGLang $VERSION (PyPI sdist) + sgl-kernel-shaped test fixture

python/: sglang-$VERSION.tar.gz from PyPI, sha256 $sdist_sha
sgl-kernel/: blackwell.sglang test fixture (tests/fixtures/sgl_kernel_project), tree $fixture_hash"
g branch sandbox
g tag "$TAG"
commit=$(g rev-parse HEAD)
log "commit $commit ($(g ls-files | wc -l) files)"

mkdir -p "$OUT"
new=$OUT/.sglang.git.new.$$
rm -rf "$new"
git clone -q --bare "$src" "$new"
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
SGLANG_MIRROR_VERSION=$VERSION
SGLANG_MIRROR_COMMIT=$commit
SGLANG_MIRROR_TAG=$TAG
SGLANG_MIRROR_BRANCH=sandbox
SGLANG_MIRROR_SDIST_SHA256=$sdist_sha
ENV
log "published $BARE: branches main, sandbox; tag $TAG; commit $commit"
