// Answers to identical Plan requests, so every asker of one step shape gets the same plan.
// Keyed by the state generation and the request minus its job/step ids; least recently used out.
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
  using Entry = std::shared_ptr<const v1::PlanResponse>;

  explicit PlanCache(size_t capacity) : capacity_(capacity) {}

  static std::string key_of(uint64_t generation, const v1::PlanRequest& request);

  Entry find(const std::string& key);
  void insert(const std::string& key, Entry entry);
  size_t size() const;

 private:
  using Order = std::list<std::string>;
  size_t capacity_;
  mutable std::mutex mutex_;
  Order order_;  // most recent first
  std::unordered_map<std::string, std::pair<Entry, Order::iterator>> entries_;
};

}  // namespace gpubind::daemon
