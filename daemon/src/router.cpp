#include "gpubind/daemon/router.h"

#include <errno.h>
#include <fcntl.h>
#include <grpcpp/server.h>
#include <grpcpp/server_posix.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "compact_server.h"
#include "gpubind/daemon/log.h"
#include "gpubind/protocol/compact.h"

namespace gpubind::daemon {
namespace {

constexpr uint64_t kListenId = 0;
constexpr uint64_t kWakeId = 1;
constexpr int kMaxEvents = 256;
// Descriptors kept free for everything that is not a client: the policy and topology on reload,
// gRPC's own, the journal.
constexpr rlim_t kReservedFds = 128;

// Whether the peer of `fd` was a member of `group` when it connected (its supplementary groups,
// SO_PEERGROUPS, Linux 4.13). Read from the socket, not from /proc: the pid could be reused, and
// the unit's ProtectProc=invisible hides other users' processes anyway.
bool peer_in_group(int fd, gid_t group) {
  std::vector<gid_t> groups(64);
  for (int attempt = 0; attempt < 2; ++attempt) {
    socklen_t len = static_cast<socklen_t>(groups.size() * sizeof(gid_t));
    if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups.data(), &len) == 0) {
      groups.resize(len / sizeof(gid_t));
      return std::find(groups.begin(), groups.end(), group) != groups.end();
    }
    if (errno != ERANGE) return false;
    groups.resize(len / sizeof(gid_t) + 1);  // the size the kernel asked for
  }
  return false;
}

std::string mib(size_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f MiB", static_cast<double>(bytes) / (1 << 20));
  return text;
}

}  // namespace

struct Router::Connection {
  uint64_t id = 0;
  int fd = -1;  // for kGrpc: a duplicate that only watches the peer hang up
  uid_t uid = 0;
  gid_t gid = 0;
  pid_t pid = 0;
  Stage stage = Stage::kClassify;
  Clock::time_point accepted{};
  Clock::time_point deadline{};
  std::string in;  // the request frame so far
  size_t want = compact::kRequestHeaderBytes;
  PlanWorkers::Ticket ticket = 0;  // while kPlan: the job planning its answer
  AnswerFrame out;                 // the answer frame
  bool holds_answer = false;       // out.body counts in queued_ until closed
  size_t sent = 0;
};

Router::Router(BinderService& service, PlanWorkers& workers, Limits limits, GrpcAccess access)
    : service_(service),
      workers_(workers),
      limits_(limits),
      grpc_access_(access),
      own_uid_(geteuid()) {}

Router::~Router() {
  stop();
}

Status Router::start(int listen_fd, grpc::Server* server) {
  listen_fd_ = listen_fd;
  server_ = server;
  // accept() in a loop until EAGAIN: the socket must not block (systemd's copy never accepts).
  const int flags = fcntl(listen_fd_, F_GETFL);
  if (flags < 0 || fcntl(listen_fd_, F_SETFL, flags | O_NONBLOCK) != 0)
    return make_error(std::string("listening socket: ") + strerror(errno));
  rlimit files{};
  if (getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur != RLIM_INFINITY) {
    const rlim_t room =
        files.rlim_cur > 2 * kReservedFds ? files.rlim_cur - kReservedFds : files.rlim_cur / 2;
    // A gRPC connection holds two descriptors: gRPC's and the one watching it.
    limits_.total = std::min<size_t>(limits_.total, room / 2);
  }
  limits_.per_uid = std::min(limits_.per_uid, limits_.total);
  epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (epoll_fd_ < 0 || wake_fd_ < 0) return make_error(std::string("epoll: ") + strerror(errno));
  epoll_event listen_event{EPOLLIN, {.u64 = kListenId}};
  epoll_event wake_event{EPOLLIN, {.u64 = kWakeId}};
  if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, listen_fd_, &listen_event) != 0 ||
      epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &wake_event) != 0) {
    return make_error(std::string("epoll_ctl: ") + strerror(errno));
  }
  thread_ = std::thread([this] { loop(); });
  return Ok{};
}

void Router::stop() {
  if (thread_.joinable()) {
    {
      std::lock_guard<std::mutex> lock(shared_mutex_);
      stop_requested_ = true;
    }
    const uint64_t one = 1;
    if (write(wake_fd_, &one, sizeof one) < 0)
      log::warning("router wake-up: " + std::string(strerror(errno)));
    thread_.join();
  }
  for (auto& [id, connection] : connections_)
    close(connection->fd);
  connections_.clear();
  by_uid_.clear();
  deadlines_.clear();
  queued_ = QueuedAnswers();
  for (int* fd : {&epoll_fd_, &wake_fd_}) {
    if (*fd >= 0) close(*fd);
    *fd = -1;
  }
}

