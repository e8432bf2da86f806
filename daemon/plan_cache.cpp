#include "plan_cache.h"

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

PlanCache::Entry PlanCache::find(const std::string& key) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = entries_.find(key);
  if (it == entries_.end()) return nullptr;
  order_.splice(order_.begin(), order_, it->second.second);
  return it->second.first;
}

void PlanCache::insert(const std::string& key, Entry entry) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = entries_.find(key);
  if (it != entries_.end()) {
    it->second.first = std::move(entry);
    order_.splice(order_.begin(), order_, it->second.second);
    return;
  }
  order_.push_front(key);
  entries_.emplace(key, std::make_pair(std::move(entry), order_.begin()));
  while (entries_.size() > capacity_) {
    entries_.erase(order_.back());
    order_.pop_back();
  }
}

size_t PlanCache::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return entries_.size();
}

}  // namespace gpubind::daemon
