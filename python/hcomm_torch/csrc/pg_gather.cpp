// pg_gather.cpp - allgather (list, flat and coalesced forms), gather and
// scatter. Data moves as bytes, so every dtype works.
#include "pg.hpp"

#include <c10/util/Exception.h>

namespace hcomm_torch
{

// A flat buffer of size blocks like in; w copies block r into outs[r] after
// the operation.
static at::Tensor gatherInto(HcommWork &w, const at::Tensor &in,
                             const std::vector<at::Tensor> &outs)
{
    int64_t    n    = in.numel();
    at::Tensor flat = at::empty({static_cast<int64_t>(outs.size()) * n}, in.options());
    w.keep(flat);
    for (size_t r = 0; r < outs.size(); r++)
        w.copyBack(outs[r], flat.narrow(0, static_cast<int64_t>(r) * n, n));
    return flat;
}

ProcessGroupHcomm::WorkPtr
ProcessGroupHcomm::allgather(std::vector<std::vector<at::Tensor>> &outputs,
                             std::vector<at::Tensor> &inputs, const c10d::AllgatherOptions &)
{
    static const char *name = "allgather";
    checkSingle(inputs, name);
    TORCH_CHECK(outputs.size() == 1 && outputs[0].size() == static_cast<size_t>(size_),
                "hcomm backend: allgather: expects one list of ", size_, " output tensors");
    checkSameAs(outputs[0], inputs[0], name);
    auto       w    = makeWork(c10d::OpType::ALLGATHER, name, outputs[0]);
    at::Tensor in   = contiguous(*w, inputs[0], true, false);
    at::Tensor flat = gatherInto(*w, in, outputs[0]);
    return launchSmall(w, byteCount(flat), [&](hcomm_request_t *req) {
        return HCOMM_ISSUE_ON(req, allgather, in.data_ptr(), flat.data_ptr(), byteCount(in),
                              HCOMM_UINT8);
    });
}

ProcessGroupHcomm::WorkPtr ProcessGroupHcomm::_allgather_base(at::Tensor &output, at::Tensor &input,
                                                              const c10d::AllgatherOptions &)
{
    static const char *name = "_allgather_base";
    checkTensor(output, name);
    checkTensor(input, name);
    TORCH_CHECK(input.scalar_type() == output.scalar_type(), "hcomm backend: ", name,
                ": input and output dtypes differ");
    TORCH_CHECK(output.numel() == size_ * input.numel(), "hcomm backend: ", name, ": output has ",
                output.numel(), " elements, not ", size_, " x the input's ", input.numel());
    auto       w   = makeWork(c10d::OpType::_ALLGATHER_BASE, name, {output});
    at::Tensor in  = contiguous(*w, input, true, false);
    at::Tensor out = contiguous(*w, output, false, true);
    return launchSmall(w, byteCount(out), [&](hcomm_request_t *req) {
        return HCOMM_ISSUE_ON(req, allgather, in.data_ptr(), out.data_ptr(), byteCount(in),
                              HCOMM_UINT8);
    });
}

ProcessGroupHcomm::WorkPtr
ProcessGroupHcomm::allgather_coalesced(std::vector<std::vector<at::Tensor>> &outputLists,
                                       std::vector<at::Tensor>              &inputs,
                                       const c10d::AllgatherOptions &)
{
    static const char *name = "allgather_coalesced";
    TORCH_CHECK(!inputs.empty(), "hcomm backend: ", name, ": no tensors");
    TORCH_CHECK(outputLists.size() == static_cast<size_t>(size_), "hcomm backend: ", name,
                ": expects ", size_, " output lists, one per rank, got ", outputLists.size());
    Tensors all; // the Future's value: every output, rank by rank
    for (const auto &l : outputLists) {
        TORCH_CHECK(l.size() == inputs.size(), "hcomm backend: ", name, ": an output list has ",
                    l.size(), " tensors for ", inputs.size(), " inputs");
        all.insert(all.end(), l.begin(), l.end());
    }
    auto    w = makeWork(c10d::OpType::ALLGATHER_COALESCED, name, all);
    Tensors ins, flats;
    for (size_t i = 0; i < inputs.size(); i++) {
        checkTensor(inputs[i], name);
        Tensors outs;
        for (const auto &l : outputLists)
            outs.push_back(l[i]);
        checkSameAs(outs, inputs[i], name);
        ins.push_back(contiguous(*w, inputs[i], true, false));
        flats.push_back(gatherInto(*w, ins.back(), outs));
    }
    return launch(w, [=] {
        return inGroup([&] {
            hcomm_status_t st = HCOMM_SUCCESS;
            for (size_t i = 0; i < ins.size() && st == HCOMM_SUCCESS; i++)
                st = hcomm_allgather(ins[i].data_ptr(), flats[i].data_ptr(), byteCount(ins[i]),
                                     HCOMM_UINT8, comm_, stream_);
            return st;
        });
    });
}

ProcessGroupHcomm::WorkPtr ProcessGroupHcomm::gather(std::vector<std::vector<at::Tensor>> &outputs,
                                                     std::vector<at::Tensor>              &inputs,
                                                     const c10d::GatherOptions            &opts)
{
    static const char *name = "gather";
    checkSingle(inputs, name);
    checkRank(opts.rootRank, size_, name, "root");
    int root = static_cast<int>(opts.rootRank);
    if (rank_ == root) {
        TORCH_CHECK(outputs.size() == 1 && outputs[0].size() == static_cast<size_t>(size_),
                    "hcomm backend: gather: the root expects one list of ", size_,
                    " output tensors");
        checkSameAs(outputs[0], inputs[0], name);
    } else {
        TORCH_CHECK(outputs.empty() || (outputs.size() == 1 && outputs[0].empty()),
                    "hcomm backend: gather: only the root (rank ", root, ") passes outputs");
    }
    auto       w  = makeWork(c10d::OpType::GATHER, name, rank_ == root ? outputs[0] : Tensors{});
    at::Tensor in = contiguous(*w, inputs[0], true, false);
    Tensors    outs;
    if (rank_ == root)
        for (const auto &o : outputs[0])
            outs.push_back(contiguous(*w, o, false, true));
    // sends and receives in one group; the root's own block is a local copy
    return launch(w, [=] {
        return inGroup([&] {
            hcomm_status_t st =
                hcomm_send(in.data_ptr(), byteCount(in), HCOMM_UINT8, root, comm_, stream_);
            for (size_t p = 0; p < outs.size() && st == HCOMM_SUCCESS; p++)
                st = hcomm_recv(outs[p].data_ptr(), byteCount(outs[p]), HCOMM_UINT8,
                                static_cast<int>(p), comm_, stream_);
            return st;
        });
    });
}

ProcessGroupHcomm::WorkPtr ProcessGroupHcomm::scatter(std::vector<at::Tensor>              &outputs,
                                                      std::vector<std::vector<at::Tensor>> &inputs,
                                                      const c10d::ScatterOptions           &opts)
{
    static const char *name = "scatter";
    checkSingle(outputs, name);
    checkRank(opts.rootRank, size_, name, "root");
    int root = static_cast<int>(opts.rootRank);
    if (rank_ == root) {
        TORCH_CHECK(inputs.size() == 1 && inputs[0].size() == static_cast<size_t>(size_),
                    "hcomm backend: scatter: the root expects one list of ", size_,
                    " input tensors");
        checkSameAs(inputs[0], outputs[0], name);
    } else {
        TORCH_CHECK(inputs.empty() || (inputs.size() == 1 && inputs[0].empty()),
                    "hcomm backend: scatter: only the root (rank ", root, ") passes inputs");
    }
    auto       w   = makeWork(c10d::OpType::SCATTER, name, outputs);
    at::Tensor out = contiguous(*w, outputs[0], false, true);
    Tensors    ins;
    if (rank_ == root)
        for (const auto &i : inputs[0])
            ins.push_back(contiguous(*w, i, true, false));
    return launch(w, [=] {
        return inGroup([&] {
            hcomm_status_t st = HCOMM_SUCCESS;
            for (size_t p = 0; p < ins.size() && st == HCOMM_SUCCESS; p++)
                st = hcomm_send(ins[p].data_ptr(), byteCount(ins[p]), HCOMM_UINT8,
                                static_cast<int>(p), comm_, stream_);
            if (st == HCOMM_SUCCESS)
                st = hcomm_recv(out.data_ptr(), byteCount(out), HCOMM_UINT8, root, comm_, stream_);
            return st;
        });
    });
}

} // namespace hcomm_torch
