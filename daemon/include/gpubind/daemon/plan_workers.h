// The threads that plan: CPU work only, never a socket. Users take turns: each uid has its own
// queue, served round robin, and at most a few of its requests run at once, so one user's flood
// of costly requests delays that user and nobody else. Large plans also take turns daemon-wide:
// the largest (4096 tasks, eight GPUs of 128-byte tokens each) needs ~40 MiB while it is made,
// so four at once, from two users, would hold more than half the unit's MemoryMax.
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
    int large_at_once = 1;  // jobs submitted as large that run at once, whoever sent them
  };

  // `on_idle` runs on a worker, once each time the pool has run no job for `idle_after` after
  // its last one (the daemon gives a burst's working memory back to the system then).
  explicit PlanWorkers(Limits limits, std::function<void()> on_idle = nullptr,
                       std::chrono::milliseconds idle_after = std::chrono::seconds(2));
  ~PlanWorkers() { stop(); }
  PlanWorkers(const PlanWorkers&) = delete;
  PlanWorkers& operator=(const PlanWorkers&) = delete;

  // False when `uid` already has queued_per_uid jobs waiting (the job is not taken). A `large`
  // job waits, in its user's turn, until fewer than large_at_once large jobs run.
  bool submit(uid_t uid, Job job, bool large = false);
  void stop();  // runs no further jobs; jobs still queued are dropped

 private:
  struct Waiting {
    Job job;
    bool large = false;
  };
  struct Queue {
    std::deque<Waiting> jobs;
    int running = 0;
    bool in_turn = false;  // listed in turns_
  };
  void run();
  bool next(uid_t& uid, Waiting& job);  // mutex held
  // Waits for a job (true) or for the pool to have been idle long enough (false).
  bool wait_for_job(std::unique_lock<std::mutex>& lock, uid_t& uid, Waiting& job);

  const Limits limits_;
  const std::function<void()> on_idle_;
  const std::chrono::milliseconds idle_after_;
  std::mutex mutex_;
  std::condition_variable ready_;
  std::unordered_map<uid_t, Queue> queues_;
  std::deque<uid_t> turns_;  // uids with jobs waiting, each once, in the order they get a turn
  bool stopping_ = false;
  int running_ = 0;
  int large_running_ = 0;
  bool idle_pending_ = false;  // a job ran since on_idle last did
  std::chrono::steady_clock::time_point idle_at_{};
  std::vector<std::thread> threads_;
};

}  // namespace gpubind::daemon