void Router::loop() {
  epoll_event events[kMaxEvents];
  while (!stopping_) {
    const int n = epoll_wait(epoll_fd_, events, kMaxEvents, next_timeout_ms());
    if (n < 0 && errno != EINTR) {
      log::error("epoll_wait: " + std::string(strerror(errno)));
      return;
    }
    for (int i = 0; i < n; ++i) {
      const uint64_t id = events[i].data.u64;
      if (id == kListenId) {
        accept_all();
      } else if (id == kWakeId) {
        uint64_t count = 0;
        if (read(wake_fd_, &count, sizeof count) < 0 && errno != EAGAIN)
          log::warning("router wake-up: " + std::string(strerror(errno)));
        std::lock_guard<std::mutex> lock(shared_mutex_);
        stopping_ = stop_requested_;
      } else {
        on_event(id, events[i].events);
      }
    }
    take_finished();
    expire(Clock::now());
  }
}

void Router::accept_all() {
  // Bounded per wake-up, so a connect flood cannot keep the loop from everything else.
  for (int round = 0; round < kMaxEvents; ++round) {
    // gRPC drives its connections with its own poller and needs them non-blocking; so does this
    // loop.
    const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) {
      if (errno == EAGAIN || errno == EINTR || errno == ECONNABORTED) return;
      static log::RateLimited said;
      said.write(log::Level::kWarning, "accept: " + std::string(strerror(errno)));
      return;  // out of descriptors and the like: the next wake-up tries again
    }
    // A connection already closed by its client (a connect flood) is dropped before it costs
    // anything more.
    char first;
    if (recv(fd, &first, 1, MSG_PEEK | MSG_DONTWAIT) == 0) {
      close(fd);
      continue;
    }
    ucred peer{};
    socklen_t len = sizeof peer;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &peer, &len) != 0) {
      close(fd);
      continue;
    }
    if (!make_room(peer.uid, peer.pid)) {
      close(fd);
      continue;
    }
    auto connection = std::make_unique<Connection>();
    Connection& c = *connection;
    c.id = next_id_++;
    c.fd = fd;
    c.uid = peer.uid;
    c.gid = peer.gid;
    c.pid = peer.pid;
    connections_.emplace(c.id, std::move(connection));
    by_uid_[c.uid].insert(c.id);
    epoll_event event{EPOLLIN, {.u64 = c.id}};
    epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &event);
    c.accepted = Clock::now();
    set_deadline(c, c.accepted + limits_.classify);
    classify(c);  // a client that wrote before connect() returned is served at once
  }
}

// Whether a new connection of `uid` (from process `pid`) may stay. Past the user's cap, that
// user's oldest connection that has not yet said what it is makes room (none: the newcomer is
// closed; a user's burst does not cut its own requests in progress). At the daemon's cap, the
// user holding the most connections gives up its oldest (one that has not spoken first), unless
// it holds fewer than the newcomer's user would after admission: so a user never keeps more than
// its share of the total whatever its connections sent, and a launch's one connection always
// gets in. The daemon's own (the watchdog's probe) always get in. Root has no per-user cap (it
// could stop the daemon anyway; an administrator's benchmark or monitor may open many), only its
// share of the daemon's.
bool Router::make_room(uid_t uid, pid_t pid) {
  if (pid == getpid()) return true;
  auto refuse = [&](const std::string& why) {
    static log::RateLimited said;
    said.write(log::Level::kWarning, why);
    return false;
  };
  auto unclassified = [](const Connection& c) { return c.stage == Stage::kClassify; };
  auto any = [](const Connection&) { return true; };
  if (uid != 0 && connections_of(uid) >= limits_.per_uid && !close_oldest(uid, unclassified)) {
    return refuse("user " + std::to_string(uid) + " holds " + std::to_string(limits_.per_uid) +
                  " connections, the most one user may; closing their newest");
  }
  if (connections_.size() < limits_.total) return true;
  const auto most = std::max_element(
      by_uid_.begin(), by_uid_.end(),
      [](const auto& a, const auto& b) { return a.second.size() < b.second.size(); });
  const size_t theirs_after = connections_of(uid) + 1;
  if (most != by_uid_.end() && most->second.size() >= theirs_after) {
    const uid_t owner = most->first;
    const size_t theirs = most->second.size();
    if (close_oldest(owner, unclassified) || close_oldest(owner, any)) {
      static log::RateLimited said;
      said.write(log::Level::kWarning,
                 std::to_string(limits_.total) +
                     " connections are open, the most this daemon holds: user " +
                     std::to_string(owner) + ", holding " + std::to_string(theirs) +
                     ", gives up its oldest for user " + std::to_string(uid));
      return true;
    }
  }
  return refuse(std::to_string(connections_.size()) +
                " connections are open, the most this daemon holds, and no user holds more than "
                "user " +
                std::to_string(uid) + " would; closing the newest");
}

