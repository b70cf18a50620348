// pg_p2p.cpp - alltoall (list and flat forms, the flat one with split sizes
// on hcomm_alltoallv), send and recv. Data moves as bytes.
#include "pg.hpp"

#include <c10/util/Exception.h>

namespace hcomm_torch
{

// Byte counts and displacements of a flat alltoall buffer cut along dim 0
// by splits (empty: equal blocks).
struct Blocks {
    std::vector<size_t> counts, displs;
};

static Blocks cutBlocks(const at::Tensor &t, const std::vector<int64_t> &splits, int size,
                        const char *side)
{
    static const char *name = "alltoall_base";
    TORCH_CHECK(t.dim() > 0 || t.numel() == 0 || size == 1, "hcomm backend: ", name, ": the ", side,
                " tensor must have a dimension to split");
    int64_t rows     = t.dim() > 0 ? t.size(0) : 1;
    size_t  rowBytes = rows > 0 ? byteCount(t) / static_cast<size_t>(rows) : 0;
    Blocks  b;
    if (splits.empty()) {
        TORCH_CHECK(rows % size == 0, "hcomm backend: ", name, ": the ", side, " tensor's ", rows,
                    " rows do not split into ", size, " equal blocks");
        for (int p = 0; p < size; p++) {
            b.counts.push_back(static_cast<size_t>(rows / size) * rowBytes);
            b.displs.push_back(static_cast<size_t>(p) * b.counts.back());
        }
        return b;
    }
    TORCH_CHECK(splits.size() == static_cast<size_t>(size), "hcomm backend: ", name, ": ", side,
                " split sizes name ", splits.size(), " blocks for ", size, " ranks");
    int64_t at = 0;
    for (int64_t s : splits) {
        TORCH_CHECK(s >= 0, "hcomm backend: ", name, ": negative ", side, " split size ", s);
        b.counts.push_back(static_cast<size_t>(s) * rowBytes);
        b.displs.push_back(static_cast<size_t>(at) * rowBytes);
        at += s;
    }
    TORCH_CHECK(at == rows, "hcomm backend: ", name, ": ", side, " split sizes add up to ", at,
                ", not the tensor's ", rows, " rows");
    return b;
}

ProcessGroupHcomm::WorkPtr ProcessGroupHcomm::alltoall_base(at::Tensor &output, at::Tensor &input,
                                                            std::vector<int64_t> &outputSplitSizes,
                                                            std::vector<int64_t> &inputSplitSizes,
                                                            const c10d::AllToAllOptions &)
{
    static const char *name = "alltoall_base";
    checkTensor(output, name);
    checkTensor(input, name);
    TORCH_CHECK(input.scalar_type() == output.scalar_type(), "hcomm backend: ", name,
                ": input and output dtypes differ");
    Blocks     sb  = cutBlocks(input, inputSplitSizes, size_, "input");
    Blocks     rb  = cutBlocks(output, outputSplitSizes, size_, "output");
    auto       w   = makeWork(c10d::OpType::ALLTOALL_BASE, name, {output});
    at::Tensor in  = contiguous(*w, input, true, false);
    at::Tensor out = contiguous(*w, output, false, true);
    if (inputSplitSizes.empty() && outputSplitSizes.empty()) {
        TORCH_CHECK(byteCount(in) == byteCount(out), "hcomm backend: ", name,
                    ": equal splits need input and output of one size");
        return launch(w, [=] {
            return hcomm_alltoall(in.data_ptr(), out.data_ptr(), sb.counts[0], HCOMM_UINT8, comm_,
                                  stream_);
        });
    }
    return launch(w, [=] {
        return hcomm_alltoallv(in.data_ptr(), sb.counts.data(), sb.displs.data(), out.data_ptr(),
                               rb.counts.data(), rb.displs.data(), HCOMM_UINT8, comm_, stream_);
    });
}

ProcessGroupHcomm::WorkPtr ProcessGroupHcomm::alltoall(std::vector<at::Tensor> &outputs,
                                                       std::vector<at::Tensor> &inputs,
                                                       const c10d::AllToAllOptions &)
{
    static const char *name = "alltoall";
    TORCH_CHECK(inputs.size() == static_cast<size_t>(size_) &&
                    outputs.size() == static_cast<size_t>(size_),
                "hcomm backend: alltoall: expects ", size_, " input and ", size_,
                " output tensors, got ", inputs.size(), " and ", outputs.size());
    auto    w = makeWork(c10d::OpType::ALLTOALL, name, outputs);
    Tensors ins, outs;
    for (int p = 0; p < size_; p++) {
        checkTensor(inputs[p], name);
        checkTensor(outputs[p], name);
        TORCH_CHECK(inputs[p].scalar_type() == outputs[p].scalar_type(), "hcomm backend: ", name,
                    ": input and output dtypes differ");
        ins.push_back(contiguous(*w, inputs[p], true, false));
        outs.push_back(contiguous(*w, outputs[p], false, true));
    }
    // blocks of any size: point to point in one group
    return launch(w, [=] {
        return inGroup([&] {
            hcomm_status_t st = HCOMM_SUCCESS;
            for (int p = 0; p < size_ && st == HCOMM_SUCCESS; p++) {
                st = hcomm_send(ins[p].data_ptr(), byteCount(ins[p]), HCOMM_UINT8, p, comm_,
                                stream_);
                if (st == HCOMM_SUCCESS)
                    st = hcomm_recv(outs[p].data_ptr(), byteCount(outs[p]), HCOMM_UINT8, p, comm_,
                                    stream_);
            }
            return st;
        });
    });
}

// torch's tags have no counterpart: hcomm matches a pair's messages in order.
static void checkTag(int tag, const char *op)
{
    TORCH_CHECK(tag == 0, "hcomm backend: ", op, ": tag ", tag,
                " is not supported: hcomm matches the messages between two ranks in the order "
                "they were sent (use tag 0)");
}

ProcessGroupHcomm::WorkPtr ProcessGroupHcomm::send(std::vector<at::Tensor> &tensors, int dstRank,
                                                   int tag)
{
    static const char *name = "send";
    checkSingle(tensors, name);
    checkRank(dstRank, size_, name, "destination");
    checkTag(tag, name);
    auto       w   = makeWork(c10d::OpType::SEND, name, {});
    at::Tensor buf = contiguous(*w, tensors[0], true, false);
    return launchP2P(w, byteCount(buf), [&](hcomm_request_t *req) {
        return HCOMM_ISSUE_ON(req, send, buf.data_ptr(), byteCount(buf), HCOMM_UINT8, dstRank);
    });
}

ProcessGroupHcomm::WorkPtr ProcessGroupHcomm::recv(std::vector<at::Tensor> &tensors, int srcRank,
                                                   int tag)
{
    static const char *name = "recv";
    checkSingle(tensors, name);
    checkRank(srcRank, size_, name, "source");
    checkTag(tag, name);
    auto       w   = makeWork(c10d::OpType::RECV, name, tensors);
    at::Tensor buf = contiguous(*w, tensors[0], false, true);
    return launchP2P(w, byteCount(buf), [&](hcomm_request_t *req) {
        return HCOMM_ISSUE_ON(req, recv, buf.data_ptr(), byteCount(buf), HCOMM_UINT8, srcRank);
    });
}

} // namespace hcomm_torch
