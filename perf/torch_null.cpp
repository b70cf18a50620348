// torch_null.cpp - a torch.distributed backend that moves nothing: its
// allreduce returns a Work already completed, its Future set with the
// outputs, as a backend that finished the call on the caller's thread does.
// torch_bench.py times dist.all_reduce through it: torch's own cost per call,
// the floor under any C++ backend's. Built by torch.utils.cpp_extension.
#include <ATen/core/jit_type.h>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/extension.h>

namespace
{

class NullWork : public c10d::Work
{
  public:
    static const c10::TypePtr &listType()
    {
        static const c10::TypePtr t = c10::ListType::create(c10::TensorType::get());
        return t;
    }
    explicit NullWork(std::vector<at::Tensor> outputs)
        : c10d::Work(-1, c10d::OpType::ALLREDUCE), outputs_(std::move(outputs)),
          future_(c10::make_intrusive<c10::ivalue::Future>(listType()))
    {
        future_->markCompleted(c10::IValue(outputs_));
        finish();
    }
    c10::intrusive_ptr<c10::ivalue::Future> getFuture() override
    {
        return future_;
    }
    std::vector<at::Tensor> result() override
    {
        return outputs_;
    }

  private:
    std::vector<at::Tensor>                 outputs_;
    c10::intrusive_ptr<c10::ivalue::Future> future_;
};

class NullGroup : public c10d::ProcessGroup
{
  public:
    NullGroup(int rank, int size) : c10d::ProcessGroup(rank, size)
    {
    }
    const std::string getBackendName() const override
    {
        return "null";
    }
    c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor> &tensors,
                                             const c10d::AllreduceOptions &) override
    {
        return c10::make_intrusive<NullWork>(tensors);
    }
    c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions &) override
    {
        return c10::make_intrusive<NullWork>(std::vector<at::Tensor>());
    }
};

} // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m)
{
    py::module::import("torch.distributed");
    py::class_<NullGroup, c10d::ProcessGroup, c10::intrusive_ptr<NullGroup>>(m, "NullGroup")
        .def(
            py::init([](int rank, int size) { return c10::make_intrusive<NullGroup>(rank, size); }),
            py::call_guard<py::gil_scoped_release>());
}