// Closes the oldest connection of `owner` that `which` selects; false when there is none.
bool Router::close_oldest(uid_t owner, bool (*which)(const Connection&)) {
  const auto found = by_uid_.find(owner);
  if (found == by_uid_.end()) return false;
  for (uint64_t id : found->second) {
    if (!which(*connections_.at(id))) continue;
    close_connection(id);
    return true;
  }
  return false;
}

size_t Router::connections_of(uid_t uid) const {
  const auto found = by_uid_.find(uid);
  return found == by_uid_.end() ? 0 : found->second.size();
}

void Router::on_event(uint64_t id, uint32_t events) {
  auto it = connections_.find(id);
  if (it == connections_.end()) return;
  Connection& c = *it->second;
  switch (c.stage) {
    case Stage::kClassify:
      classify(c);
      break;
    case Stage::kRead:
      read_request(c);
      break;
    case Stage::kWrite:
      write_answer(c);
      break;
    case Stage::kGrpc:
      // The client hung up (or the socket failed): gRPC sees it too and lets go of its side.
      if (events & (EPOLLRDHUP | EPOLLHUP | EPOLLERR)) close_connection(id);
      break;
    case Stage::kPlan:
      // Gone while its plan waits: the plan is dropped (or, running, its answer is).
      if (events & (EPOLLHUP | EPOLLERR)) close_connection(id);
      break;
  }
}

void Router::classify(Connection& c) {
  constexpr size_t kMagicSize = sizeof compact::kMagic;
  char head[kMagicSize];
  const ssize_t n = recv(c.fd, head, kMagicSize, MSG_PEEK | MSG_DONTWAIT);
  if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
    close_connection(c.id);  // gone before saying anything
    return;
  }
  if (n < 0) return;
  const size_t have = static_cast<size_t>(n);
  if (std::memcmp(head, compact::kMagic, have) != 0) {
    if (may_speak_grpc(c)) {
      hand_to_grpc(c);
    } else {
      refuse_grpc(c);
    }
  } else if (have == kMagicSize) {
    c.stage = Stage::kRead;
    read_request(c);
  }
  // else: a prefix of the magic so far; wait for more (the deadline bounds the wait)
}

void Router::read_request(Connection& c) {
  while (c.in.size() < c.want) {
    char buffer[16384];
    const size_t room = std::min(sizeof buffer, c.want - c.in.size());
    const ssize_t n = recv(c.fd, buffer, room, MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
      close_connection(c.id);
      return;
    }
    if (n < 0) return;  // more later
    c.in.append(buffer, static_cast<size_t>(n));
    if (c.in.size() == compact::kRequestHeaderBytes && c.want == compact::kRequestHeaderBytes) {
      HeaderVerdict verdict = check_header(c.in.data());
      if (verdict.kind == HeaderVerdict::kCloseSilently) {
        close_connection(c.id);
        return;
      }
      if (verdict.kind == HeaderVerdict::kAnswerNow) {
        service_.count_refused(verdict.cause);
        start_writing(c, std::move(verdict.answer));
        return;
      }
      c.want += verdict.body_bytes;
      // The whole exchange's deadline runs from accept: a client trickling bytes cannot hold
      // its slot longer.
      set_deadline(c, c.accepted + limits_.exchange);
      c.in.reserve(c.want);
    }
  }
  start_planning(c);
}

