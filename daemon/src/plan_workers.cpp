#include "gpubind/daemon/plan_workers.h"

#include <algorithm>

namespace gpubind::daemon {

namespace {
constexpr uid_t kOwnUid = static_cast<uid_t>(-3);  // the daemon's own jobs: no user's queue
}

PlanWorkers::PlanWorkers(Limits limits, std::function<void()> on_idle,
                         std::chrono::milliseconds idle_after)
    : limits_(limits), on_idle_(std::move(on_idle)), idle_after_(idle_after) {
  for (int i = 0; i < limits_.threads; ++i) {
    // With one thread it takes everything: a small-only pool would never plan the rest.
    const bool small_only = i < limits_.small_only && limits_.threads > limits_.small_only;
    threads_.emplace_back([this, small_only] { run(small_only); });
  }
}

std::optional<PlanWorkers::Ticket> PlanWorkers::submit(uid_t uid, Job job, Lane lane) {
  Ticket ticket = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_) return std::nullopt;
    ticket = ++last_ticket_;
    if (lane == Lane::kOwn) {
      own_.push_back({std::move(job), lane, ticket});
    } else {
      Queue& queue = queues_[uid];
      if (queue.jobs.size() >= limits_.queued_per_uid) return std::nullopt;
      queue.jobs.push_back({std::move(job), lane, ticket});
      if (!queue.in_turn) {
        queue.in_turn = true;
        turns_.push_back(uid);
      }
    }
  }
  // Every worker looks: a small-only one cannot take every job.
  ready_.notify_all();
  return ticket;
}

void PlanWorkers::leave_turns(uid_t uid) {
  turns_.erase(std::remove(turns_.begin(), turns_.end(), uid), turns_.end());
}

bool PlanWorkers::cancel(uid_t uid, Ticket ticket) {
  Job dropped;  // freed outside the lock
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto found = queues_.find(uid);
    if (found == queues_.end()) return false;
    Queue& queue = found->second;
    auto it = std::find_if(queue.jobs.begin(), queue.jobs.end(),
                           [ticket](const Waiting& w) { return w.ticket == ticket; });
    if (it == queue.jobs.end()) return false;
    dropped = std::move(it->job);
    queue.jobs.erase(it);
    if (queue.jobs.empty()) {
      queue.in_turn = false;
      leave_turns(uid);
      if (queue.running == 0) queues_.erase(found);
    }
  }
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
  own_.clear();
}

// The daemon's own job first; else the first uid in turn whose next job this worker may run
// takes it and goes to the back of the line.
bool PlanWorkers::next(bool small_only, uid_t& uid, Waiting& job) {
  if (!own_.empty()) {
    uid = kOwnUid;
    job = std::move(own_.front());
    own_.pop_front();
    return true;
  }
  for (auto it = turns_.begin(); it != turns_.end(); ++it) {
    Queue& queue = queues_[*it];
    const Lane lane = queue.jobs.front().lane;
    if (small_only && lane != Lane::kSmall) continue;
    if (queue.running >= limits_.running_per_uid) continue;
    if (lane == Lane::kLarge && large_running_ >= limits_.large_at_once) continue;
    uid = *it;
    turns_.erase(it);
    job = std::move(queue.jobs.front());
    queue.jobs.pop_front();
    ++queue.running;
    large_running_ += lane == Lane::kLarge;
    if (queue.jobs.empty()) {
      queue.in_turn = false;
    } else {
      turns_.push_back(uid);
    }
    return true;
  }
  return false;
}

bool PlanWorkers::wait_for_job(std::unique_lock<std::mutex>& lock, bool small_only, uid_t& uid,
                               Waiting& job) {
  auto woken = [&] { return stopping_ || next(small_only, uid, job); };
  if (!idle_pending_ || !on_idle_) {
    ready_.wait(lock, woken);
    return true;
  }
  if (ready_.wait_until(lock, idle_at_, woken)) return true;
  idle_pending_ = false;  // this worker runs the hook; the others wait for jobs
  return false;
}

void PlanWorkers::run(bool small_only) {
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    uid_t uid = 0;
    Waiting job;
    if (!wait_for_job(lock, small_only, uid, job)) {
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
    large_running_ -= job.lane == Lane::kLarge;
    if (--running_ == 0 && turns_.empty() && own_.empty()) {
      idle_pending_ = true;
      idle_at_ = std::chrono::steady_clock::now() + idle_after_;
    }
    if (uid != kOwnUid) {
      Queue& queue = queues_[uid];
      --queue.running;
      if (queue.jobs.empty() && queue.running == 0 && !queue.in_turn) queues_.erase(uid);
    }
    // A user's turn or a large job's slot is free again: another worker may take a job too.
    if (!turns_.empty() || !own_.empty()) ready_.notify_all();
  }
}

}  // namespace gpubind::daemon
