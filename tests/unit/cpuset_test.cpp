#include "gpubind/cpuset.h"

#include <gtest/gtest.h>

namespace gpubind {
namespace {

TEST(CpuSet, ParsesListsWithRangesAndSpaces) {
  auto set = CpuSet::parse_list(" 0-3, 8,10-11 ");
  ASSERT_TRUE(set) << set.error().message;
  EXPECT_EQ(set->to_vector(), (std::vector<int>{0, 1, 2, 3, 8, 10, 11}));
  EXPECT_EQ(set->to_list(), "0-3,8,10-11");
}

// A refusal quotes enough of its input to find the fault, never all of a hostile 64 KiB.
TEST(CpuSet, ErrorsQuoteLongInputsInPart) {
  const std::string hostile = std::string(65536, '7') + "x";
  auto refused = CpuSet::parse_list(hostile);
  ASSERT_FALSE(refused);
  EXPECT_LT(refused.error().message.size(), 300u) << refused.error().message.substr(0, 400);
  EXPECT_NE(refused.error().message.find("(65537 bytes)"), std::string::npos);
  auto short_one = CpuSet::parse_list("0-x");
  ASSERT_FALSE(short_one);
  EXPECT_EQ(short_one.error().message, "invalid cpu list '0-x': 'x' is not a CPU number");
}

TEST(CpuSet, EmptyListIsEmptySet) {
  auto set = CpuSet::parse_list("");
  ASSERT_TRUE(set);
  EXPECT_TRUE(set->empty());
  EXPECT_EQ(set->to_list(), "");
  EXPECT_EQ(set->to_mask(), "0x0");
}

TEST(CpuSet, RejectsMalformedListsNamingTheFault) {
  struct Case {
    const char* text;
    const char* fault;
  };
  for (const Case& c :
       {Case{"1-", "'' is not a CPU number"}, Case{"a", "'a' is not a CPU number"},
        Case{"3-1", "runs backwards"}, Case{"1,,2", "empty item"}, Case{"70000", "out of range"},
        Case{"-1", "'' is not a CPU number"}, Case{"1.5", "'1.5' is not a CPU number"}}) {
    auto set = CpuSet::parse_list(c.text);
    ASSERT_FALSE(set) << c.text;
    EXPECT_NE(set.error().message.find(c.fault), std::string::npos) << set.error().message;
    EXPECT_NE(set.error().message.find(c.text), std::string::npos) << set.error().message;
  }
}

TEST(CpuSet, ParsesSlurmAndLinuxMasks) {
  auto slurm = CpuSet::parse_mask("0xfe000000000000");
  ASSERT_TRUE(slurm);
  EXPECT_EQ(slurm->to_list(), "49-55");
  auto linux_style = CpuSet::parse_mask("ff,ffffffff");
  ASSERT_TRUE(linux_style);
  EXPECT_EQ(linux_style->to_list(), "0-39");
  auto upper = CpuSet::parse_mask("0XFE");
  ASSERT_TRUE(upper);
  EXPECT_EQ(upper->to_list(), "1-7");
}

TEST(CpuSet, RejectsMalformedMasks) {
  for (const char* text : {"0x", "0xfg", "1,ff", "", "0x12,,00000000"}) {
    EXPECT_FALSE(CpuSet::parse_mask(text)) << text;
  }
}

TEST(CpuSet, MaskRoundTripsBeyond64Cpus) {
  const CpuSet set = CpuSet::of({0, 63, 64, 127, 200});
  auto back = CpuSet::parse_mask(set.to_mask());
  ASSERT_TRUE(back);
  EXPECT_EQ(*back, set);
  EXPECT_EQ(CpuSet::range(49, 55).to_mask(), "0xfe000000000000");
}

TEST(CpuSet, SetAlgebra) {
  const CpuSet a = CpuSet::range(0, 7), b = CpuSet::range(4, 11);
  EXPECT_EQ((a & b).to_list(), "4-7");
  EXPECT_EQ((a | b).to_list(), "0-11");
  EXPECT_EQ(a.minus(b).to_list(), "0-3");
  EXPECT_TRUE(a.intersects(b));
  EXPECT_FALSE(a.intersects(CpuSet::range(100, 101)));
  EXPECT_TRUE(CpuSet::range(1, 2).is_subset_of(a));
  EXPECT_FALSE(b.is_subset_of(a));
  EXPECT_EQ(b.first(), 4);
  EXPECT_EQ(b.last(), 11);
  EXPECT_EQ(b.count(), 8);
  // Emptied sets compare equal to fresh ones (no trailing zero words).
  EXPECT_EQ(CpuSet::range(100, 130).minus(CpuSet::range(100, 130)), CpuSet());
  CpuSet c = CpuSet::of({3, 200});
  c.reset(200);
  EXPECT_EQ(c, CpuSet::of({3}));
}

TEST(CpuSet, FormatsIntegerLists) {
  EXPECT_EQ(format_int_list({5, 0, 1, 2, 7, 8, 2}), "0-2,5,7-8");
  EXPECT_EQ(format_int_list({}), "");
}

// Ranges are filled a word at a time; every boundary must land where setting one CPU at a time
// would put it.
TEST(CpuSet, RangesMatchSettingEachCpu) {
  const int edges[] = {0, 1, 62, 63, 64, 65, 127, 128, 129, 255, 256, 300, 1023, 1024, 65535};
  for (int first : edges) {
    for (int last : edges) {
      if (last < first) continue;
      CpuSet expected;
      for (int cpu = first; cpu <= last; ++cpu)
        expected.set(cpu);
      EXPECT_EQ(CpuSet::range(first, last), expected) << first << "-" << last;
      auto parsed = CpuSet::parse_list("5," + std::to_string(first) + "-" + std::to_string(last));
      ASSERT_TRUE(parsed.ok());
      expected.set(5);
      EXPECT_EQ(*parsed, expected) << first << "-" << last;
    }
  }
  CpuSet clipped;
  clipped.set_range(-3, 2);
  EXPECT_EQ(clipped, CpuSet::range(0, 2));
  clipped.set_range(65530, 70000);
  EXPECT_EQ(clipped.last(), CpuSet::kMaxCpu);
}

// The planner writes CPU lists straight after other text (a variable's name, an earlier value).
TEST(CpuSet, AppendsItsListToText) {
  std::string text = "CPUS=";
  CpuSet::of({0, 1, 2, 5, 7, 8}).append_list(text);
  EXPECT_EQ(text, "CPUS=0-2,5,7-8") << "no comma before the first range, however long the text";
  CpuSet().append_list(text);
  EXPECT_EQ(text, "CPUS=0-2,5,7-8") << "the empty set adds nothing";
  EXPECT_EQ(CpuSet::of({3}).to_list(), "3");
}

TEST(CpuSet, CountsEveryBitOfEveryWord) {
  // Words of all bits, alternate bits, single high bits, across inline and heap storage.
  CpuSet set;
  int expected = 0;
  for (int cpu = 0; cpu < 1024; ++cpu) {
    const bool on = cpu < 64 || (cpu >= 128 && cpu < 256 && cpu % 2 == 0) || cpu % 64 == 63;
    if (on) {
      set.set(cpu);
      ++expected;
    }
    ASSERT_EQ(set.count(), expected) << "after CPU " << cpu;
  }
  EXPECT_EQ(CpuSet::range(0, 4095).count(), 4096);
  EXPECT_EQ(CpuSet().count(), 0);
}

}  // namespace
}  // namespace gpubind

#include "gpubind/affinity.h"

namespace gpubind {
namespace {

// The calling thread's CPUs read, set and read again unchanged, through masks sized to fit
// (past 1024 CPUs a fixed cpu_set_t would fail); a mask holds CPUs past 1024.
TEST(Affinity, RoundTripsThroughMasksOfAnySize) {
  const CpuSet before = current_affinity();
  ASSERT_FALSE(before.empty());
  ASSERT_TRUE(set_affinity(before));
  EXPECT_EQ(current_affinity(), before);
  AffinityMask big(1152);
  ASSERT_TRUE(big.valid());
  big.set(1151);
  EXPECT_TRUE(big.test(1151));
  EXPECT_FALSE(big.test(1150));
  EXPECT_GE(big.bytes() * 8, 1152u);
  EXPECT_FALSE(set_affinity(CpuSet()));
}

}  // namespace
}  // namespace gpubind
