#!/bin/sh
# The stand-in for NVIDIA's CUDA apt repository in the first_run scenario (docs/testing.md, "first_run"):
#   cuda-standin-repo.sh DIR   ->  DIR/debian12/x86_64/{InRelease,Release,Release.gpg,Packages,3bf863cc.pub,*.deb}
# laid out as NVIDIA's (a flat repository per <slug>/<arch>, `Suites: /`, the key beside it as 3bf863cc.pub),
# signed with a key made here, so the role's deb822 source, key import, signature check and install run for real.
# The one package, cuda-toolkit-13-0, holds a stand-in toolkit under /usr/local/cuda-13.0: an nvcc shell script that
# answers --version / --list-gpu-arch as nvcc 13.0.88 does and, for the compile proof, builds the check's host part
# with the real host compiler (-ccbin: the g++ the role installs); the runtime header with CUDART_VERSION 13000,
# the CCCL layout, ptxas and libcudart.so as empty stand-ins. No device code is compiled: the sandbox has no GPU,
# and the real nvcc's compile proof runs in the cuda_toolchain scenario (pip method).
set -eu
dir=${1:?usage: cuda-standin-repo.sh DIR}
repo=$dir/debian12/x86_64
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
root=$work/pkg
home=$root/usr/local/cuda-13.0
mkdir -p "$root/DEBIAN" "$home/bin" "$home/lib64" "$home/include/cccl/cuda/std" "$repo"

cat > "$home/bin/nvcc" <<'NVCC'
#!/bin/sh
# stand-in nvcc of the first_run scenario's cuda-toolkit-13-0 (molecule/first_run/files/cuda-standin-repo.sh)
case "${1:-}" in
  --version)
    printf '%s\n' "nvcc: NVIDIA (R) Cuda compiler driver" "Cuda compilation tools, release 13.0, V13.0.88" \
      "Build cuda_13.0.r13.0/compiler.36424714_0 (first_run stand-in)"
    exit 0;;
  --list-gpu-arch)
    printf 'compute_%s\n' 75 80 86 87 88 89 90 100 110 103 120 121
    exit 0;;
esac
ccbin=c++ out=a.out define=""
while [ $# -gt 0 ]; do
  case "$1" in
    -ccbin) ccbin=$2; shift;;
    -o) out=$2; shift;;
    -DBLACKWELL_EXPECT_ARCH_SPECIFIC=*) define=$1;;
  esac
  shift
done
exec "$ccbin" -x c++ $define -o "$out" - <<'SRC'
#include <cstdio>
int main() {
  std::printf("sm_%d arch-specific compile check: ok (first_run stand-in nvcc, host part only)\n",
              BLACKWELL_EXPECT_ARCH_SPECIFIC / 10);
  return 0;
}
SRC
NVCC
printf '#!/bin/sh\necho "ptxas: NVIDIA (R) Ptx optimizing assembler, release 13.0, V13.0.88 (first_run stand-in)"\n' \
  > "$home/bin/ptxas"
chmod 0755 "$home/bin/nvcc" "$home/bin/ptxas"
printf '#define CUDART_VERSION 13000\n' > "$home/include/cuda_runtime_api.h"
: > "$home/include/cccl/cuda/std/utility"
: > "$home/include/cuda_fp4.h"
: > "$home/lib64/libcudart.so"
cat > "$root/DEBIAN/control" <<'CONTROL'
Package: cuda-toolkit-13-0
Version: 13.0.2-1
Architecture: amd64
Maintainer: blackwell.sglang tests <tests@blackwell-sglang.invalid>
Description: stand-in CUDA 13.0 toolkit of the first_run scenario (no compiler inside)
CONTROL
deb=cuda-toolkit-13-0_13.0.2-1_amd64.deb
dpkg-deb --root-owner-group --build "$root" "$repo/$deb" >/dev/null

# Packages and Release as apt reads a flat repository (what dpkg-scanpackages / apt-ftparchive would write)
{
  dpkg-deb --field "$repo/$deb"
  echo "Filename: ./$deb"
  echo "Size: $(stat -c %s "$repo/$deb")"
  echo "SHA256: $(sha256sum "$repo/$deb" | cut -d' ' -f1)"
  echo
} > "$repo/Packages"
{
  echo "Origin: blackwell-sglang first_run stand-in"
  echo "Label: cuda-standin"
  echo "Date: $(LC_ALL=C date -u '+%a, %d %b %Y %H:%M:%S UTC')"
  echo "SHA256:"
  echo " $(sha256sum "$repo/Packages" | cut -d' ' -f1) $(stat -c %s "$repo/Packages") Packages"
} > "$repo/Release"

export GNUPGHOME="$work/gnupg"
mkdir -m 0700 "$GNUPGHOME"
gpg --batch --quiet --pinentry-mode loopback --passphrase '' \
  --quick-gen-key 'blackwell-sglang first_run stand-in <tests@blackwell-sglang.invalid>' ed25519 sign never
gpg --batch --quiet --armor --export > "$repo/3bf863cc.pub"
gpg --batch --quiet --yes --clearsign --output "$repo/InRelease" "$repo/Release"
gpg --batch --quiet --yes --armor --detach-sign --output "$repo/Release.gpg" "$repo/Release"
chmod -R a+rX "$dir"
echo "stand-in repository at $repo: $(find "$repo" -mindepth 1 -maxdepth 1 -printf '%f ')"
