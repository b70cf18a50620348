// pg_reduce.cpp - the reductions (allreduce, its coalesced form, reduce,
// reduce_scatter and its flat form), broadcast and barrier.
#include "pg.hpp"

#include <c10/util/Exception.h>

namespace hcomm_torch
{

// The buffers of one in-place reduction of t: recv (t or its contiguous
// twin) and send (recv, or t scaled for PREMUL_SUM).
struct ReduceBufs {
    at::Tensor send, recv;
};

ProcessGroupHcomm::WorkPtr ProcessGroupHcomm::allreduce(std::vector<at::Tensor>      &tensors,
                                                        const c10d::AllreduceOptions &opts)
{
    static const char *name = "allreduce";
    checkSingle(tensors, name);
    const at::Tensor &t    = tensors[0];
    Reduction         r    = toReduction(opts.reduceOp, t.scalar_type(), name);
    auto              w    = makeWork(c10d::OpType::ALLREDUCE, name, tensors);
    at::Tensor        recv = contiguous(*w, t, !r.premul, true), send = reduceInput(*w, t, recv, r);
    return launchSmall(w, byteCount(recv), [&](hcomm_request_t *req) {
        return HCOMM_ISSUE_ON(req, allreduce, send.data_ptr(), recv.data_ptr(), recv.numel(),
                              r.dtype, r.op);
    });
}

ProcessGroupHcomm::WorkPtr
ProcessGroupHcomm::allreduce_coalesced(std::vector<at::Tensor>               &tensors,
                                       const c10d::AllreduceCoalescedOptions &opts)
{
    static const char *name = "allreduce_coalesced";
    TORCH_CHECK(!tensors.empty(), "hcomm backend: ", name, ": no tensors");
    auto                    w = makeWork(c10d::OpType::ALLREDUCE_COALESCED, name, tensors);
    std::vector<Reduction>  rs;
    std::vector<ReduceBufs> bufs;
    for (size_t i = 0; i < tensors.size(); i++) {
        const at::Tensor &t = tensors[i];
        checkTensor(t, name);
        rs.push_back(toReduction(opts.reduceOp, t.scalar_type(), name, i));
        at::Tensor recv = contiguous(*w, t, !rs[i].premul, true);
        bufs.push_back({reduceInput(*w, t, recv, rs[i]), recv});
    }
    // one hcomm group: one fused operation, one completion
    return launch(w, [=] {
        return inGroup([&] {
            hcomm_status_t st = HCOMM_SUCCESS;
            for (size_t i = 0; i < bufs.size() && st == HCOMM_SUCCESS; i++)
                st = hcomm_allreduce(bufs[i].send.data_ptr(), bufs[i].recv.data_ptr(),
                                     bufs[i].recv.numel(), rs[i].dtype, rs[i].op, comm_, stream_);
            return st;
        });
    });
}

ProcessGroupHcomm::WorkPtr ProcessGroupHcomm::reduce(std::vector<at::Tensor>   &tensors,
                                                     const c10d::ReduceOptions &opts)
{
    static const char *name = "reduce";
    checkSingle(tensors, name);
    checkRank(opts.rootRank, size_, name, "root");
    TORCH_CHECK(opts.rootTensor == 0, "hcomm backend: reduce: root tensor must be 0");
    const at::Tensor &t    = tensors[0];
    Reduction         r    = toReduction(opts.reduceOp, t.scalar_type(), name);
    auto              w    = makeWork(c10d::OpType::REDUCE, name, tensors);
    int               root = static_cast<int>(opts.rootRank);
    at::Tensor        recv = contiguous(*w, t, !r.premul, rank_ == root),
               send        = reduceInput(*w, t, recv, r);
    return launchSmall(w, byteCount(recv), [&](hcomm_request_t *req) {
        return HCOMM_ISSUE_ON(req, reduce, send.data_ptr(), recv.data_ptr(), recv.numel(), r.dtype,
                              r.op, root);
    });
}

ProcessGroupHcomm::WorkPtr ProcessGroupHcomm::broadcast(std::vector<at::Tensor>      &tensors,
                                                        const c10d::BroadcastOptions &opts)
{
    static const char *name = "broadcast";
    checkSingle(tensors, name);
    checkRank(opts.rootRank, size_, name, "root");
    TORCH_CHECK(opts.rootTensor == 0, "hcomm backend: broadcast: root tensor must be 0");
    int        root = static_cast<int>(opts.rootRank);
    auto       w    = makeWork(c10d::OpType::BROADCAST, name, tensors);
    at::Tensor buf  = contiguous(*w, tensors[0], rank_ == root, rank_ != root);
    // data moves as bytes: every dtype broadcasts
    return launchSmall(w, byteCount(buf), [&](hcomm_request_t *req) {
        return HCOMM_ISSUE_ON(req, broadcast, buf.data_ptr(), buf.data_ptr(), byteCount(buf),
                              HCOMM_UINT8, root);
    });
}

ProcessGroupHcomm::WorkPtr
ProcessGroupHcomm::reduce_scatter(std::vector<at::Tensor>              &outputs,
                                  std::vector<std::vector<at::Tensor>> &inputs,
                                  const c10d::ReduceScatterOptions     &opts)
{
    static const char *name = "reduce_scatter";
    checkSingle(outputs, name);
    TORCH_CHECK(inputs.size() == 1 && inputs[0].size() == static_cast<size_t>(size_),
                "hcomm backend: reduce_scatter: expects one list of ", size_, " input tensors");
    const at::Tensor &out = outputs[0];
    checkSameAs(inputs[0], out, name);
    Reduction r = toReduction(opts.reduceOp, out.scalar_type(), name);
    auto      w = makeWork(c10d::OpType::REDUCE_SCATTER, name, outputs);
    // the inputs, rank by rank, into one flat send buffer
    int64_t    n    = out.numel();
    at::Tensor flat = at::empty({size_ * n}, out.options());
    w->keep(flat);
    for (int p = 0; p < size_; p++)
        w->stageIn(flat.narrow(0, p * n, n), inputs[0][p], r.premul ? &r : nullptr);
    at::Tensor recv = contiguous(*w, out, false, true);
    return launchSmall(w, byteCount(flat), [&](hcomm_request_t *req) {
        return HCOMM_ISSUE_ON(req, reduce_scatter, flat.data_ptr(), recv.data_ptr(), n, r.dtype,
                              r.op);
    });
}

ProcessGroupHcomm::WorkPtr
ProcessGroupHcomm::_reduce_scatter_base(at::Tensor &output, at::Tensor &input,
                                        const c10d::ReduceScatterOptions &opts)
{
    static const char *name = "_reduce_scatter_base";
    checkTensor(output, name);
    checkTensor(input, name);
    TORCH_CHECK(input.scalar_type() == output.scalar_type(), "hcomm backend: ", name,
                ": input and output dtypes differ");
    TORCH_CHECK(input.numel() == size_ * output.numel(), "hcomm backend: ", name, ": input has ",
                input.numel(), " elements, not ", size_, " x the output's ", output.numel());
    Reduction  r    = toReduction(opts.reduceOp, output.scalar_type(), name);
    auto       w    = makeWork(c10d::OpType::_REDUCE_SCATTER_BASE, name, {output});
    at::Tensor in   = contiguous(*w, input, !r.premul, false);
    at::Tensor send = reduceInput(*w, input, in, r);
    at::Tensor recv = contiguous(*w, output, false, true);
    return launchSmall(w, byteCount(send), [&](hcomm_request_t *req) {
        return HCOMM_ISSUE_ON(req, reduce_scatter, send.data_ptr(), recv.data_ptr(), recv.numel(),
                              r.dtype, r.op);
    });
}

ProcessGroupHcomm::WorkPtr ProcessGroupHcomm::barrier(const c10d::BarrierOptions &)
{
    auto w = makeWork(c10d::OpType::BARRIER, "barrier", {});
    return launchSmall(w, 0, [&](hcomm_request_t *req) {
        return req != nullptr ? hcomm_ibarrier(comm_, req) : hcomm_barrier(comm_, stream_);
    });
}

} // namespace hcomm_torch
