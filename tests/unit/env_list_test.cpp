#include "gpubind/env_list.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "gpubind/env.h"

namespace gpubind {
namespace {

std::vector<std::string> texts(const EnvList& env) {
  std::vector<std::string> out;
  for (const EnvList::Var var : env)
    out.push_back(std::string(var.name) + "=" + std::string(var.value) +
                  (var.only_if_unset ? " (if unset)" : ""));
  return out;
}

TEST(EnvList, KeepsVariablesInOrderWithTheirFlags) {
  EnvList env;
  env.add("CUDA_VISIBLE_DEVICES", "0,1");
  env.add("OMP_NUM_THREADS", "7", true);
  env.add("EMPTY", "");
  env.add(std::string(300, 'N'), std::string(70000, 'v'));  // lengths past one byte and 64 KiB
  ASSERT_EQ(env.size(), 4u);
  EXPECT_EQ(texts(env)[0], "CUDA_VISIBLE_DEVICES=0,1");
  EXPECT_EQ(texts(env)[1], "OMP_NUM_THREADS=7 (if unset)");
  EXPECT_EQ(texts(env)[2], "EMPTY=");
  EXPECT_EQ(env[3].name.size(), 300u);
  EXPECT_EQ(env[3].value.size(), 70000u);
  EXPECT_TRUE(env[4].name.empty()) << "past the end";
  EXPECT_EQ(env.value_of("OMP_NUM_THREADS"), "7");
  EXPECT_EQ(env.value_of("EMPTY"), "");
  EXPECT_EQ(env.value_of("UNSET"), std::nullopt);
}

TEST(EnvList, AWriteThatFailsAddsNothing) {
  EnvList env{{"A", "1", false}};
  const size_t bytes = env.bytes();
  EXPECT_FALSE(env.add_written("B", false, [](EnvList::ValueWriter& out) {
    out += "partly written";
    return false;
  }));
  EXPECT_EQ(env.size(), 1u);
  EXPECT_EQ(env.bytes(), bytes);
  EXPECT_TRUE(env.add_written("C", true, [](EnvList::ValueWriter& out) {
    out += "3";
    return true;
  }));
  EXPECT_EQ(texts(env), (std::vector<std::string>{"A=1", "C=3 (if unset)"}));
}

TEST(EnvList, RendersTemplatesInPlace) {
  PlaceholderValues values;
  values[static_cast<size_t>(Placeholder::kNicRdma)] = "mlx5_0";
  FixedPlaceholders source(values);
  const CompiledTemplate ucx("{nic_rdma}:1"), netdev("{nic_netdev}");
  EnvList env;
  env.add_written("UCX_NET_DEVICES", true,
                  [&](EnvList::ValueWriter& out) { return ucx.render_to(source, out); });
  env.add_written("NCCL_SOCKET_IFNAME", true,
                  [&](EnvList::ValueWriter& out) { return netdev.render_to(source, out); });
  EXPECT_EQ(texts(env), (std::vector<std::string>{"UCX_NET_DEVICES=mlx5_0:1 (if unset)"}));
}

TEST(EnvList, CopiesAndComparesByContent) {
  EnvList a{{"X", "1", false}, {"Y", "2", true}};
  const EnvList b = a;
  EXPECT_EQ(a, b);
  a.clear();
  EXPECT_TRUE(a.empty());
  EXPECT_EQ(texts(b), (std::vector<std::string>{"X=1", "Y=2 (if unset)"}))
      << "the copy owns its text";
  a.add("X", "1");
  a.add("Y", "2", false);
  EXPECT_NE(a, b) << "the flag counts";
}

TEST(EnvList, MovesAndAssignsWithoutLosingOrSharingText) {
  EnvList a{{"X", "1", false}};
  EnvList b = std::move(a);
  EXPECT_EQ(texts(b), std::vector<std::string>{"X=1"});
  EXPECT_TRUE(a.empty()) << "a moved-from list is empty";  // NOLINT(bugprone-use-after-move)
  a.add("Y", "2");                                         // and usable
  EXPECT_EQ(texts(a), std::vector<std::string>{"Y=2"});
  b = std::move(a);
  EXPECT_EQ(texts(b), std::vector<std::string>{"Y=2"});
  auto& self = b;
  b = self;
  b = std::move(self);
  EXPECT_EQ(texts(b), std::vector<std::string>{"Y=2"}) << "self-assignment keeps the text";
}

TEST(EnvList, AReusedBufferStartsEmpty) {
  // Freed buffers are kept for the next lists: a new list must not see an old one's variables.
  for (int round = 0; round < 3; ++round) {
    std::vector<EnvList> lists(100);
    for (size_t i = 0; i < lists.size(); ++i) {
      EXPECT_TRUE(lists[i].empty());
      EXPECT_EQ(lists[i].begin(), lists[i].end());
      lists[i].reserve(300);
      lists[i].add("RANK", std::to_string(i + 1000 * round));
    }
    for (size_t i = 0; i < lists.size(); ++i)
      EXPECT_EQ(texts(lists[i]),
                std::vector<std::string>{"RANK=" + std::to_string(i + 1000 * round)});
  }
}

TEST(EnvList, ListsMayBeFreedOnAnotherThread) {
  std::vector<EnvList> lists(200);
  for (size_t i = 0; i < lists.size(); ++i)
    lists[i].add("RANK", std::to_string(i), i % 2 == 0);
  std::thread([moved = std::move(lists)]() mutable {
    for (size_t i = 0; i < moved.size(); ++i)
      ASSERT_EQ(moved[i].value_of("RANK"), std::to_string(i));
    moved.clear();  // the buffers go to this thread's pool, then to the heap when it ends
    EnvList again{{"AFTER", "1", false}};
    EXPECT_EQ(texts(again), std::vector<std::string>{"AFTER=1"});
  }).join();
  EnvList here{{"HERE", "1", false}};
  EXPECT_EQ(texts(here), std::vector<std::string>{"HERE=1"});
}

// Freed when the program ends, after the main thread's pool of buffers is gone.
EnvList& static_list() {
  static EnvList list{{"STATIC", "1", false}};
  return list;
}

TEST(EnvList, ListsMayOutliveTheirThreadsPool) {
  std::thread([] {
    // A thread_local list is destroyed among the thread's pool, in either order.
    thread_local EnvList late{{"LATE", "1", false}};
    EXPECT_EQ(texts(late), std::vector<std::string>{"LATE=1"});
    EnvList early{{"EARLY", "1", false}};
  }).join();
  EXPECT_EQ(texts(static_list()), std::vector<std::string>{"STATIC=1"});
}

TEST(EnvList, AWriteThatThrowsLeavesTheListAsItWas) {
  EnvList env{{"A", "1", false}};
  const EnvList before = env;
  EXPECT_THROW(env.add_written("B", false,
                               [](EnvList::ValueWriter& out) -> bool {
                                 out += std::string(5000, 'x');  // grows the buffer first
                                 throw std::runtime_error("no value");
                               }),
               std::runtime_error);
  EXPECT_EQ(env, before);
  env.add("C", "3");
  EXPECT_EQ(texts(env), (std::vector<std::string>{"A=1", "C=3"}));
}

}  // namespace
}  // namespace gpubind
