#include "plan_workers.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>

namespace gpubind::daemon {
namespace {

using namespace std::chrono_literals;

// One user's slow requests hold at most running_per_uid workers: another user's request runs at
// once, however many the first has queued.
TEST(PlanWorkers, AnotherUserIsServedWhileOneUserFloods) {
  PlanWorkers workers({.threads = 4, .running_per_uid = 2, .queued_per_uid = 64});
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::atomic<int> flood_running{0}, flood_peak{0};
  for (int i = 0; i < 32; ++i) {
    ASSERT_TRUE(workers.submit(1000, [&] {
      const int now = ++flood_running;
      int peak = flood_peak;
      while (now > peak && !flood_peak.compare_exchange_weak(peak, now)) {
      }
      released.wait();
      --flood_running;
    }));
  }
  std::promise<void> served;
  ASSERT_TRUE(workers.submit(2000, [&] { served.set_value(); }));
  EXPECT_EQ(served.get_future().wait_for(5s), std::future_status::ready);
  EXPECT_LE(flood_peak.load(), 2);
  release.set_value();
  workers.stop();
}

TEST(PlanWorkers, RefusesPastAUsersQueueLimit) {
  PlanWorkers workers({.threads = 1, .running_per_uid = 1, .queued_per_uid = 2});
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::promise<void> started;
  ASSERT_TRUE(workers.submit(7, [&] {
    started.set_value();
    released.wait();
  }));
  started.get_future().wait();
  EXPECT_TRUE(workers.submit(7, [] {}));
  EXPECT_TRUE(workers.submit(7, [] {}));
  EXPECT_FALSE(workers.submit(7, [] {})) << "a third waiting job of one user";
  EXPECT_TRUE(workers.submit(8, [] {})) << "another user still queues";
  release.set_value();
  workers.stop();
}

}  // namespace
}  // namespace gpubind::daemon
