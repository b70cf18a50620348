#!/bin/sh
# setup.sh - installs hcomm's build dependencies (Debian 12, as root) and builds it.
# clang and libclang-rt-14-dev (libFuzzer's runtime, only recommended by
# clang) are for make fuzz (tests/fuzz/run.sh); python3-torch, libtorch-dev,
# pybind11-dev and python3-dev for the PyTorch backend (python/hcomm_torch);
# libpmix-dev for hcomm_comm_init_env under PMIx launchers, and mpich for the
# test under MPICH's mpirun (tests/coll/run_launchers.sh): without
# libmpich-dev it brings no mpicc, and Open MPI's mpirun alternative ranks
# higher, so the build's MPI stays Open MPI.
# Usage: scripts/setup.sh [configure options]
set -eu
cd "$(dirname "$0")/.."
pkgs="build-essential autoconf automake libtool pkg-config libcmocka-dev libhwloc-dev libsodium-dev \
      libopenmpi-dev openmpi-bin libpmix-dev mpich iproute2 procps \
      libfabric-dev libfabric1 libucx-dev libucx0 libibverbs-dev ibverbs-providers \
      clang libclang-rt-14-dev python3-torch libtorch-dev pybind11-dev python3-dev"
missing=$(for p in $pkgs; do dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null |
          grep -q 'install ok installed' || echo "$p"; done)
if [ -n "$missing" ]; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq
    # shellcheck disable=SC2086
    apt-get install -y -qq --no-install-recommends $missing >/dev/null
fi
werror=
[ -n "${CI:-}" ] && werror=--enable-werror
./autogen.sh >/dev/null 2>&1
./configure -q $werror "$@"
make -j"$(nproc)" -s
