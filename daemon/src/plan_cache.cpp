#include "gpubind/daemon/plan_cache.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

namespace gpubind::daemon {

std::string PlanCache::key_of(uint64_t generation, const v1::PlanRequest& request) {
  v1::PlanRequest shape = request;
  shape.clear_job_id();
  shape.clear_step_id();
  shape.clear_bypass_cache();
  std::string key = std::to_string(generation) + ":";
  {
    google::protobuf::io::StringOutputStream stream(&key);
    google::protobuf::io::CodedOutputStream out(&stream);
    out.SetSerializationDeterministic(true);
    shape.SerializeToCodedStream(&out);
  }
  return key;
}

size_t PlanCache::cost_of(const std::string& key, const std::string& answer) {
  // The key is held twice (map and order list); nodes, control blocks and allocator slack.
  constexpr size_t kBookkeeping = 256;
  return 2 * key.size() + answer.size() + kBookkeeping;
}

PlanCache::Entry PlanCache::find(const std::string& key) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = entries_.find(key);
  if (it == entries_.end()) return nullptr;
  order_.splice(order_.begin(), order_, it->second.position);
  return it->second.entry;
}

void PlanCache::insert(const std::string& key, Entry entry) {
  if (!entry) return;
  const size_t cost = cost_of(key, *entry);
  if (cost > budget_ / 4) return;
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = entries_.find(key);
  if (it != entries_.end()) {
    bytes_ -= it->second.cost;
    order_.erase(it->second.position);
    entries_.erase(it);
  }
  evict_to(budget_ - cost);
  order_.push_front(key);
  entries_.emplace(key, Slot{std::move(entry), order_.begin(), cost});
  bytes_ += cost;
}

void PlanCache::evict_to(size_t budget) {
  while (bytes_ > budget && !order_.empty()) {
    auto it = entries_.find(order_.back());
    bytes_ -= it->second.cost;
    entries_.erase(it);
    order_.pop_back();
  }
}

size_t PlanCache::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return entries_.size();
}

size_t PlanCache::bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return bytes_;
}

}  // namespace gpubind::daemon
