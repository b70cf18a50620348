// pg.hpp - ProcessGroupHcomm: torch's c10d::ProcessGroup on an hcomm
// communicator. Every operation is queued on one hcomm stream per group, so
// hcomm runs them in torch's issue order (the same on every rank) while the
// caller goes on computing; a Work completes when the stream has run it. A
// small one issued while none of the group's earlier ones is outstanding
// runs on the caller's thread instead, for a bounded time (pg_inline.cpp).
#pragma once

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <c10/util/FunctionRef.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include <hcomm.h>
#include <hcomm_compress.h>
#include <hcomm_stream.h>

#include "work.hpp"

namespace hcomm_torch
{

// Runs fn with Python's GIL released when the calling thread holds it
// (module.cpp): a stream thread completing a Future may need the GIL.
void withoutGil(const std::function<void()> &fn);

// "text (HCOMM_ERR_NAME)" of an hcomm status, for error messages.
std::string statusText(hcomm_status_t st);

// Runs body's hcomm calls inside one hcomm group: one fused operation, so one
// request completes them all, and sends and receives among them cannot deadlock.
hcomm_status_t inGroup(const std::function<hcomm_status_t()> &body);

// In an IssueOn: hcomm operation OP on the group's stream when req is null,
// else its nonblocking form hcomm_iOP into req.
#define HCOMM_ISSUE_ON(req, OP, ...)                                                               \
    ((req) != nullptr ? hcomm_i##OP(__VA_ARGS__, comm_, (req))                                     \
                      : hcomm_##OP(__VA_ARGS__, comm_, stream_))

class ProcessGroupHcomm : public c10d::ProcessGroup
{
  public:
    using WorkPtr = c10::intrusive_ptr<c10d::Work>;

    // Collective over the group's ranks: rank 0 creates hcomm's unique id and
    // publishes it in store; timeout becomes the communicator's.
    ProcessGroupHcomm(const c10::intrusive_ptr<c10d::Store> &store, int rank, int size,
                      std::chrono::milliseconds timeout);
    ~ProcessGroupHcomm() override;

    const std::string getBackendName() const override
    {
        return "hcomm";
    }

    // batch_isend_irecv: the operations between start and end become one
    // hcomm group, so sends and receives among them cannot deadlock.
    void startCoalescing() override;
    void endCoalescing(std::vector<WorkPtr> &reqs) override;

    WorkPtr broadcast(std::vector<at::Tensor>      &tensors,
                      const c10d::BroadcastOptions &opts = c10d::BroadcastOptions()) override;
    WorkPtr allreduce(std::vector<at::Tensor>      &tensors,
                      const c10d::AllreduceOptions &opts = c10d::AllreduceOptions()) override;
    WorkPtr allreduce_coalesced(
        std::vector<at::Tensor>               &tensors,
        const c10d::AllreduceCoalescedOptions &opts = c10d::AllreduceCoalescedOptions()) override;
    WorkPtr reduce(std::vector<at::Tensor>   &tensors,
                   const c10d::ReduceOptions &opts = c10d::ReduceOptions()) override;
    WorkPtr allgather(std::vector<std::vector<at::Tensor>> &outputs,
                      std::vector<at::Tensor>              &inputs,
                      const c10d::AllgatherOptions &opts = c10d::AllgatherOptions()) override;
    WorkPtr _allgather_base(at::Tensor &output, at::Tensor &input,
                            const c10d::AllgatherOptions &opts = c10d::AllgatherOptions()) override;
    WorkPtr
            allgather_coalesced(std::vector<std::vector<at::Tensor>> &outputLists,
                                std::vector<at::Tensor>              &inputs,
                                const c10d::AllgatherOptions &opts = c10d::AllgatherOptions()) override;
    WorkPtr gather(std::vector<std::vector<at::Tensor>> &outputs, std::vector<at::Tensor> &inputs,
                   const c10d::GatherOptions &opts = c10d::GatherOptions()) override;
    WorkPtr scatter(std::vector<at::Tensor> &outputs, std::vector<std::vector<at::Tensor>> &inputs,
                    const c10d::ScatterOptions &opts = c10d::ScatterOptions()) override;
    WorkPtr
    reduce_scatter(std::vector<at::Tensor> &outputs, std::vector<std::vector<at::Tensor>> &inputs,
                   const c10d::ReduceScatterOptions &opts = c10d::ReduceScatterOptions()) override;
    WorkPtr _reduce_scatter_base(
        at::Tensor &output, at::Tensor &input,
        const c10d::ReduceScatterOptions &opts = c10d::ReduceScatterOptions()) override;
    WorkPtr alltoall_base(at::Tensor &output, at::Tensor &input,
                          std::vector<int64_t>        &outputSplitSizes,
                          std::vector<int64_t>        &inputSplitSizes,
                          const c10d::AllToAllOptions &opts = c10d::AllToAllOptions()) override;
    WorkPtr alltoall(std::vector<at::Tensor> &outputs, std::vector<at::Tensor> &inputs,
                     const c10d::AllToAllOptions &opts = c10d::AllToAllOptions()) override;
    WorkPtr send(std::vector<at::Tensor> &tensors, int dstRank, int tag) override;
    WorkPtr recv(std::vector<at::Tensor> &tensors, int srcRank, int tag) override;
    WorkPtr recvAnysource(std::vector<at::Tensor> &tensors, int tag) override;
    WorkPtr barrier(const c10d::BarrierOptions &opts = c10d::BarrierOptions()) override;

    // The DDP hooks' operation (hooks.py, pg_compress.cpp): t <- the average
    // over ranks of t compressed as spec says ("onebit", "topk:0.01", "bf16"),
    // with the error feedback of slot (owner, bucket). A slot's compression
    // state is made on first use and remade when t's size, dtype, spec or
    // layout (a fingerprint of which parameters the bucket holds, in order)
    // changes: a residual only means something for the values it was kept for.
    WorkPtr allreduceCompressed(at::Tensor &t, const std::string &spec, int64_t owner,
                                int64_t bucket, int64_t layout);
    // How many compression states the group holds (tests).
    size_t compressionStates();
    // Small operations run on the caller's thread: how many finished there,
    // and how many were handed to the stream unfinished (tests).
    std::pair<uint64_t, uint64_t> inlineCounts();
    // Seconds per blocking 8 B hcomm_allreduce from C on this group's
    // communicator, n of them on the caller's thread (perf/torch_bench.py).
    double timeAllreduceFromC(int64_t n);
    // Waits until the work queued on the group's streams so far has ended,
    // the Futures' callbacks with it (Python's exit: hcomm_torch's atexit).
    void quiesce();

  private:
    // launch calls them before it returns: references, no copy on the heap
    using Issue = c10::function_ref<hcomm_status_t()>;
    // One hcomm operation: on stream_ when req is null, else nonblocking
    // (hcomm_i*) into *req.
    using IssueOn = c10::function_ref<hcomm_status_t(hcomm_request_t *req)>;
    using Tensors = std::vector<at::Tensor>;

    c10::intrusive_ptr<HcommWork> makeWork(c10d::OpType type, const char *name, Tensors outputs);
    // Queues w's stage-in copies, then issue() (hcomm calls on stream_), then
    // w's completion; throws when the issue failed. localSteps: the operation
    // ends with host steps on the stream after its last request (a compressed
    // allreduce), whose failure its completion reads (Completion::comm).
    WorkPtr launch(const c10::intrusive_ptr<HcommWork> &w, const Issue &issue,
                   bool localSteps = false);
    class ReentrantIssue;
    WorkPtr launchLocked(const c10::intrusive_ptr<HcommWork> &w, const Issue &issue,
                         bool localSteps = false);
    // w without an hcomm operation: completes after the group's earlier ones.
    WorkPtr launchEmpty(const c10::intrusive_ptr<HcommWork> &w);
    // launch, or, for an operation of at most inlineBytes_ while no
    // earlier one is outstanding, on the caller's thread (pg_inline.cpp).
    WorkPtr launchSmall(const c10::intrusive_ptr<HcommWork> &w, size_t bytes, const IssueOn &issue);
    // send and recv: issued nonblocking at once, off the stream (pg_inline.cpp)
    WorkPtr launchP2P(const c10::intrusive_ptr<HcommWork> &w, size_t bytes, const IssueOn &issue);
    // Makes comm_ take its lock before a request is issued off the stream.
    void    markStreamed();
    bool    canInline(size_t bytes);
    // Tests req until it finishes or inlineSpin_ passes; *done as hcomm_test's.
    hcomm_status_t spin(hcomm_request_t *req, int *done);
    void           readInlineSettings();
    // Queues c on stream_ after what is there; where it cannot be queued (out
    // of memory) c waits in unqueued_ for the IssueLock to end.
    void    queueCompletion(Completion *c);
    class IssueLock;
    // Whether an operation queued on a stream and not yet ended writes what
    // w's stage-in copies read; forgets the ended ones. Under mu_.
    bool stagesFromQueuedOutput(const HcommWork &w);
    void forgetEndedWrites();
    // t itself when contiguous, else a contiguous twin that w fills from t
    // before the operation (in) and copies back into t after it (out).
    at::Tensor contiguous(HcommWork &w, const at::Tensor &t, bool in, bool out);
    // The send buffer of a reduction: buf, or a scaled copy for PREMUL_SUM.
    at::Tensor reduceInput(HcommWork &w, const at::Tensor &t, const at::Tensor &buf,
                           const Reduction &r);
    void       shutdown();

    struct CompressSlot {
        hcomm_compress_t state = nullptr;
        size_t           count = 0;
        hcomm_dtype_t    dtype = HCOMM_FLOAT32;
        std::string      spec;
        int64_t          layout = 0;
    };
    using SlotKey = std::pair<int64_t, int64_t>; // (owner, bucket)
    // The state of slot key for count x dtype compressed as cfg says; called
    // with mu_ held, as the operation using it is queued.
    hcomm_status_t compressState(const SlotKey &key, size_t count, hcomm_dtype_t dtype,
                                 const hcomm_compress_config_t &cfg, const std::string &spec,
                                 int64_t layout, hcomm_compress_t *state);
    void           destroyCompressStates();

    hcomm_comm_t                               comm_   = nullptr;
    hcomm_stream_t                             stream_ = nullptr;
    // Operations issued by a Future's callback that stream_'s thread runs go
    // here (made on first use): a callback that waits for one would otherwise
    // wait for its own thread (pg.cpp, ReentrantIssue).
    hcomm_stream_t                             aux_       = nullptr;
    bool                                       reentrant_ = false; // stream_ is aux_ for now
    std::mutex                                 mu_; // issue order: one issuing thread at a time
    // Completions queueCompletion could not queue: completed, after the
    // stream ran what is before them, once mu_ is released (a Future's
    // callback on the stream's thread may need it); under mu_
    std::vector<Completion *> unqueued_;
    // The error each stream had when its last Completion ran (Completion::streamSeen)
    std::atomic<hcomm_status_t>                mainSeen_{HCOMM_SUCCESS}, auxSeen_{HCOMM_SUCCESS};
    bool                                       coalescing_ = false;
    std::vector<c10::intrusive_ptr<HcommWork>> coalesced_;
    hcomm_status_t                             coalesceError_ = HCOMM_SUCCESS;
    std::map<SlotKey, CompressSlot>            compress_;
    // states replaced while queueing on aux_, or when their destruction
    // could not be queued: an operation on a stream may still use them, so
    // they go at shutdown
    std::vector<hcomm_compress_t> retired_;
    // inline runs (pg_inline.cpp); under mu_
    size_t                   inlineBytes_ = 0;
    std::chrono::nanoseconds inlineSpin_{0};
    bool                     inlineYield_ = false; // more ranks than CPUs: yield between tests
    bool                     streamed_    = false; // an operation went to stream_: comm_ is locked
    std::atomic<int>         pending_{0}; // Completions queued and not yet run to their end
    // What the queued Completions' works write, until each has run (a send
    // copies its tensor at issue when none writes it: pg_inline.cpp); under mu_
    struct QueuedWrites {
        std::vector<const void *>          storages;
        std::shared_ptr<std::atomic<bool>> done;
    };
    std::vector<QueuedWrites> queuedWrites_;
    // Coalescing has an hcomm group open on this thread, where nonblocking
    // calls are refused: no group runs inline on it meanwhile.
    static thread_local int coalescingHere_;
    uint64_t                inlined_ = 0, handedOver_ = 0;
};

// mu_ for issuing. At its end, after mu_ is released, the Completions that
// could not be queued run on this thread once their streams ran what was
// before them: waiting with mu_ held would stall a callback that issues.
class ProcessGroupHcomm::IssueLock
{
  public:
    explicit IssueLock(ProcessGroupHcomm &pg) : pg_(pg), lock_(pg.mu_)
    {
    }
    ~IssueLock()
    {
        std::vector<Completion *> late;
        late.swap(pg_.unqueued_);
        lock_.unlock();
        for (Completion *c : late) {
            hcomm_stream_synchronize(c->stream); // its error reaches the Work through run
            try {
                Completion::run(c);
            } catch (...) { // the Works end with their errors; nothing may leave a destructor
            }
        }
    }
    IssueLock(const IssueLock &)            = delete;
    IssueLock &operator=(const IssueLock &) = delete;

  private:
    ProcessGroupHcomm           &pg_;
    std::unique_lock<std::mutex> lock_;
};

// An operation issued from a Future's callback that stream_'s thread runs
// (a DDP comm hook's then(), PowerSGD's) may be waited for right there: it
// goes to aux_, whose thread is free, for as long as it is being queued
// (every queueing call names stream_). The communicator orders
// it after what was issued before it, as anywhere. A callback on aux_'s
// thread queues on stream_ (its thread may wait in a callback of its own
// only for an operation issued before).
class ProcessGroupHcomm::ReentrantIssue
{
  public:
    inline explicit ReentrantIssue(ProcessGroupHcomm &pg) : pg_(pg), main_(pg.stream_)
    {
        hcomm_stream_t on = Completion::runningOn();
        if (on == nullptr || (on != pg.stream_ && on != pg.aux_))
            return;
        if (pg.aux_ == nullptr) {
            hcomm_status_t st = hcomm_stream_create(&pg.aux_);
            TORCH_CHECK(st == HCOMM_SUCCESS,
                        "hcomm backend: a second stream for operations "
                        "issued by Future callbacks: ",
                        statusText(st));
        }
        pg.stream_    = on == main_ ? pg.aux_ : main_;
        pg.reentrant_ = true;
    }
    ~ReentrantIssue()
    {
        pg_.stream_    = main_;
        pg_.reentrant_ = false;
    }

  private:
    ProcessGroupHcomm &pg_;
    hcomm_stream_t     main_;
};

} // namespace hcomm_torch
