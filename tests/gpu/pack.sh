#!/bin/sh
# pack.sh - run here, before a GPU machine's run: packs this built tree's
# programs and the shared libraries they need beyond glibc and the CUDA driver
# into .devcarry/ (ignored by git), for a machine that has a GPU but not this
# build's dependencies (Debian's hwloc, libsodium, rdma-core; the toolkit's
# libcudart). gpu_checks.sh unpacks them there. The libtool wrappers name
# this tree's absolute path; gpu_checks.sh links that path to the copy.
set -e
top=$(cd "$(dirname "$0")/../.." && pwd)
cd "$top"
grep -qx '/.devcarry/' .git/info/exclude 2>/dev/null ||
    { mkdir -p .git/info && echo '/.devcarry/' >> .git/info/exclude; }
rm -rf .devcarry/libs .devcarry/build.tgz
mkdir -p .devcarry/libs
# built programs and libraries: ignored files, no objects, archives or logs
git ls-files -o -i --exclude-standard -- .libs tools perf tests examples |
    grep -v -e '\.o$' -e '\.lo$' -e '\.a$' -e '\.la$' -e '\.log$' -e '\.trs$' -e '/\.deps/' \
        > .devcarry/files
tar czf .devcarry/build.tgz -T .devcarry/files
echo "$top" > .devcarry/built_at
# what they link beyond the system's own libraries (the machine there has
# newer), MPI (not there) and NVIDIA's NCCL (a comparison build links it)
while read -r f; do
    [ -f "$f" ] && head -c 4 "$f" | grep -q ELF && ldd "$f" 2>/dev/null
done < .devcarry/files | awk '$2 == "=>" && $3 ~ /^\// { print $3 }' | sort -u |
    grep -v -e '/libc\.so' -e '/libm\.so' -e '/libdl\.so' -e '/libpthread\.so' -e '/librt\.so' \
        -e '/ld-linux' -e '/libstdc++' -e '/libgcc_s' -e '/libz\.' -e '/libmpi' -e '/libopen-' \
        -e '/libevent' -e '/libnccl' -e "^$top/" |
    while read -r lib; do cp -L "$lib" .devcarry/libs/; done
du -sh .devcarry/build.tgz .devcarry/libs