void Router::start_planning(Connection& c) {
  CompactIntake intake =
      take_in(std::string_view(c.in).substr(compact::kRequestHeaderBytes), service_);
  if (intake.answer) {
    start_writing(c, std::move(*intake.answer));
    return;
  }
  c.stage = Stage::kPlan;
  watch(c, 0);
  c.in.clear();
  c.in.shrink_to_fit();
  const uint64_t id = c.id;
  // The daemon's own probe (its watchdog) goes first; a body parsed on the worker is large until
  // its parse says otherwise.
  const auto* keyed = std::get_if<KeyedRequest>(&intake.request);
  const PlanWorkers::Lane lane = c.pid == getpid()  ? PlanWorkers::Lane::kOwn
                                 : keyed == nullptr ? PlanWorkers::Lane::kLarge
                                                    : keyed->lane();
  auto job = [this, id, request = std::move(intake.request)] {
    AnswerFrame frame = answer_frame(request, service_);
    {
      std::lock_guard<std::mutex> lock(shared_mutex_);
      finished_.emplace_back(id, std::move(frame));
    }
    const uint64_t one = 1;
    if (write(wake_fd_, &one, sizeof one) < 0) {
      // The eventfd's counter cannot overflow here; nothing to do but let the deadline act.
    }
  };
  const auto ticket = workers_.submit(c.uid, std::move(job), lane);
  if (ticket) {
    c.ticket = *ticket;
  } else {
    service_.count_refused(Metrics::Refusal::kBusy);
    static log::RateLimited said;
    said.write(log::Level::kWarning,
               "user " + std::to_string(c.uid) + " has too many plans waiting; closing one");
    close_connection(c.id);
  }
}

void Router::take_finished() {
  std::vector<std::pair<uint64_t, AnswerFrame>> done;
  {
    std::lock_guard<std::mutex> lock(shared_mutex_);
    done.swap(finished_);
  }
  for (auto& [id, frame] : done) {
    auto it = connections_.find(id);
    if (it == connections_.end()) continue;  // closed meanwhile (deadline, eviction)
    start_writing(*it->second, std::move(frame));
  }
}

void Router::start_writing(Connection& c, AnswerFrame frame) {
  c.stage = Stage::kWrite;
  c.out = std::move(frame);
  c.sent = 0;
  if (c.out.body) {
    if (auto refused = hold_answer(c)) {
      service_.count_refused(Metrics::Refusal::kBusy);
      c.out = refusal_frame(*refused);
    }
  }
  write_answer(c);
}

// Counts `c`'s answer against its user and the daemon until the connection closes; why not, when
// it would take either past its limit. A client that does not read pins the answer until its
// exchange deadline, so the bound holds however many such clients there are.
std::optional<std::string> Router::hold_answer(Connection& c) {
  const size_t adds = queued_.added_by(c.uid, c.out.body);
  auto refusal = [&](const std::string& waiting) {
    static log::RateLimited said;
    said.write(log::Level::kWarning, "user " + std::to_string(c.uid) + ": an answer of " +
                                         mib(c.out.body->size()) + " refused: " + waiting);
    return "answer of " + std::to_string(c.out.body->size()) +
           " bytes cannot be queued: " + waiting + " already waiting to be read";
  };
  if (queued_.of(c.uid) + adds > limits_.queued_bytes_per_uid) {
    return refusal("this user has " + std::to_string(queued_.of(c.uid)) +
                   " bytes of answers (at most " + std::to_string(limits_.queued_bytes_per_uid) +
                   " per user)");
  }
  if (queued_.total() + adds > limits_.queued_bytes_total && !make_room_for_answer(c.uid, adds)) {
    return refusal("users have " + std::to_string(queued_.total()) + " bytes of answers (at most " +
                   std::to_string(limits_.queued_bytes_total) + " in all)");
  }
  queued_.hold(c.uid, c.out.body);
  c.holds_answer = true;
  return std::nullopt;
}

// Room in the daemon's total for `bytes` more of `uid`'s answers, made as make_room makes it for
// connections: the user holding the most answer bytes loses its oldest unread answer, unless it
// holds fewer than `uid` would after admission. So users who read their answers are never
// refused for those who do not.
bool Router::make_room_for_answer(uid_t uid, size_t bytes) {
  auto holds_answer = [](const Connection& c) { return c.holds_answer; };
  while (queued_.total() + bytes > limits_.queued_bytes_total) {
    const auto most = queued_.largest();
    if (!most || queued_.of(*most) < queued_.of(uid) + bytes) return false;
    const size_t theirs = queued_.of(*most);
    if (!close_oldest(*most, holds_answer)) return false;
    static log::RateLimited said;
    said.write(log::Level::kWarning, "user " + std::to_string(*most) + " leaves " + mib(theirs) +
                                         " of answers unread: closing their oldest for user " +
                                         std::to_string(uid));
  }
  return true;
}

