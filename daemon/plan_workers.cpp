#include "plan_workers.h"

namespace gpubind::daemon {

PlanWorkers::PlanWorkers(Limits limits) : limits_(limits) {
  for (int i = 0; i < limits_.threads; ++i)
    threads_.emplace_back([this] { run(); });
}

bool PlanWorkers::submit(uid_t uid, Job job) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_) return false;
    Queue& queue = queues_[uid];
    if (queue.jobs.size() >= limits_.queued_per_uid) return false;
    queue.jobs.push_back(std::move(job));
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

// The first uid in turn that may run another job takes it and goes to the back of the line.
bool PlanWorkers::next(uid_t& uid, Job& job) {
  for (auto it = turns_.begin(); it != turns_.end(); ++it) {
    Queue& queue = queues_[*it];
    if (queue.running >= limits_.running_per_uid) continue;
    uid = *it;
    turns_.erase(it);
    job = std::move(queue.jobs.front());
    queue.jobs.pop_front();
    ++queue.running;
    if (queue.jobs.empty()) {
      queue.in_turn = false;
    } else {
      turns_.push_back(uid);
    }
    return true;
  }
  return false;
}

void PlanWorkers::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    uid_t uid = 0;
    Job job;
    ready_.wait(lock, [&] { return stopping_ || next(uid, job); });
    if (stopping_) return;
    lock.unlock();
    job();
    job = nullptr;  // whatever it holds is freed outside the lock
    lock.lock();
    Queue& queue = queues_[uid];
    --queue.running;
    if (queue.jobs.empty() && queue.running == 0 && !queue.in_turn) {
      queues_.erase(uid);
    } else if (!queue.jobs.empty()) {
      ready_.notify_one();  // it may run again now
    }
  }
}

}  // namespace gpubind::daemon
