// Every connection to the daemon's socket, from accept to close, on one event-loop thread
// (epoll): no thread ever waits on a client. A connection's first bytes say what it is: the
// compact protocol's magic (read here, planned on PlanWorkers, answered here) or anything else,
// which goes to the gRPC server when the peer may use it (root, the daemon's own user, members of
// --grpc-group) and is closed at once otherwise: gRPC's HTTP/2 side stays out of reach of job
// users. Each connection has a deadline whatever it sent; each user (SO_PEERCRED uid) a cap on
// open connections and a share of the daemon's, and a bound on the answer bytes waiting for them
// to read, so nobody can use up the daemon's descriptors or memory or stall another user's launch.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "gpubind/daemon/plan_workers.h"
#include "gpubind/daemon/queued_answers.h"
#include "gpubind/result.h"

namespace grpc {
class Server;
}

namespace gpubind::daemon {

class BinderService;
struct AnswerFrame;

class Router {
 public:
  using Clock = std::chrono::steady_clock;
  struct Limits {
    std::chrono::milliseconds classify{1000};  // to send the first bytes
    std::chrono::milliseconds exchange{2000};  // a compact request, from accept to answer sent
    std::chrono::seconds grpc_lifetime{600};   // a gRPC connection, however busy
    size_t per_uid = 64;                       // open connections of one user
    size_t total = 4096;  // open connections in all (lowered to fit RLIMIT_NOFILE)
    // Answer bytes waiting for their clients to read them (QueuedAnswers: a buffer shared by a
    // user's connections counts once). Per user: two of the largest answers
    // (compact::kMaxAnswerBytes), as many as the user's two planning turns make at once. In all:
    // four users' worth. With the 16 MiB cache, the four planners' working memory and what the
    // daemon holds at rest, this keeps it well inside the unit's MemoryMax=256M.
    size_t queued_bytes_per_uid = 32u << 20;
    size_t queued_bytes_total = 64u << 20;
  };
  // Who may speak gRPC besides root and the daemon's own user: members (primary or
  // supplementary, SO_PEERGROUPS) of this group (--grpc-group).
  struct GrpcAccess {
    std::optional<gid_t> group;
  };

  Router(BinderService& service, PlanWorkers& workers, Limits limits, GrpcAccess access = {});
  ~Router();
  Router(const Router&) = delete;
  Router& operator=(const Router&) = delete;

  Status start(int listen_fd, grpc::Server* server);
  void stop();  // stops accepting and closes the connections it holds; gRPC's own stay

 private:
  struct Connection;
  enum class Stage { kClassify, kRead, kPlan, kWrite, kGrpc };

  void loop();
  void accept_all();
  void on_event(uint64_t id, uint32_t events);
  void classify(Connection& c);
  void read_request(Connection& c);
  void start_planning(Connection& c);
  void start_writing(Connection& c, AnswerFrame frame);
  std::optional<std::string> hold_answer(Connection& c);
  bool make_room_for_answer(uid_t uid, size_t bytes);
  void write_answer(Connection& c);
  bool may_speak_grpc(const Connection& c) const;
  void hand_to_grpc(Connection& c);
  void refuse_grpc(Connection& c);
  void take_finished();
  void expire(Clock::time_point now);
  bool make_room(uid_t uid, pid_t pid);
  bool close_oldest(uid_t owner, bool (*which)(const Connection&));
  size_t connections_of(uid_t uid) const;
  void close_connection(uint64_t id);
  void set_deadline(Connection& c, Clock::time_point deadline);
  void watch(Connection& c, uint32_t events);
  int next_timeout_ms() const;

  BinderService& service_;
  PlanWorkers& workers_;
  Limits limits_;
  const GrpcAccess grpc_access_;
  const uid_t own_uid_;
  grpc::Server* server_ = nullptr;
  int listen_fd_ = -1;
  int epoll_fd_ = -1;
  int wake_fd_ = -1;  // stop() and finished plans wake the loop
  std::thread thread_;
  bool stopping_ = false;  // loop thread only, after a wake with stop_requested_

  uint64_t next_id_ = 2;  // 0: the listening socket, 1: the wake-up eventfd
  std::unordered_map<uint64_t, std::unique_ptr<Connection>> connections_;
  std::unordered_map<uid_t, std::set<uint64_t>> by_uid_;  // ids grow: the first is the oldest
  std::set<std::pair<Clock::time_point, uint64_t>> deadlines_;
  QueuedAnswers queued_;
  uint64_t grpc_refused_ = 0;  // connections that spoke gRPC without being allowed it

  std::mutex shared_mutex_;  // what workers and stop() hand to the loop
  std::vector<std::pair<uint64_t, AnswerFrame>> finished_;
  bool stop_requested_ = false;
};

}  // namespace gpubind::daemon
