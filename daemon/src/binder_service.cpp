#include "gpubind/daemon/binder_service.h"

#include <sys/resource.h>
#include <unistd.h>

#include <fstream>
#include <thread>

#include "gpubind/api/convert.h"
#include "gpubind/daemon/fallback_spool.h"
#include "gpubind/daemon/journal.h"
#include "gpubind/daemon/log.h"
#include "gpubind/daemon/plan_workers.h"
#include "gpubind/planner.h"
#include "gpubind/protocol/compact.h"
#include "latency_window.h"

namespace gpubind::daemon {
namespace {

// Counts a call as in flight for its whole duration.
class InFlight {
 public:
  explicit InFlight(std::atomic<int>& counter) : counter_(counter) { ++counter_; }
  ~InFlight() { --counter_; }
  InFlight(const InFlight&) = delete;
  InFlight& operator=(const InFlight&) = delete;

 private:
  std::atomic<int>& counter_;
};

}  // namespace

BinderService::BinderService(StatePtr state, bool socket_activated)
    : state_(std::move(state)),
      socket_activated_(socket_activated),
      latencies_(std::make_unique<LatencyWindow>()),
      journal_(std::make_unique<Journal>(Journal::socket_from_env())) {}

BinderService::~BinderService() = default;

StatePtr BinderService::state() const {
  std::lock_guard<std::mutex> lock(state_mutex_);
  return state_;
}

void BinderService::replace_state(StatePtr state) {
  std::lock_guard<std::mutex> lock(state_mutex_);
  state_ = std::move(state);
  reload_error_.clear();
  metrics_.count_reload(true);
}

void BinderService::set_reload_error(const std::string& error) {
  std::lock_guard<std::mutex> lock(state_mutex_);
  reload_error_ = error;
  metrics_.count_reload(false);
}

void BinderService::set_fallback_spool(const std::string& folder) {
  spool_ = std::make_unique<FallbackSpool>(folder);
  spool_->prepare();
}

namespace {

constexpr const char* kNotARequest = "not a gpubind.v1.PlanRequest";

const std::string& cached_flag() {
  static const std::string flag = [] {
    v1::PlanResponse response;
    response.set_cached(true);
    return response.SerializeAsString();
  }();
  return flag;
}

}  // namespace

size_t KeyedRequest::expected_answer_bytes() const {
  const size_t gpus =
      request_.gpus_given()
          ? static_cast<size_t>(request_.gpus_size() + request_.unplaced_gpus_size())
          : state_->node.topology.gpus.size();
  size_t token_bytes = 0;
  for (const v1::StepGpu& gpu : request_.gpus())
    token_bytes += gpu.token().size();
  for (const std::string& token : request_.unplaced_gpus())
    token_bytes += token.size();
  const size_t tasks = std::max<size_t>(request_.ntasks(), 1);
  const size_t mean_token = gpus == 0 ? 1 : std::max<size_t>(token_bytes / gpus, 1);
  // A task sees gpus_per_task GPUs, else its share of the step's (at least one).
  const size_t per_task = request_.gpus_per_task() > 0 ? std::min<size_t>(request_.gpus_per_task(),
                                                                          std::max<size_t>(gpus, 1))
                          : gpus == 0                  ? 0
                                      : std::max<size_t>((gpus + tasks - 1) / tasks, 1);
  return tasks * (400 + per_task * (50 + 4 * mean_token));
}

PlanWorkers::Lane KeyedRequest::lane() const {
  const size_t bytes = expected_answer_bytes();
  if (bytes > kLargeAnswerBytes) return PlanWorkers::Lane::kLarge;
  return request_.ntasks() <= kSmallTasks ? PlanWorkers::Lane::kSmall : PlanWorkers::Lane::kNormal;
}

size_t BinderService::Answer::size() const {
  return bytes->size() + (cached ? cached_flag().size() : 0);
}

std::string_view BinderService::Answer::suffix() const {
  return cached ? std::string_view(cached_flag()) : std::string_view();
}

Error BinderService::refuse(const Error& why, Metrics::Refusal cause,
                            const v1::PlanRequest& request) {
  ++errors_;
  metrics_.count(why.node_mismatch ? Metrics::Refusal::kNodeMismatch : cause);
  // Whatever a message quotes of the request, a client gets it back in bounds (a gRPC status
  // past its metadata limit would arrive as RESOURCE_EXHAUSTED instead of the reason).
  constexpr size_t kMaxReason = 1024;
  const std::string reason = why.message.size() <= kMaxReason
                                 ? why.message
                                 : why.message.substr(0, kMaxReason) + "... (reason cut)";
  const std::string step =
      "job " + std::to_string(request.job_id()) + " step " + std::to_string(request.step_id());
  Error error = make_error(reason);
  if (why.node_mismatch) {
    // A stale node view, or a request any user can send at will: a launch whose live node plans
    // it tells the two apart (its node_mismatch fallback report).
    static log::RateLimited said;
    said.write(log::Level::kWarning,
               step + " names what this daemon's topology lacks (" + reason +
                   "); if launches report node_mismatch fallbacks, the node changed: reload "
                   "gpubindd");
    error.node_mismatch = true;
  } else {
    log::debug("refused plan for " + step + ": " + reason);
    error.invalid_input = true;
  }
  return error;
}

Result<KeyedRequest> BinderService::receive(std::string_view bytes) {
  ++parsed_;
  v1::PlanRequest request;
  if (!request.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    count_refused(Metrics::Refusal::kMalformed);
    return make_error(kNotARequest);
  }
  return key(std::move(request));
}

Result<KeyedRequest> BinderService::receive(const grpc::ByteBuffer& bytes) {
  ++parsed_;
  grpc::ByteBuffer consumed(bytes);  // Deserialize empties its buffer; this copy shares the slices
  v1::PlanRequest request;
  if (!grpc::SerializationTraits<v1::PlanRequest>::Deserialize(&consumed, &request).ok()) {
    count_refused(Metrics::Refusal::kMalformed);
    return make_error(kNotARequest);
  }
  return key(std::move(request));
}

KeyedRequest BinderService::key(v1::PlanRequest request) {
  StatePtr state = this->state();
  std::string key;
  if (!request.bypass_cache()) {
    ++keyed_;
    key = PlanCache::key_of(state->policy_generation, request);
  }
  return KeyedRequest(std::move(request), std::move(state), std::move(key));
}

// The plan for `request` as serialized gpubind.v1.PlanResponse bytes; the plan itself, as large as
// its answer, is freed on return.
std::variant<std::string, BinderService::Refused> BinderService::plan_bytes(
    const DaemonState& state, const v1::PlanRequest& request) {
  auto planner_request = api::request_from_proto(request);
  if (!planner_request) return Refused{planner_request.error(), Metrics::Refusal::kMalformed};
  auto plan = make_plan(state.node.topology, state.node.policy, *planner_request);
  if (!plan) return Refused{plan.error(), Metrics::Refusal::kUnplannable};
  return api::serialize_plan(
      *plan, &state.node.topology,
      {state.policy_generation, state.topology_generation, state.node.topology.hostname});
}

Result<BinderService::Answer> BinderService::answer(const KeyedRequest& keyed) {
  const InFlight guard(in_flight_);
  const auto start = std::chrono::steady_clock::now();
  const v1::PlanRequest& request = keyed.request_;
  if (answer_delay_.count() > 0) {
    // Fault tests kill the daemon once this line shows a request is being held.
    log::debug("holding the answer for job " + std::to_string(request.job_id()) + " step " +
               std::to_string(request.step_id()) + " " + std::to_string(answer_delay_.count()) +
               " ms");
    std::this_thread::sleep_for(answer_delay_);
  }
  // Looked up again: the same shape, queued behind this one's twin, is planned only once.
  if (!keyed.key_.empty()) {
    if (PlanCache::Entry hit = cache_.find(keyed.key_)) {
      ++cache_hits_;
      Answer answer{std::move(hit), true};
      answered(keyed, answer, start);
      return answer;
    }
  }
  auto planned = plan_bytes(*keyed.state_, request);
  if (auto* refused = std::get_if<Refused>(&planned))
    return refuse(refused->why, refused->cause, request);
  std::string& serialized = std::get<std::string>(planned);
  // An answer no client could take is refused before it is cached or queued: the plugin refuses
  // frames past compact::kMaxAnswerBytes, and the router's per-user queue holds no more.
  if (const size_t size = serialized.size() + cached_flag().size();
      size > compact::kMaxAnswerBytes) {
    return refuse(make_error("the plan's answer would be " + std::to_string(size) +
                             " bytes, more than the " + std::to_string(compact::kMaxAnswerBytes) +
                             " a client may receive: ask for fewer tasks, fewer GPUs per task "
                             "or shorter GPU tokens"),
                  Metrics::Refusal::kTooLarge, request);
  }
  auto bytes = std::make_shared<const std::string>(std::move(serialized));
  if (!keyed.key_.empty()) cache_.insert(keyed.key_, bytes);
  log::debug("planned job " + std::to_string(request.job_id()) + " step " +
             std::to_string(request.step_id()) + ": " + std::to_string(request.ntasks()) +
             " tasks");
  Answer answer{std::move(bytes), false};
  answered(keyed, answer, start);
  return answer;
}

void BinderService::answered(const KeyedRequest& keyed, const Answer& answer,
                             std::chrono::steady_clock::time_point start) {
  const auto took = std::chrono::steady_clock::now() - start;
  ++requests_;
  latencies_->add(std::chrono::duration<double, std::micro>(took).count());
  metrics_.count(answer.cached ? Metrics::Source::kCache : Metrics::Source::kWorker);
  metrics_.observe(std::chrono::duration_cast<std::chrono::nanoseconds>(took));
  // Plans for no job (the watchdog's probe every few seconds, gpubindctl plan) are not recorded.
  const v1::PlanRequest& request = keyed.request_;
  if (journal_->enabled() && request.job_id() != 0) {
    journal_->plan({request.job_id(), request.step_id(), request.ntasks(),
                    answer.cached ? "cache" : "worker", count_warnings(*answer.bytes)});
  }
}

std::optional<BinderService::Answer> BinderService::answer_from_cache(const KeyedRequest& keyed) {
  if (keyed.key_.empty() || answer_delay_.count() > 0) return std::nullopt;
  const auto start = std::chrono::steady_clock::now();
  PlanCache::Entry hit = cache_.find(keyed.key_);
  if (!hit) return std::nullopt;
  ++cache_hits_;
  Answer answer{std::move(hit), true};
  answered(keyed, answer, start);
  return answer;
}

namespace {

// Every queue of PlanWorkers is a uid's; gRPC's callers are not known by uid, so they share this
// one (outside the range of real uids).
constexpr uid_t kGrpcTurn = static_cast<uid_t>(-2);

// The answer's bytes as gRPC slices that borrow them: the entry stays alive until gRPC is done.
grpc::ByteBuffer borrowed(const BinderService::Answer& answer) {
  auto* owner = new PlanCache::Entry(answer.bytes);
  grpc::Slice slices[2] = {
      grpc::Slice(
          const_cast<char*>(answer.bytes->data()), answer.bytes->size(),
          [](void* entry) { delete static_cast<PlanCache::Entry*>(entry); }, owner),
      grpc::Slice(cached_flag())};
  return grpc::ByteBuffer(slices, answer.cached ? 2 : 1);
}

// A call waiting for its plan; finished however it ends, so a call dropped by stopping workers
// never leaves gRPC waiting.
struct PendingCall {
  PendingCall(grpc::ServerUnaryReactor* reactor_, grpc::ByteBuffer* response_,
              KeyedRequest request_)
      : reactor(reactor_), response(response_), request(std::move(request_)) {}
  PendingCall(const PendingCall&) = delete;
  PendingCall& operator=(const PendingCall&) = delete;

