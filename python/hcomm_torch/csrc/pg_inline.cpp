// pg_inline.cpp - small operations on the caller's thread. Through the
// stream an 8 B allreduce pays two thread hand-offs (to the stream's thread
// and back to the waiter), ~10 us against hcomm's 0.35. So while no earlier
// operation of the group is outstanding (pending_: each one ends with a
// Completion on the stream, counted until it has run), an operation of at
// most TORCH_HCOMM_INLINE_BYTES is issued nonblocking from the caller and
// tested for at most TORCH_HCOMM_INLINE_US; finished, its Work returns
// complete. Unfinished, its request goes to the stream in a Completion, and
// the caller returns: a rank never waits here for a peer that may be spinning
// on another group (two groups used in opposite orders). The group's later
// operations queue behind that Completion; the communicator runs operations
// in issue order anyway.
#include "pg.hpp"

#include <c10/util/Exception.h>

#include <sched.h>

#include <cerrno>
#include <cstdlib>

namespace hcomm_torch
{

thread_local int ProcessGroupHcomm::coalescingHere_ = 0;

// name's value, an integer in [0, max]; dflt when unset.
static uint64_t envCount(const char *name, uint64_t dflt, uint64_t max)
{
    const char *v = std::getenv(name);
    if (v == nullptr || *v == '\0')
        return dflt;
    char *end            = nullptr;
    errno                = 0;
    unsigned long long n = std::strtoull(v, &end, 10);
    TORCH_CHECK(errno == 0 && *end == '\0' && *v != '-' && n <= max, "hcomm backend: ", name, "=",
                v, " is not an integer in [0, ", max, "]");
    return n;
}

// TORCH_HCOMM_*, not HCOMM_*: hcomm warns of HCOMM_ variables it does not know.
void ProcessGroupHcomm::readInlineSettings()
{
    // more ranks than CPUs: a spinning caller holds the CPU a peer needs, so
    // it yields between tests; and a late peer is a scheduler slice late, not
    // microseconds, where a hand-over to the stream costs two more (4 ranks
    // on 2 cores, perf/RESULTS.md: 50 us handed over a quarter of the calls)
    cpu_set_t set;
    int       ncpu = sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set) : 0;
    inlineYield_   = ncpu > 0 && size_ > ncpu;
    inlineBytes_   = envCount("TORCH_HCOMM_INLINE_BYTES", 65536, uint64_t(1) << 40);
    inlineSpin_    = std::chrono::microseconds(
           envCount("TORCH_HCOMM_INLINE_US", inlineYield_ ? 1000 : 50, 1000000));
}

bool ProcessGroupHcomm::canInline(size_t bytes)
{
    // streamed_: before any request went to the stream, comm_ takes no lock,
    // and a hand-over would share it between two threads unlocked. pending_,
    // not hcomm_stream_query: the stream counts a task done only after its
    // host function returned, so a caller woken by the last Completion would
    // find it busy and queue, and the operation after that likewise.
    return bytes <= inlineBytes_ && inlineSpin_.count() > 0 && streamed_ && !coalescing_ &&
           coalescingHere_ == 0 && pending_.load(std::memory_order_acquire) == 0;
}

// Spins 10 us, then yields the CPU between tests: a peer later than that
// may be waiting for this CPU (another process holds the other ones). Without
// the yields, 2 ranks on 2 cores beside one busy process fell into handing
// every other operation over: 85 us a call, where the stream path took 40-80.
hcomm_status_t ProcessGroupHcomm::spin(hcomm_request_t *req, int *done)
{
    hcomm_status_t st = hcomm_test(req, done);
    if (*done) // a one-rank group's: no clock read
        return st;
    auto now = std::chrono::steady_clock::now(), until = now + inlineSpin_,
         yieldFrom = now + std::chrono::microseconds(10);
    for (;;) {
        if (inlineYield_ || now >= yieldFrom)
            sched_yield();
        st  = hcomm_test(req, done);
        now = std::chrono::steady_clock::now();
        if (*done || now >= until)
            return st;
    }
}

ProcessGroupHcomm::WorkPtr ProcessGroupHcomm::launchSmall(const c10::intrusive_ptr<HcommWork> &w,
                                                          size_t bytes, const IssueOn &issue)
{
    IssueLock lock(*this);
    TORCH_CHECK(stream_ != nullptr, "hcomm backend: ", w->name(), ": the group is shut down");
    if (!canInline(bytes))
        return launchLocked(w, [&] { return issue(nullptr); });
    // no earlier operation is outstanding: none reads or writes these tensors
    if (w->hasStageIn())
        HcommWork::runStageIn(w.get());
    hcomm_request_t req = nullptr;
    hcomm_status_t  st  = issue(&req);
    if (st != HCOMM_SUCCESS) {
        w->complete(st);
        TORCH_CHECK(false, "hcomm backend: ", w->name(), " on rank ", rank_,
                    " failed: ", statusText(st));
    }
    int done = 0;
    st       = spin(&req, &done);
    if (done) {
        inlined_++;
        w->complete(st); // a failure reaches the caller through wait(), as from the stream
        return w;
    }
    handedOver_++;
    auto c = new Completion;
    c->works.push_back(w);
    c->req = req;
    queueCompletion(c);
    return w;
}