void Router::write_answer(Connection& c) {
  const AnswerFrame& out = c.out;
  const size_t size = out.size();
  while (c.sent < size) {
    // The frame's own bytes, the shared answer and its suffix, from where the last write ended.
    iovec parts[3];
    int count = 0;
    size_t skip = c.sent;
    auto add = [&](const char* data, size_t length) {
      if (skip >= length) {
        skip -= length;
        return;
      }
      parts[count++] = {const_cast<char*>(data + skip), length - skip};
      skip = 0;
    };
    add(out.head.data(), out.head.size());
    if (out.body) add(out.body->data(), out.body->size());
    add(out.suffix.data(), out.suffix.size());
    msghdr message{};
    message.msg_iov = parts;
    message.msg_iovlen = static_cast<size_t>(count);
    const ssize_t n = sendmsg(c.fd, &message, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
      watch(c, EPOLLOUT);
      return;
    }
    if (n <= 0) break;
    c.sent += static_cast<size_t>(n);
  }
  close_connection(c.id);
}

bool Router::may_speak_grpc(const Connection& c) const {
  if (c.uid == 0 || c.uid == own_uid_) return true;
  if (!grpc_access_.group) return false;
  return c.gid == *grpc_access_.group || peer_in_group(c.fd, *grpc_access_.group);
}

// gRPC 1.51's HTTP/2 side can be driven to hundreds of megabytes by one client (CVE-2023-44487,
// CVE-2023-33953, streams that are never finished or read): job users, who need only the compact
// protocol, never reach it. Said once in a while, not per connection.
void Router::refuse_grpc(Connection& c) {
  ++grpc_refused_;
  log::debug("closed a connection of uid " + std::to_string(c.uid) +
             " that did not speak the compact protocol (gRPC is not served to it)");
  static log::RateLimited said(std::chrono::seconds(600));
  said.write(log::Level::kInfo,
             std::to_string(grpc_refused_) +
                 " connections closed so far that did not speak the compact "
                 "protocol, from users gRPC is not served to (see --grpc-group)");
  close_connection(c.id);
}

void Router::hand_to_grpc(Connection& c) {
  // gRPC owns the connection from here; this loop keeps a duplicate only to see the client hang
  // up, to count it against its user, and to close it when evicted or past its lifetime.
  const int watcher = fcntl(c.fd, F_DUPFD_CLOEXEC, 0);
  epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, c.fd, nullptr);
  grpc::AddInsecureChannelFromFd(server_, c.fd);
  c.fd = watcher;
  if (watcher < 0) {  // out of descriptors: gRPC still serves it, uncounted
    c.fd = -1;
    close_connection(c.id);
    return;
  }
  c.stage = Stage::kGrpc;
  epoll_event event{EPOLLRDHUP, {.u64 = c.id}};
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, c.fd, &event);
  set_deadline(c, Clock::now() + limits_.grpc_lifetime);
}

void Router::expire(Clock::time_point now) {
  while (!deadlines_.empty() && deadlines_.begin()->first <= now) {
    close_connection(deadlines_.begin()->second);
  }
}

void Router::close_connection(uint64_t id) {
  auto it = connections_.find(id);
  if (it == connections_.end()) return;
  Connection& c = *it->second;
  deadlines_.erase({c.deadline, id});
  if (c.stage == Stage::kPlan) workers_.cancel(c.uid, c.ticket);
  if (c.holds_answer) queued_.release(c.uid, c.out.body);
  if (c.fd >= 0) {
    // For a gRPC connection this reaches gRPC's descriptor too: the socket is shut, not just
    // this duplicate, and gRPC closes its side.
    if (c.stage == Stage::kGrpc) shutdown(c.fd, SHUT_RDWR);
    close(c.fd);  // also leaves the epoll set
  }
  auto& ids = by_uid_[c.uid];
  ids.erase(id);
  if (ids.empty()) by_uid_.erase(c.uid);
  connections_.erase(it);
}

void Router::set_deadline(Connection& c, Clock::time_point deadline) {
  deadlines_.erase({c.deadline, c.id});
  c.deadline = deadline;
  deadlines_.insert({deadline, c.id});
}

void Router::watch(Connection& c, uint32_t events) {
  epoll_event event{events, {.u64 = c.id}};
  epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, c.fd, &event);
}

int Router::next_timeout_ms() const {
  if (deadlines_.empty()) return -1;
  const auto left =
      std::chrono::ceil<std::chrono::milliseconds>(deadlines_.begin()->first - Clock::now());
  return static_cast<int>(std::clamp<int64_t>(left.count(), 0, 60000));
}

}  // namespace gpubind::daemon
