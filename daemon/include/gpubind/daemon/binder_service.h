// The gpubind.v1.Binder gRPC service: plans from the current daemon state, with a cache and stats.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include "gpubind/daemon/daemon_state.h"
#include "gpubind/daemon/metrics.h"
#include "gpubind/daemon/plan_cache.h"
#include "gpubind/daemon/plan_workers.h"
#include "gpubind/v1/binder.grpc.pb.h"

namespace gpubind::daemon {

class FallbackSpool;
class Journal;
class LatencyWindow;

// A Plan request on its way from the thread that received it (the router's, or gRPC's) to the
// worker that plans it: parsed once and keyed once, by BinderService::receive, and answered from
// the state it was keyed in.
class KeyedRequest {
 public:
  // What its plan costs, judged by the size of its answer: planning time and working memory
  // follow it (measured on the LUMI-G fixture: ~400 bytes a task, and for each GPU a task sees
  // ~50 bytes and ~4 per byte of its token; a 4 MB answer takes ~18 ms and ~10 MB to make).
  size_t expected_answer_bytes() const;
  // Where it waits for a worker (plan_workers.h): small for a step of up to kSmallTasks tasks,
  // large past kLargeAnswerBytes whatever its task count.
  static constexpr uint32_t kSmallTasks = 64;
  static constexpr size_t kLargeAnswerBytes = 1u << 20;
  PlanWorkers::Lane lane() const;

 private:
  friend class BinderService;
  KeyedRequest(v1::PlanRequest request, StatePtr state, std::string key)
      : request_(std::move(request)), state_(std::move(state)), key_(std::move(key)) {}

  v1::PlanRequest request_;
  StatePtr state_;   // its generation is in the key
  std::string key_;  // the cache's; empty when the request bypasses the cache
};

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
  // Launches' fallback reports are counted from this folder (created here if missing).
  void set_fallback_spool(const std::string& folder);
  // A Plan request refused before it reached the service (overload, a bad frame): counted.
  void count_refused(Metrics::Refusal cause) { metrics_.count(cause); }

  // A serialized gpubind.v1.PlanResponse, shared with the cache (a 4096-task answer is megabytes:
  // it is not copied), and whether it came from the cache.
  struct Answer {
    PlanCache::Entry bytes;
    bool cached = false;
    // The bytes as sent are `bytes` then `suffix()`: a cached answer gets `cached` appended (a
    // field appended to serialized protobuf overrides the one before it), so stored bytes go out
    // without a parse or a copy.
    size_t size() const;
    std::string_view suffix() const;
  };

  // The one way a Plan request's bytes become a KeyedRequest, whichever protocol brought them:
  // parsed, then keyed in the current state unless it bypasses the cache. Refused when the bytes
  // are not a gpubind.v1.PlanRequest.
  Result<KeyedRequest> receive(std::string_view bytes);
  Result<KeyedRequest> receive(const grpc::ByteBuffer& bytes);
  // Requests parsed and keyed so far: one of each per request (tests hold the daemon to it).
  struct Intake {
    uint64_t parsed = 0;
    uint64_t keyed = 0;
  };
  Intake intake() const { return {parsed_, keyed_}; }

  // A Plan call, whichever protocol it came by: cache, planner, stats. The answer is what the
  // compact transport sends as is; errors are the request's.
  Result<Answer> answer(const KeyedRequest& request);
  // The cached answer to `request`, if there is one (counted as an answered call); never plans.
  // Cheap enough for the thread that received it, which thus skips the workers for repeated
  // shapes.
  std::optional<Answer> answer_from_cache(const KeyedRequest& request);

  grpc::ServerUnaryReactor* Plan(grpc::CallbackServerContext* context,
                                 const grpc::ByteBuffer* request,
                                 grpc::ByteBuffer* response) override;
  grpc::Status GetTopology(grpc::ServerContext* context, const v1::GetTopologyRequest* request,
                           v1::GetTopologyResponse* response) override;
  grpc::Status GetStatus(grpc::ServerContext* context, const v1::GetStatusRequest* request,
                         v1::GetStatusResponse* response) override;

 private:
  // Why `request` gets no plan: its own fault (invalid_input, counted as `cause`), or it does not
  // fit the daemon's view of the node (node_mismatch).
  Error refuse(const Error& why, Metrics::Refusal cause, const v1::PlanRequest& request);
  // The serialized answer, or why not and the cause it is counted under.
  struct Refused {
    Error why;
    Metrics::Refusal cause;
  };
  static std::variant<std::string, Refused> plan_bytes(const DaemonState& state,
                                                       const v1::PlanRequest& request);
  // `request` with the state it is answered from and, unless it bypasses the cache, its key.
  KeyedRequest key(v1::PlanRequest request);
  // Answers `request` into `response`: the status to finish the call with.
  grpc::Status answer_call(const KeyedRequest& request, grpc::ByteBuffer& response);
  // An answered call: counters, histogram, and its journal record (after the timing ends).
  void answered(const KeyedRequest& request, const Answer& answer,
                std::chrono::steady_clock::time_point start);

  mutable std::mutex state_mutex_;
  StatePtr state_;
  std::string reload_error_;
  const bool socket_activated_;
  const std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
  const std::chrono::system_clock::time_point started_at_ = std::chrono::system_clock::now();
  // A few hundred typical answers, or a dozen of the largest (4096 tasks); well inside the
  // unit's MemoryMax whatever requests arrive.
  static constexpr size_t kCacheBudgetBytes = 16u << 20;
  PlanCache cache_{kCacheBudgetBytes};
  const std::unique_ptr<LatencyWindow> latencies_;
  std::atomic<uint64_t> requests_{0};
  std::atomic<uint64_t> errors_{0};
  std::atomic<uint64_t> cache_hits_{0};
  std::atomic<uint64_t> parsed_{0};
  std::atomic<uint64_t> keyed_{0};
  std::atomic<int> in_flight_{0};
  Metrics metrics_;
  std::unique_ptr<FallbackSpool> spool_;  // set before serving; read by GetStatus
  const std::unique_ptr<Journal> journal_;
  std::chrono::milliseconds answer_delay_{0};
  PlanWorkers* workers_ = nullptr;
};

// Resident set size of this process, in bytes (0 if unknown).
uint64_t resident_bytes();
// CPU time (user + system) of this process, in seconds.
double cpu_seconds();

}  // namespace gpubind::daemon
