// The threads that plan: CPU work only, never a socket. What a plan costs decides where it waits
// (Lane, from the request's expected answer size: KeyedRequest::lane):
// - the daemon's own health probe goes before everyone's work, so its watchdog never waits on
//   users;
// - small launches (a step of up to 64 tasks) have a worker of their own besides taking turns on
//   the others, so they wait at most behind other small plans (each well under a millisecond),
//   never behind another user's costly work;
// - large plans (megabytes of answer, tens of megabytes while made) run one at a time daemon-wide,
//   so however many users send them they hold one worker and the memory of one;
// - everything else takes turns: each uid has its own queue, served round robin, and at most a
//   few of its jobs run at once, so one user's flood delays that user and nobody else.
// A job still waiting whose sender has gone is dropped (cancel).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>
#include <vector>

namespace gpubind::daemon {

class PlanWorkers {
 public:
  using Job = std::function<void()>;
  enum class Lane { kOwn, kSmall, kNormal, kLarge };
  using Ticket = uint64_t;
  struct Limits {
    int threads = 4;
    int small_only = 1;       // of `threads`, those that take only small jobs (and kOwn)
    int running_per_uid = 2;  // below `threads`: another user always finds a free worker
    size_t queued_per_uid = 64;
    int large_at_once = 1;  // large jobs that run at once, whoever sent them
  };

  // `on_idle` runs on a worker, once each time the pool has run no job for `idle_after` after
  // its last one (the daemon gives a burst's working memory back to the system then).
  explicit PlanWorkers(Limits limits, std::function<void()> on_idle = nullptr,
                       std::chrono::milliseconds idle_after = std::chrono::seconds(2));
  ~PlanWorkers() { stop(); }
  PlanWorkers(const PlanWorkers&) = delete;
  PlanWorkers& operator=(const PlanWorkers&) = delete;

  // The job's ticket, or nullopt when `uid` already has queued_per_uid jobs waiting (the job is
  // not taken). kOwn jobs are the daemon's own and never refused.
  std::optional<Ticket> submit(uid_t uid, Job job, Lane lane = Lane::kNormal);
  // Drops `uid`'s job `ticket` if it is still waiting (true); one already running runs on.
  bool cancel(uid_t uid, Ticket ticket);
  void stop();  // runs no further jobs; jobs still queued are dropped

 private:
  struct Waiting {
    Job job;
    Lane lane = Lane::kNormal;
    Ticket ticket = 0;
  };
  struct Queue {
    std::deque<Waiting> jobs;
    int running = 0;
    bool in_turn = false;  // listed in turns_
  };
  void run(bool small_only);
  bool next(bool small_only, uid_t& uid, Waiting& job);  // mutex held
  // Waits for a job (true) or for the pool to have been idle long enough (false).
  bool wait_for_job(std::unique_lock<std::mutex>& lock, bool small_only, uid_t& uid, Waiting& job);
  void leave_turns(uid_t uid);  // mutex held

  const Limits limits_;
  const std::function<void()> on_idle_;
  const std::chrono::milliseconds idle_after_;
  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<Waiting> own_;  // the daemon's own jobs, before any user's
  std::unordered_map<uid_t, Queue> queues_;
  std::deque<uid_t> turns_;  // uids with jobs waiting, each once, in the order they get a turn
  bool stopping_ = false;
  int running_ = 0;
  int large_running_ = 0;
  Ticket last_ticket_ = 0;
  bool idle_pending_ = false;  // a job ran since on_idle last did
  std::chrono::steady_clock::time_point idle_at_{};
  std::vector<std::thread> threads_;
};

}  // namespace gpubind::daemon
