// The gpubind.v1.Binder gRPC service: plans from the current daemon state, with a cache and stats.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "gpubind/daemon/daemon_state.h"
#include "gpubind/daemon/plan_cache.h"
#include "gpubind/v1/binder.grpc.pb.h"

namespace gpubind::daemon {

class LatencyWindow;
class PlanWorkers;

// Plan is served raw (callback API): its answer is the serialized bytes the compact transport
// sends, shared with the cache, never parsed into a message and serialized again (for a
// 4096-task plan that cost more than planning it).
class BinderService final : public v1::Binder::WithRawCallbackMethod_Plan<v1::Binder::Service> {
 public:
  BinderService(StatePtr state, bool socket_activated);
  ~BinderService() override;

  // Plans asked over gRPC are made on these workers, all in one turn of their own, so gRPC
  // clients take turns with the compact protocol's users. Without workers (tests), inline.
  void plan_on(PlanWorkers* workers) { workers_ = workers; }

  StatePtr state() const;
  // A successful reload: new state, new generation (the cache keys on it).
  void replace_state(StatePtr state);
  // A refused reload: the old state keeps serving; status reports why.
  void set_reload_error(const std::string& error);
  // Calls being answered right now (to drain them before shutdown).
  int in_flight() const { return in_flight_; }
  // Fault testing: hold every Plan answer this long, as an overloaded or swapping node would.
  void set_answer_delay(std::chrono::milliseconds delay) { answer_delay_ = delay; }

  // A serialized gpubind.v1.PlanResponse, shared with the cache (a 4096-task answer is megabytes:
  // it is not copied), and whether it came from the cache.
  struct Answer {
    PlanCache::Entry bytes;
    bool cached = false;
    // The bytes as sent: a cached answer gets `cached` appended (a field appended to serialized
    // protobuf overrides the one before it), so stored bytes go out without a parse.
    size_t size() const;
    void append_to(std::string& out) const;
  };

  // A Plan call, whichever protocol it came by: cache, planner, stats. The answer is what the
  // compact transport sends as is; errors are the request's.
  Result<Answer> answer(const v1::PlanRequest& request);
  // The cached answer to `request`, if there is one (counted as an answered call); never plans.
  // Cheap enough for the router's own thread, which thus skips the workers for repeated shapes.
  std::optional<Answer> answer_from_cache(const v1::PlanRequest& request);

  grpc::ServerUnaryReactor* Plan(grpc::CallbackServerContext* context,
                                 const grpc::ByteBuffer* request,
                                 grpc::ByteBuffer* response) override;
  grpc::Status GetTopology(grpc::ServerContext* context, const v1::GetTopologyRequest* request,
                           v1::GetTopologyResponse* response) override;
  grpc::Status GetStatus(grpc::ServerContext* context, const v1::GetStatusRequest* request,
                         v1::GetStatusResponse* response) override;

 private:
  // Why `request` gets no plan: its own fault (invalid_input), or it does not fit the daemon's
  // view of the node (node_mismatch, logged as a warning).
  Error refuse(const Error& why, const v1::PlanRequest& request);
  // Answers `request` into `response`: the status to finish the call with.
  grpc::Status answer_call(const v1::PlanRequest& request, grpc::ByteBuffer& response);

  mutable std::mutex state_mutex_;
  StatePtr state_;
  std::string reload_error_;
  const bool socket_activated_;
  const std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
  // A few hundred typical answers, or a dozen of the largest (4096 tasks); well inside the
  // unit's MemoryMax whatever requests arrive.
  static constexpr size_t kCacheBudgetBytes = 16u << 20;
  PlanCache cache_{kCacheBudgetBytes};
  const std::unique_ptr<LatencyWindow> latencies_;
  std::atomic<uint64_t> requests_{0};
  std::atomic<uint64_t> errors_{0};
  std::atomic<uint64_t> cache_hits_{0};
  std::atomic<int> in_flight_{0};
  std::chrono::milliseconds answer_delay_{0};
  PlanWorkers* workers_ = nullptr;
};

// Resident set size of this process, in bytes (0 if unknown).
uint64_t resident_bytes();
// CPU time (user + system) of this process, in seconds.
double cpu_seconds();

}  // namespace gpubind::daemon
