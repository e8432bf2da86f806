#include "gpubind/daemon/plan_workers.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

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

// Large plans (tens of megabytes each while they are made) run one at a time, whoever sent them,
// while small ones of every user go on beside them; the large ones all run in the end.
TEST(PlanWorkers, LargeJobsRunOneAtATimeBesideSmallOnes) {
  PlanWorkers workers(
      {.threads = 4, .running_per_uid = 2, .queued_per_uid = 64, .large_at_once = 1});
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::atomic<int> large_running{0}, large_peak{0}, large_done{0};
  auto large = [&] {
    const int now = ++large_running;
    int peak = large_peak;
    while (now > peak && !large_peak.compare_exchange_weak(peak, now)) {
    }
    released.wait();
    --large_running;
    ++large_done;
  };
  for (uid_t uid : {1000u, 1001u}) {
    for (int i = 0; i < 3; ++i)
      ASSERT_TRUE(workers.submit(uid, large, PlanWorkers::Lane::kLarge));
  }
  std::promise<void> served;
  ASSERT_TRUE(workers.submit(2000, [&] { served.set_value(); }));
  EXPECT_EQ(served.get_future().wait_for(5s), std::future_status::ready);
  EXPECT_EQ(large_peak.load(), 1);
  release.set_value();
  for (int i = 0; i < 500 && large_done < 6; ++i)
    std::this_thread::sleep_for(10ms);
  EXPECT_EQ(large_done.load(), 6);
  EXPECT_EQ(large_peak.load(), 1);
  workers.stop();
}

// A small launch has a worker of its own: however many users keep the others busy with normal
// and large work, it is planned at once.
TEST(PlanWorkers, SmallJobsAreNeverQueuedBehindOtherUsersWork) {
  using Lane = PlanWorkers::Lane;
  PlanWorkers workers({.threads = 4, .small_only = 1, .running_per_uid = 2, .queued_per_uid = 64});
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::atomic<int> busy{0};
  auto hold = [&] {
    ++busy;
    released.wait();
  };
  for (uid_t uid = 1000; uid < 1020; ++uid) {
    ASSERT_TRUE(workers.submit(uid, hold, Lane::kNormal));
    ASSERT_TRUE(workers.submit(uid, hold, Lane::kLarge));
  }
  for (int i = 0; i < 500 && busy < 3; ++i)
    std::this_thread::sleep_for(1ms);
  EXPECT_EQ(busy.load(), 3) << "every worker but the small launches' is held";
  std::promise<void> served;
  ASSERT_TRUE(workers.submit(
      2000, [&] { served.set_value(); }, Lane::kSmall));
  EXPECT_EQ(served.get_future().wait_for(5s), std::future_status::ready);
  EXPECT_EQ(busy.load(), 3) << "the small worker took none of the others' work";
  release.set_value();
  workers.stop();
}

// The daemon's own probe (its watchdog) runs before any user's waiting work.
TEST(PlanWorkers, TheDaemonsOwnJobGoesBeforeEveryUsersQueue) {
  using Lane = PlanWorkers::Lane;
  PlanWorkers workers({.threads = 1, .running_per_uid = 1, .queued_per_uid = 64});
  std::promise<void> release, started;
  std::shared_future<void> released = release.get_future().share();
  ASSERT_TRUE(workers.submit(1000, [&] {
    started.set_value();
    released.wait();
  }));
  started.get_future().wait();
  std::mutex order_mutex;
  std::vector<int> order;
  auto mark = [&](int who) {
    return [&, who] {
      std::lock_guard<std::mutex> lock(order_mutex);
      order.push_back(who);
    };
  };
  for (uid_t uid = 1001; uid < 1011; ++uid)
    ASSERT_TRUE(workers.submit(uid, mark(static_cast<int>(uid)), Lane::kSmall));
  ASSERT_TRUE(workers.submit(0, mark(0), Lane::kOwn));
  release.set_value();
  for (int i = 0; i < 500; ++i) {
    {
      std::lock_guard<std::mutex> lock(order_mutex);
      if (order.size() == 11) break;
    }
    std::this_thread::sleep_for(1ms);
  }
  workers.stop();
  ASSERT_EQ(order.size(), 11u);
  EXPECT_EQ(order.front(), 0) << "the probe came after users' work";
}

// A job whose sender has gone is dropped while it waits, and frees its place in the user's queue;
// one already running is not stopped.
TEST(PlanWorkers, ACancelledJobNeverRuns) {
  PlanWorkers workers({.threads = 1, .running_per_uid = 1, .queued_per_uid = 1});
  std::promise<void> release, started;
  std::shared_future<void> released = release.get_future().share();
  const auto running = workers.submit(7, [&] {
    started.set_value();
    released.wait();
  });
  ASSERT_TRUE(running);
  started.get_future().wait();
  std::atomic<bool> ran{false};
  const auto waiting = workers.submit(8, [&] { ran = true; });
  ASSERT_TRUE(waiting);
  EXPECT_FALSE(workers.submit(8, [] {})) << "user 8's queue is full";
  EXPECT_TRUE(workers.cancel(8, *waiting));
  EXPECT_FALSE(workers.cancel(8, *waiting)) << "dropped once";
  EXPECT_FALSE(workers.cancel(7, *running)) << "a running job runs on";
  std::promise<void> next;
  EXPECT_TRUE(workers.submit(8, [&] { next.set_value(); })) << "its place is free again";
  release.set_value();
  EXPECT_EQ(next.get_future().wait_for(5s), std::future_status::ready);
  workers.stop();
  EXPECT_FALSE(ran);
}

// The daemon gives a burst's free memory back once its planners idle: never before any job, never
// while one runs, once per idle spell.
TEST(PlanWorkers, RunsTheIdleHookOnceAfterEachBurst) {
  std::atomic<int> idle_runs{0};
  std::atomic<bool> job_running{false}, ran_during_job{false};
  PlanWorkers workers(
      {.threads = 2, .running_per_uid = 1, .queued_per_uid = 8},
      [&] {
        if (job_running) ran_during_job = true;
        ++idle_runs;
      },
      20ms);
  auto wait_for_runs = [&](int runs) {
    for (int i = 0; i < 1000 && idle_runs < runs; ++i)
      std::this_thread::sleep_for(10ms);
    return idle_runs.load();
  };
  std::this_thread::sleep_for(100ms);
  EXPECT_EQ(idle_runs, 0) << "no job yet: nothing to give back";

  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  ASSERT_TRUE(workers.submit(5, [&] {
    job_running = true;
    released.wait();
    job_running = false;
  }));
  std::this_thread::sleep_for(100ms);
  EXPECT_EQ(idle_runs, 0) << "a job is still running";
  release.set_value();
  EXPECT_EQ(wait_for_runs(1), 1);
  std::this_thread::sleep_for(100ms);
  EXPECT_EQ(idle_runs, 1) << "once per idle spell";

  ASSERT_TRUE(workers.submit(5, [] {}));
  EXPECT_EQ(wait_for_runs(2), 2) << "and again after the next burst";
  EXPECT_FALSE(ran_during_job);
  workers.stop();
}

}  // namespace
}  // namespace gpubind::daemon
