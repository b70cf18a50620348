// module.cpp - hcomm_torch._C: the Python binding of ProcessGroupHcomm.
#include <pybind11/chrono.h>
#include <torch/csrc/utils/pybind.h>
#include <torch/extension.h>

#include "pg.hpp"

namespace py = pybind11;

namespace hcomm_torch
{

void withoutGil(const std::function<void()> &fn)
{
    if (Py_IsInitialized() && PyGILState_Check()) {
        py::gil_scoped_release release;
        fn();
    } else {
        fn();
    }
}

} // namespace hcomm_torch

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m)
{
    using hcomm_torch::ProcessGroupHcomm;
    // the base class must be registered before a class derived from it
    py::module::import("torch.distributed");
    m.doc() = "hcomm's process group for torch.distributed (import hcomm_torch to register it)";
    py::class_<ProcessGroupHcomm, c10d::ProcessGroup, c10::intrusive_ptr<ProcessGroupHcomm>>(
        m, "ProcessGroupHcomm")
        .def(py::init([](const c10::intrusive_ptr<c10d::Store> &store, int rank, int size,
                         std::chrono::milliseconds timeout) {
                 return c10::make_intrusive<ProcessGroupHcomm>(store, rank, size, timeout);
             }),
             py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("timeout"),
             // init waits for every rank: other Python threads go on meanwhile
             py::call_guard<py::gil_scoped_release>())
        // hooks.py's operation: returns a Work whose Future holds [tensor]
        .def(
            "_allreduce_compressed",
            [](ProcessGroupHcomm &pg, at::Tensor tensor, const std::string &spec, int64_t owner,
               int64_t bucket, int64_t layout) {
                return pg.allreduceCompressed(tensor, spec, owner, bucket, layout);
            },
            py::arg("tensor"), py::arg("spec"), py::arg("owner"), py::arg("bucket"),
            py::arg("layout") = 0, py::call_guard<py::gil_scoped_release>())
        .def("_compression_states", &ProcessGroupHcomm::compressionStates)
        // (operations finished on the caller's thread, operations handed to the stream)
        .def("_inline_counts", &ProcessGroupHcomm::inlineCounts)
        // perf/torch_bench.py: seconds per 8 B hcomm_allreduce from C, n calls
        .def("_time_c_allreduce", &ProcessGroupHcomm::timeAllreduceFromC, py::arg("n"),
             py::call_guard<py::gil_scoped_release>());
    m.def("hcomm_version", [] { return std::string(hcomm_version_str()); });
}
