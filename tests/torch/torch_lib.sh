# torch_lib.sh - what the PyTorch tests share, sourced after nothing else:
# test_lib.sh; here (this folder) and py (Debian's /usr/bin/python3, or
# HC_TEST_TORCH_PYTHON); a SKIP when py has no torch or this build has no
# hcomm_torch (configure's summary says why); and PYTHONPATH with the build
# tree's package (its _C.so finds libhcomm by its RUNPATH) and this folder.
# shellcheck source=tests/test_lib.sh
. "$(dirname "$0")/../test_lib.sh"
here=$(cd "$(dirname "$0")" && pwd)
py=${HC_TEST_TORCH_PYTHON:-/usr/bin/python3}
[ -x "$py" ] || skip "no $py"
"$py" -c 'import torch' > /dev/null 2>&1 || skip "$py cannot import torch (apt-get install python3-torch)"
[ -f "$top/python/hcomm_torch/_C.so" ] ||
    skip "hcomm_torch is not built: configure found no torch, or ran --without-torch"
export PYTHONPATH="$top/python:$here${PYTHONPATH:+:$PYTHONPATH}"