void ProcessGroupHcomm::markStreamed()
{
    if (streamed_)
        return;
    // hcomm locks a communicator once a request has gone to a stream; a
    // request issued here is then waited for on the stream's thread too. So
    // one goes first: a message of no bytes to and from this rank, in a group
    // (no peer takes part, and it moves nothing).
    hcomm_status_t st = hcomm_group_start();
    if (st == HCOMM_SUCCESS)
        st = hcomm_send(nullptr, 0, HCOMM_UINT8, rank_, comm_, stream_);
    if (st == HCOMM_SUCCESS)
        st = hcomm_recv(nullptr, 0, HCOMM_UINT8, rank_, comm_, stream_);
    hcomm_status_t end = hcomm_group_end();
    st                 = st != HCOMM_SUCCESS ? st : end;
    TORCH_CHECK(st == HCOMM_SUCCESS,
                "hcomm backend: readying the group for point-to-point calls: ", statusText(st));
    streamed_ = true;
}

// A send or recv is issued nonblocking now, not when the stream reaches it:
// hcomm runs sends and receives issued back to back together, so an
// exchange (isend, then irecv, on both ranks) completes, as on gloo, where
// through the stream each would wait for the other. The communicator still
// orders it after everything issued before it; its Completion on the stream
// ends the Work in order. Small and alone, it is tested here first, as
// launchSmall's. A send of a non-contiguous tensor copies it first, here,
// unless an operation still queued writes it: then the copy, and the send,
// wait for that on the stream. Inside coalescing, launchSmall's way.
ProcessGroupHcomm::WorkPtr ProcessGroupHcomm::launchP2P(const c10::intrusive_ptr<HcommWork> &w,
                                                        size_t bytes, const IssueOn &issue)
{
    if (coalescingHere_ != 0)
        return launchSmall(w, bytes, issue);
    IssueLock lock(*this);
    TORCH_CHECK(stream_ != nullptr, "hcomm backend: ", w->name(), ": the group is shut down");
    if (coalescing_ || (w->hasStageIn() && stagesFromQueuedOutput(*w)))
        return launchLocked(w, [&] { return issue(nullptr); });
    if (w->hasStageIn())
        w->stageInNow(); // no queued operation writes the tensor: its data is final
    ReentrantIssue reentrant(*this);
    markStreamed();
    hcomm_request_t req = nullptr;
    hcomm_status_t  st  = issue(&req);
    if (st == HCOMM_SUCCESS && canInline(bytes)) {
        int done = 0;
        st       = spin(&req, &done);
        if (done) {
            inlined_++;
            w->complete(st);
            return w;
        }
        st = HCOMM_SUCCESS; // in progress: the stream finishes it
    }
    auto c = new Completion;
    c->works.push_back(w);
    c->req    = req;
    c->status = st;
    queueCompletion(c);
    TORCH_CHECK(st == HCOMM_SUCCESS, "hcomm backend: ", w->name(), " on rank ", rank_,
                " failed: ", statusText(st));
    return w;
}

// perf/torch_bench.py's C figure, taken between its torch calls on the same
// communicator, so that both see the machine in the same state (this one's
// speed drifts by 2x over seconds): n blocking hcomm_allreduce calls of 8 B
// on the caller's thread, as a C program makes them. Every rank calls it at
// once, with none of the group's operations outstanding.
double ProcessGroupHcomm::timeAllreduceFromC(int64_t n)
{
    IssueLock lock(*this);
    TORCH_CHECK(stream_ != nullptr, "hcomm backend: the group is shut down");
    TORCH_CHECK(n > 0 && !coalescing_ && pending_.load(std::memory_order_acquire) == 0,
                "hcomm backend: timing hcomm_allreduce needs n > 0 (got ", n,
                ") and none of the group's operations outstanding");
    float      buf[2] = {0.0f, 0.0f};
    const auto t0     = std::chrono::steady_clock::now();
    for (int64_t i = 0; i < n; i++) {
        hcomm_status_t st = hcomm_allreduce(buf, buf, 2, HCOMM_FLOAT32, HCOMM_SUM, comm_, nullptr);
        TORCH_CHECK(st == HCOMM_SUCCESS, "hcomm backend: hcomm_allreduce on rank ", rank_,
                    " failed: ", statusText(st));
    }
    std::chrono::duration<double> took = std::chrono::steady_clock::now() - t0;
    return took.count() / static_cast<double>(n);
}

std::pair<uint64_t, uint64_t> ProcessGroupHcomm::inlineCounts()
{
    std::lock_guard<std::mutex> lock(mu_);
    return {inlined_, handedOver_};
}

} // namespace hcomm_torch
