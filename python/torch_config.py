"""torch_config.py - what configure needs to build hcomm_torch against this
Python's torch, as shell assignments (configure evaluates them). Exits 1,
printing nothing, when torch cannot be imported."""
import shlex
import sys
import sysconfig

try:
    import torch
    import torch.utils.cpp_extension as ce
except Exception:  # noqa: BLE001  (any failure means: no usable torch)
    sys.exit(1)

values = {
    "torch_version": torch.__version__,
    "TORCH_CXX11_ABI": int(torch.compiled_with_cxx11_abi()),
    # the pybind11 ABI tags torch was built with: the extension must match them
    "TORCH_PYBIND_COMPILER": torch._C._PYBIND11_COMPILER_TYPE,
    "TORCH_PYBIND_STDLIB": torch._C._PYBIND11_STDLIB,
    "TORCH_PYBIND_ABI": torch._C._PYBIND11_BUILD_ABI,
    "torch_incdirs": " ".join(ce.include_paths()),
    "torch_libdirs": " ".join(ce.library_paths()),
    "torch_py_include": sysconfig.get_paths()["include"],
    "torch_py_version": "%d.%d" % sys.version_info[:2],
    # Debian's Python reads dist-packages, not site-packages, under any prefix
    "torch_py_debian": int("deb_system" in sysconfig.get_scheme_names()),
}
for k, v in values.items():
    print("%s=%s" % (k, shlex.quote(str(v))))
