#include "gpubind/daemon/plan_workers.h"

namespace gpubind::daemon {

PlanWorkers::PlanWorkers(Limits limits, std::function<void()> on_idle,
                         std::chrono::milliseconds idle_after)
    : limits_(limits), on_idle_(std::move(on_idle)), idle_after_(idle_after) {
  for (int i = 0; i < limits_.threads; ++i)
    threads_.emplace_back([this] { run(); });
}

bool PlanWorkers::submit(uid_t uid, Job job, bool large) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_) return false;
    Queue& queue = queues_[uid];
    if (queue.jobs.size() >= limits_.queued_per_uid) return false;
    queue.jobs.push_back({std::move(job), large});
    if (!queue.in_turn) {
      queue.in_turn = true;
      turns_.push_back(uid);
    }
  }
  ready_.notify_one();
  return true;
}

void PlanWorkers::stop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  ready_.notify_all();
  for (std::thread& thread : threads_)
    thread.join();
  threads_.clear();
  queues_.clear();
  turns_.clear();
}

// The first uid in turn that may run its next job takes it and goes to the back of the line.
bool PlanWorkers::next(uid_t& uid, Waiting& job) {
  for (auto it = turns_.begin(); it != turns_.end(); ++it) {
    Queue& queue = queues_[*it];
    if (queue.running >= limits_.running_per_uid) continue;
    if (queue.jobs.front().large && large_running_ >= limits_.large_at_once) continue;
    uid = *it;
    turns_.erase(it);
    job = std::move(queue.jobs.front());
    queue.jobs.pop_front();
    ++queue.running;
    large_running_ += job.large;
    if (queue.jobs.empty()) {
      queue.in_turn = false;
    } else {
      turns_.push_back(uid);
    }
    return true;
  }
  return false;
}

bool PlanWorkers::wait_for_job(std::unique_lock<std::mutex>& lock, uid_t& uid, Waiting& job) {
  auto woken = [&] { return stopping_ || next(uid, job); };
  if (!idle_pending_ || !on_idle_) {
    ready_.wait(lock, woken);
    return true;
  }
  if (ready_.wait_until(lock, idle_at_, woken)) return true;
  idle_pending_ = false;  // this worker runs the hook; the others wait for jobs
  return false;
}

void PlanWorkers::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    uid_t uid = 0;
    Waiting job;
    if (!wait_for_job(lock, uid, job)) {
      lock.unlock();
      on_idle_();
      lock.lock();
      continue;
    }
    if (stopping_) return;
    ++running_;
    lock.unlock();
    job.job();
    job.job = nullptr;  // whatever it holds is freed outside the lock
    lock.lock();
    large_running_ -= job.large;
    if (--running_ == 0 && turns_.empty()) {
      idle_pending_ = true;
      idle_at_ = std::chrono::steady_clock::now() + idle_after_;
    }
    Queue& queue = queues_[uid];
    --queue.running;
    if (queue.jobs.empty() && queue.running == 0 && !queue.in_turn) queues_.erase(uid);
    // A user's turn or a large job's slot is free again: another worker may take a job too.
    if (!turns_.empty()) ready_.notify_one();
  }
}

}  // namespace gpubind::daemon
