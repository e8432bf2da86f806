#include "plan_arena.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <numeric>
#include <thread>

namespace gpubind {
namespace {

#define SKIP_WITHOUT_ARENA() \
  if (!kScratchInArena) GTEST_SKIP() << "AddressSanitizer builds keep scratch on the heap"

bool aligned(const void* p) {
  return reinterpret_cast<std::uintptr_t>(p) % alignof(std::max_align_t) == 0;
}

TEST(PlanArena, ScratchVectorsTakeTheCurrentArenasMemory) {
  SKIP_WITHOUT_ARENA();
  Scratch<int> before(8, 1);  // no arena yet: the heap's
  PlanArena arena;
  EXPECT_EQ(PlanArena::current(), &arena);
  Scratch<int> small(8, 2);
  Scratch<Scratch<int>> nested(3, Scratch<int>(5, 3));
  EXPECT_TRUE(arena.holds(small.data()));
  EXPECT_TRUE(arena.holds(nested.data()));
  EXPECT_TRUE(arena.holds(nested[2].data()));
  EXPECT_FALSE(arena.holds(before.data()));
  EXPECT_TRUE(aligned(small.data()));
  EXPECT_EQ(nested[2][4], 3);
  // A heap vector grown while the arena is current moves into it; its heap block is freed
  // (leak checkers see it).
  before.resize(1000, 4);
  EXPECT_TRUE(arena.holds(before.data()));
  EXPECT_EQ(before[7], 1);
  EXPECT_EQ(before[999], 4);
  Scratch<int>().swap(before);  // it must not outlive the arena it grew in
}

TEST(PlanArena, LargePlansGrowIntoHeapChunks) {
  SKIP_WITHOUT_ARENA();
  PlanArena arena;
  Scratch<int> big;
  for (int i = 0; i < 200000; ++i)  // 800 KB in the end: far past the inline buffer
    big.push_back(i);
  EXPECT_TRUE(arena.holds(big.data()));
  EXPECT_TRUE(aligned(big.data()));
  EXPECT_EQ(std::accumulate(big.begin(), big.end(), 0L), 199999L * 200000 / 2);
  Scratch<char> odd(3);
  Scratch<double> after(4, 1.5);  // aligned after an odd-sized block
  EXPECT_TRUE(aligned(after.data()));
  EXPECT_EQ(after[3], 1.5);
}

TEST(PlanArena, NestedArenasRestoreThePreviousOne) {
  SKIP_WITHOUT_ARENA();
  EXPECT_EQ(PlanArena::current(), nullptr);
  {
    PlanArena outer;
    {
      PlanArena inner;
      EXPECT_EQ(PlanArena::current(), &inner);
      Scratch<int> v(4);
      EXPECT_TRUE(inner.holds(v.data()));
      EXPECT_FALSE(outer.holds(v.data()));
    }
    EXPECT_EQ(PlanArena::current(), &outer);
  }
  EXPECT_EQ(PlanArena::current(), nullptr);
}

TEST(PlanArena, EachThreadHasItsOwn) {
  PlanArena mine;
  const PlanArena* seen = &mine;
  bool held_by_mine = true;
  std::thread other([&] {
    seen = PlanArena::current();
    Scratch<int> v(16);
    held_by_mine = mine.holds(v.data());
  });
  other.join();
  EXPECT_EQ(seen, nullptr);
  EXPECT_FALSE(held_by_mine);
}

}  // namespace
}  // namespace gpubind