  grpc::ServerUnaryReactor* reactor;
  grpc::ByteBuffer* response;
  const KeyedRequest request;
  bool finished = false;

  void finish(const grpc::Status& status) {
    finished = true;
    reactor->Finish(status);
  }
  ~PendingCall() {
    if (!finished)
      reactor->Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, "gpubindd is stopping"));
  }
};

}  // namespace

grpc::Status BinderService::answer_call(const KeyedRequest& request, grpc::ByteBuffer& response) {
  auto answer = this->answer(request);
  if (!answer) {
    return grpc::Status(answer.error().node_mismatch ? grpc::StatusCode::FAILED_PRECONDITION
                                                     : grpc::StatusCode::INVALID_ARGUMENT,
                        answer.error().message);
  }
  response = borrowed(*answer);
  return grpc::Status::OK;
}

grpc::ServerUnaryReactor* BinderService::Plan(grpc::CallbackServerContext* context,
                                              const grpc::ByteBuffer* request,
                                              grpc::ByteBuffer* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  auto keyed = receive(*request);
  if (!keyed) {
    reactor->Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, keyed.error().message));
    return reactor;
  }
  if (auto cached = answer_from_cache(*keyed)) {
    *response = borrowed(*cached);
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }
  auto call = std::make_shared<PendingCall>(reactor, response, std::move(keyed).value());
  auto plan = [this, call] { call->finish(answer_call(call->request, *call->response)); };
  if (!workers_) {
    plan();
  } else if (!workers_->submit(kGrpcTurn, plan, call->request.lane())) {
    count_refused(Metrics::Refusal::kBusy);
    call->finish(
        grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                     "no planner free: too many gRPC plans waiting, or gpubindd is stopping"));
  }
  return reactor;
}

