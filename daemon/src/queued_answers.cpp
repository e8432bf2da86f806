#include "gpubind/daemon/queued_answers.h"

#include <algorithm>

namespace gpubind::daemon {

size_t QueuedAnswers::bytes_of(const Buffer& buffer) {
  return buffer->capacity();
}

size_t QueuedAnswers::added_by(uid_t uid, const Buffer& buffer) const {
  if (!buffer) return 0;
  const auto user = users_.find(uid);
  if (user != users_.end() && user->second.holders.count(buffer.get()) != 0) return 0;
  return bytes_of(buffer);
}

void QueuedAnswers::hold(uid_t uid, const Buffer& buffer) {
  if (!buffer) return;
  Share& share = users_[uid];
  if (share.holders[buffer.get()]++ == 0) {
    share.bytes += bytes_of(buffer);
    total_ += bytes_of(buffer);
  }
}

void QueuedAnswers::release(uid_t uid, const Buffer& buffer) {
  if (!buffer) return;
  const auto user = users_.find(uid);
  if (user == users_.end()) return;
  Share& share = user->second;
  const auto held = share.holders.find(buffer.get());
  if (held == share.holders.end()) return;
  if (--held->second == 0) {
    share.holders.erase(held);
    share.bytes -= bytes_of(buffer);
    total_ -= bytes_of(buffer);
  }
  if (share.holders.empty()) users_.erase(user);
}

size_t QueuedAnswers::of(uid_t uid) const {
  const auto user = users_.find(uid);
  return user == users_.end() ? 0 : user->second.bytes;
}

std::optional<uid_t> QueuedAnswers::largest() const {
  const auto most = std::max_element(
      users_.begin(), users_.end(),
      [](const auto& a, const auto& b) { return a.second.bytes < b.second.bytes; });
  if (most == users_.end()) return std::nullopt;
  return most->first;
}

}  // namespace gpubind::daemon
