// module.cpp - hcomm_torch._C: the Python binding of ProcessGroupHcomm.
#include <algorithm>
#include <mutex>
#include <vector>

#include <pybind11/chrono.h>
#include <torch/csrc/utils/pybind.h>
#include <torch/extension.h>

#include "pg.hpp"

namespace py = pybind11;

namespace hcomm_torch
{

// The groups made so far, for quiesceAll: a stream's thread that runs a
// Future's callback, or drops the last reference to a tensor, takes the GIL;
// once Python finalizes, that ends the thread by pthread_exit, whose unwinding
// through a destructor is std::terminate ("terminate called without an
// active exception"). So Python's exit waits for their streams first.
static std::mutex                                              liveMu;
static std::vector<c10::weak_intrusive_ptr<ProcessGroupHcomm>> live;

static void noteLive(const c10::intrusive_ptr<ProcessGroupHcomm> &pg)
{
    std::lock_guard<std::mutex> g(liveMu);
    live.erase(std::remove_if(live.begin(), live.end(), [](const auto &w) { return w.expired(); }),
               live.end());
    live.emplace_back(pg);
}

// Every live group's quiesce(), the GIL released (the callbacks need it).
static void quiesceAll()
{
    std::vector<c10::intrusive_ptr<ProcessGroupHcomm>> pgs;
    {
        std::lock_guard<std::mutex> g(liveMu);
        for (auto &w : live)
            if (auto pg = w.lock())
                pgs.push_back(std::move(pg));
    }
    for (auto &pg : pgs)
        pg->quiesce();
}

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
                 auto pg = c10::make_intrusive<ProcessGroupHcomm>(store, rank, size, timeout);
                 hcomm_torch::noteLive(pg);
                 return pg;
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
    // hcomm_torch's atexit: the streams' work ends before Python finalizes
    m.def("_quiesce_all", &hcomm_torch::quiesceAll, py::call_guard<py::gil_scoped_release>());
}
