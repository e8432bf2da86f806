// Answers to identical Plan requests, so every asker of one step shape gets the same plan.
// Keyed by the state generation and the request minus its job/step ids; least recently used out.
// Bounded by bytes, not entries: one 4096-task answer weighs as much as a thousand small ones,
// and a user sending distinct large requests must not grow the daemon without limit.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "gpubind/v1/binder.pb.h"

namespace gpubind::daemon {

class PlanCache {
 public:
  // A serialized gpubind.v1.PlanResponse, shared by every reader of the entry.
  using Entry = std::shared_ptr<const std::string>;

  // `budget_bytes` holds keys, answers and bookkeeping together; an entry larger than a quarter
  // of it is not kept (it would evict everything else).
  explicit PlanCache(size_t budget_bytes) : budget_(budget_bytes) {}

  static std::string key_of(uint64_t generation, const v1::PlanRequest& request);

  Entry find(const std::string& key);
  void insert(const std::string& key, Entry entry);
  size_t size() const;
  size_t bytes() const;

 private:
  using Order = std::list<std::string>;
  struct Slot {
    Entry entry;
    Order::iterator position;
    size_t cost = 0;
  };
  static size_t cost_of(const std::string& key, const std::string& answer);
  void evict_to(size_t budget);  // mutex held

  const size_t budget_;
  mutable std::mutex mutex_;
  Order order_;  // most recent first
  std::unordered_map<std::string, Slot> entries_;
  size_t bytes_ = 0;
};

}  // namespace gpubind::daemon
