#include "gpubind/daemon/queued_answers.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

namespace gpubind::daemon {
namespace {

QueuedAnswers::Buffer buffer_of(size_t size) {
  return std::make_shared<const std::string>(size, 'x');
}

// 64 connections of one user on one cached answer cost that user its size once: what it costs
// the daemon.
TEST(QueuedAnswers, ABufferSharedByOneUsersConnectionsCountsOnce) {
  QueuedAnswers queued;
  const auto answer = buffer_of(4 << 20);
  const size_t weight = answer->capacity();
  EXPECT_EQ(queued.added_by(5001, answer), weight);
  for (int i = 0; i < 64; ++i)
    queued.hold(5001, answer);
  EXPECT_EQ(queued.of(5001), weight);
  EXPECT_EQ(queued.total(), weight);
  EXPECT_EQ(queued.added_by(5001, answer), 0u) << "the user holds it already";
  EXPECT_EQ(queued.added_by(5002, answer), weight) << "another user pays for it again";
  for (int i = 0; i < 63; ++i)
    queued.release(5001, answer);
  EXPECT_EQ(queued.of(5001), weight) << "one connection still holds it";
  queued.release(5001, answer);
  EXPECT_EQ(queued.of(5001), 0u);
  EXPECT_EQ(queued.total(), 0u);
  EXPECT_FALSE(queued.largest());
}

TEST(QueuedAnswers, DistinctBuffersAddUpPerUserAndInAll) {
  QueuedAnswers queued;
  const auto small = buffer_of(1000), large = buffer_of(3 << 20), other = buffer_of(1 << 20);
  queued.hold(5001, small);
  queued.hold(5001, large);
  queued.hold(5002, other);
  queued.hold(5002, large);
  EXPECT_EQ(queued.of(5001), small->capacity() + large->capacity());
  EXPECT_EQ(queued.of(5002), other->capacity() + large->capacity());
  EXPECT_EQ(queued.total(), queued.of(5001) + queued.of(5002));
  ASSERT_TRUE(queued.largest());
  EXPECT_EQ(*queued.largest(), 5002u);
  queued.release(5002, large);
  queued.release(5002, other);
  EXPECT_EQ(*queued.largest(), 5001u);
  EXPECT_EQ(queued.total(), queued.of(5001));
}

}  // namespace
}  // namespace gpubind::daemon