grpc::Status BinderService::GetTopology(grpc::ServerContext*, const v1::GetTopologyRequest*,
                                        v1::GetTopologyResponse* response) {
  const InFlight guard(in_flight_);
  const StatePtr state = this->state();
  api::topology_to_proto(state->node.topology, *response);
  response->set_topology_generation(state->topology_generation);
  response->set_reserved_cpus(reserved_cpus(state->node.topology, state->node.policy).to_list());
  return grpc::Status::OK;
}

grpc::Status BinderService::GetStatus(grpc::ServerContext*, const v1::GetStatusRequest*,
                                      v1::GetStatusResponse* response) {
  const InFlight guard(in_flight_);
  const StatePtr state = this->state();
  response->set_version(GPUBIND_VERSION);
  response->set_uptime_s(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count());
  response->set_policy_source(state->policy_source);
  response->set_policy_generation(state->policy_generation);
  response->set_topology_source(state->node.topology.source);
  response->set_topology_generation(state->topology_generation);
  response->set_requests(requests_);
  response->set_errors(errors_);
  response->set_cache_hits(cache_hits_);
  response->set_p50_us(latencies_->percentile(50));
  response->set_p99_us(latencies_->percentile(99));
  response->set_rss_bytes(resident_bytes());
  response->set_cpu_s(cpu_seconds());
  response->set_pid(static_cast<uint32_t>(getpid()));
  response->set_socket_activated(socket_activated_);
  response->set_start_time_s(std::chrono::duration<double>(started_at_.time_since_epoch()).count());
  metrics_.to_proto(*response);
  if (spool_) {
    spool_->absorb_into(*response);
  } else {
    FallbackSpool("").absorb_into(*response);  // every reason, at 0
  }
  {
    std::lock_guard<std::mutex> lock(state_mutex_);
    response->set_last_reload_error(reload_error_);
  }
  return grpc::Status::OK;
}

double cpu_seconds() {
  rusage usage{};
  if (getrusage(RUSAGE_SELF, &usage) != 0) return 0;
  auto seconds = [](const timeval& tv) { return tv.tv_sec + tv.tv_usec / 1e6; };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

uint64_t resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  uint64_t size = 0, resident = 0;
  if (!(statm >> size >> resident)) return 0;
  return resident * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
}

}  // namespace gpubind::daemon
