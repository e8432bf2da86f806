// The threads that plan: CPU work only, never a socket. Users take turns: each uid has its own
// queue, served round robin, and at most a few of its requests run at once, so one user's flood
// of costly requests delays that user and nobody else.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

namespace gpubind::daemon {

class PlanWorkers {
 public:
  using Job = std::function<void()>;
  struct Limits {
    int threads = 4;
    int running_per_uid = 2;  // below `threads`: another user always finds a free worker
    size_t queued_per_uid = 64;
  };

  // `on_idle` runs on a worker, once each time the pool has run no job for `idle_after` after
  // its last one (the daemon gives a burst's working memory back to the system then).
  explicit PlanWorkers(Limits limits, std::function<void()> on_idle = nullptr,
                       std::chrono::milliseconds idle_after = std::chrono::seconds(2));
  ~PlanWorkers() { stop(); }
  PlanWorkers(const PlanWorkers&) = delete;
  PlanWorkers& operator=(const PlanWorkers&) = delete;

  // False when `uid` already has queued_per_uid jobs waiting (the job is not taken).
  bool submit(uid_t uid, Job job);
  void stop();  // runs no further jobs; jobs still queued are dropped

 private:
  struct Queue {
    std::deque<Job> jobs;
    int running = 0;
    bool in_turn = false;  // listed in turns_
  };
  void run();
  bool next(uid_t& uid, Job& job);  // mutex held
  // Waits for a job (true) or for the pool to have been idle long enough (false).
  bool wait_for_job(std::unique_lock<std::mutex>& lock, uid_t& uid, Job& job);

  const Limits limits_;
  const std::function<void()> on_idle_;
  const std::chrono::milliseconds idle_after_;
  std::mutex mutex_;
  std::condition_variable ready_;
  std::unordered_map<uid_t, Queue> queues_;
  std::deque<uid_t> turns_;  // uids with jobs waiting, each once, in the order they get a turn
  bool stopping_ = false;
  int running_ = 0;
  bool idle_pending_ = false;  // a job ran since on_idle last did
  std::chrono::steady_clock::time_point idle_at_{};
  std::vector<std::thread> threads_;
};

}  // namespace gpubind::daemon
