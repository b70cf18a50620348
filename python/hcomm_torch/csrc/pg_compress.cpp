// pg_compress.cpp - allreduceCompressed, the operation of the DDP hooks
// (hooks.py): hcomm's compressed average on the group's stream, with one
// compression state (error-feedback residuals) per (owner, bucket) slot.
#include "pg.hpp"

#include <c10/util/Exception.h>

namespace hcomm_torch
{

// The dtypes hcomm's codecs take (their residuals are float32 whatever the dtype).
static hcomm_dtype_t compressDtype(at::ScalarType st)
{
    switch (st) {
    case at::kFloat:
        return HCOMM_FLOAT32;
    case at::kHalf:
        return HCOMM_FLOAT16;
    case at::kBFloat16:
        return HCOMM_BFLOAT16;
    default:
        TORCH_CHECK(false, "hcomm backend: allreduce_compressed: ", st,
                    " tensors are not supported: hcomm's compression takes float32, float16 "
                    "and bfloat16 (use the plain allreduce, or DDP without a hook, for others)");
    }
}

static void destroyState(void *state)
{
    hcomm_compress_destroy(static_cast<hcomm_compress_t>(state));
}

hcomm_status_t ProcessGroupHcomm::compressState(const SlotKey &key, size_t count,
                                                hcomm_dtype_t                  dtype,
                                                const hcomm_compress_config_t &cfg,
                                                const std::string &spec, int64_t layout,
                                                hcomm_compress_t *state)
{
    CompressSlot &slot = compress_[key];
    if (slot.state != nullptr && slot.count == count && slot.dtype == dtype && slot.spec == spec &&
        slot.layout == layout) {
        *state = slot.state;
        return HCOMM_SUCCESS;
    }
    // another bucket now (DDP rebuilt its buckets, perhaps to the same size):
    // its residuals mean nothing for the new one. The stream may still run an
    // operation on the old state, so it goes after them; where that host
    // function cannot be queued (out of memory), at shutdown: waiting for
    // the stream here, with mu_ held, would stall a callback that issues.
    if (slot.state != nullptr &&
        (reentrant_ || hcomm_launch_host_func(stream_, destroyState, slot.state) != HCOMM_SUCCESS))
        retired_.push_back(slot.state);
    slot.state        = nullptr;
    hcomm_status_t st = hcomm_compress_create(comm_, &cfg, count, dtype, &slot.state);
    if (st != HCOMM_SUCCESS) {
        compress_.erase(key);
        return st;
    }
    slot.count = count;
    slot.dtype = dtype;
    slot.spec   = spec;
    slot.layout = layout;
    *state      = slot.state;
    return HCOMM_SUCCESS;
}

void ProcessGroupHcomm::destroyCompressStates()
{
    for (auto &kv : compress_)
        hcomm_compress_destroy(kv.second.state);
    compress_.clear();
    for (hcomm_compress_t s : retired_)
        hcomm_compress_destroy(s);
    retired_.clear();
}

size_t ProcessGroupHcomm::compressionStates()
{
    std::lock_guard<std::mutex> lock(mu_);
    return compress_.size();
}

ProcessGroupHcomm::WorkPtr ProcessGroupHcomm::allreduceCompressed(at::Tensor        &t,
                                                                  const std::string &spec,
                                                                  int64_t owner, int64_t bucket,
                                                                  int64_t layout)
{
    static const char *name = "allreduce_compressed";
    checkTensor(t, name);
    hcomm_dtype_t           dtype = compressDtype(t.scalar_type());
    hcomm_compress_config_t cfg;
    TORCH_CHECK(hcomm_compress_parse(spec.c_str(), &cfg) == HCOMM_SUCCESS, "hcomm backend: ", name,
                ": \"", spec,
                "\" is not a compression: \"onebit\", \"topk:RATIO\" (0 < RATIO <= 1), "
                "\"fp16\", \"bf16\" or \"none\"");
    auto       w   = makeWork(c10d::OpType::ALLREDUCE, name, {t});
    at::Tensor buf = contiguous(*w, t, true, true);
    SlotKey    key(owner, bucket);
    if (buf.numel() == 0) // hcomm queues nothing for it: it completes in its turn
        return launchEmpty(w);
    // launch holds mu_ while it issues: the slots change in issue order
    return launch(
        w,
        [=] {
            hcomm_compress_t state = nullptr;
            hcomm_status_t   st = compressState(key, static_cast<size_t>(buf.numel()), dtype, cfg,
                                                spec, layout, &state);
            if (st != HCOMM_SUCCESS)
                return st;
            return hcomm_allreduce_compressed(buf.data_ptr(), buf.data_ptr(), buf.numel(), dtype,
                                              state, comm_, stream_);
        },
        true);
}

} // namespace hcomm_torch
