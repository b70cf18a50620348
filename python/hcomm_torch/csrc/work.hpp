// work.hpp - HcommWork: one torch collective, queued on the group's hcomm
// stream (or run on the caller's thread: pg_inline.cpp), and Completion, the
// stream's host function that ends one or more.
#pragma once

#include <ATen/core/ivalue.h>
#include <c10/util/SmallVector.h>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <atomic>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include <hcomm.h>
#include <hcomm_stream.h>

#include "tensors.hpp"

namespace hcomm_torch
{

class HcommWork : public c10d::Work
{
  public:
    // outputs: what the Future holds when the work succeeds.
    HcommWork(int rank, c10d::OpType type, const char *name, std::vector<at::Tensor> outputs);

    // Before the operation, on the stream: dst (contiguous staging) <- src,
    // scaled for PREMUL_SUM when r says so.
    void stageIn(const at::Tensor &dst, const at::Tensor &src, const Reduction *r = nullptr);
    // After the operation succeeded, on the stream: dst <- src (staging).
    void copyBack(const at::Tensor &dst, const at::Tensor &src);
    // Keeps t alive until the work completes (hcomm reads or writes it).
    void keep(const at::Tensor &t);

    bool hasStageIn() const
    {
        return !stageIn_.empty();
    }
    // The stage-in copies now, on the caller's thread; a send's, issued at
    // once (pg_inline.cpp). A failure reaches wait().
    void stageInNow();
    // Adds the storages the operation writes (its outputs') to out.
    void outputStorages(std::vector<const void *> &out) const;
    // Whether a stage-in copy reads one of storages.
    bool        stagesFrom(const std::vector<const void *> &storages) const;
    const char *name() const
    {
        return name_;
    }

    // The stream's host function for the stage-in copies; arg is the work.
    static void runStageIn(void *arg);

    // Ends the work: status of its hcomm operation (or of its issue).
    void complete(hcomm_status_t st);
    // complete in two steps: the copy-backs and the Future (its callbacks
    // run), then the Work's own end, which wakes wait(); settle's error to end.
    std::exception_ptr settle(hcomm_status_t st);
    void               end(const std::exception_ptr &err)
    {
        finish(err);
    }

    c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;
    std::vector<at::Tensor>                 result() override;

  private:
    struct Copy {
        at::Tensor dst, src;
        bool       scaled;
        Reduction  r;
    };
    const char                             *name_;
    std::vector<at::Tensor>                 outputs_;
    c10::SmallVector<at::Tensor, 2>         kept_; // most operations keep one or two
    std::vector<Copy>                       stageIn_, copyBack_;
    std::exception_ptr                      stageError_; // on the thread that runs the operation
    c10::intrusive_ptr<c10::ivalue::Future> future_;
};

// Completes works when the stream reaches it: the request of their (fused)
// hcomm operation, or the status their issue failed with.
struct Completion {
    std::vector<c10::intrusive_ptr<HcommWork>> works;
    hcomm_request_t                            req    = nullptr;
    hcomm_status_t                             status = HCOMM_SUCCESS;
    // set: the operation's last steps run on the stream after req (a
    // compressed allreduce's decode) and fail comm when they fail. Their
    // failure is the stream's first error if the stream had none when the
    // Completion before this one ran; comm's error only tells once the stream
    // failed before (it may be another operation's: a concurrent one's).
    hcomm_comm_t      comm    = nullptr;
    std::atomic<int> *pending = nullptr; // the group's count of these, decremented when done
    hcomm_stream_t    stream  = nullptr; // the stream that runs it
    // the stream's error as the last Completion on it saw it (the group's,
    // one per stream); each Completion updates it
    std::atomic<hcomm_status_t> *streamSeen = nullptr;
    // set once its works' copy-backs are done: nothing writes their outputs
    std::shared_ptr<std::atomic<bool>> wrote;

    // The status of its operation: st (its request's, or its issue's), or
    // that of the steps after the request.
    hcomm_status_t ownStatus(hcomm_status_t st);
    // The stream's host function; arg is a Completion made with new, freed here.
    static void run(void *arg);
    // The stream whose Completion this thread is running (its Futures'
    // callbacks run here), or null.
    static hcomm_stream_t runningOn();
};

} // namespace hcomm_torch
