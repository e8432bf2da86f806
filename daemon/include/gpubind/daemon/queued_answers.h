// The bytes of compact answers that wait in the daemon for their clients to read them, per user
// (SO_PEERCRED uid) and in all. An answer is a buffer shared with the cache and with every
// connection sending it, so a user pays for each distinct buffer once, however many of their
// connections send it: 64 connections of one user left unread on one cached answer cost that user
// its size once, as they cost the daemon. A buffer weighs what it holds allocated (the answer's
// writer reserves ahead). The total is the sum of the users' shares (a buffer two users hold
// counts twice: the bound errs on the safe side). Used by the router's thread only.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <optional>
#include <string>
#include <unordered_map>

#include "gpubind/daemon/plan_cache.h"

namespace gpubind::daemon {

class QueuedAnswers {
 public:
  using Buffer = PlanCache::Entry;

  // What one more connection of `uid` sending `buffer` adds to that user's share (and to the
  // total): its size, or nothing when the user already holds it.
  size_t added_by(uid_t uid, const Buffer& buffer) const;
  void hold(uid_t uid, const Buffer& buffer);
  // Each hold() is released once, when its connection has sent the answer or is closed.
  void release(uid_t uid, const Buffer& buffer);

  size_t of(uid_t uid) const;
  size_t total() const { return total_; }
  // The user whose share is largest; none when nothing waits.
  std::optional<uid_t> largest() const;

 private:
  static size_t bytes_of(const Buffer& buffer);
  struct Share {
    std::unordered_map<const std::string*, size_t> holders;  // connections per buffer
    size_t bytes = 0;
  };
  std::unordered_map<uid_t, Share> users_;
  size_t total_ = 0;
};

}  // namespace gpubind::daemon
