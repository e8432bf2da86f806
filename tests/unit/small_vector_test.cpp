#include "gpubind/small_vector.h"

#include <gtest/gtest.h>

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace gpubind {
namespace {

// Strings past the short-string size, so a lost or doubled element shows under the sanitizers.
std::string item(int i) {
  return "element number " + std::to_string(i) + " with room past the inline string";
}

std::vector<std::string> contents(const SmallVector<std::string, 2>& v) {
  return {v.begin(), v.end()};
}

bool inside(const SmallVector<std::string, 2>& v) {
  const auto* self = reinterpret_cast<const char*>(&v);
  const auto* data = reinterpret_cast<const char*>(v.data());
  return data >= self && data < self + sizeof v;
}

TEST(SmallVector, KeepsItsFirstElementsInsideThenMovesToTheHeap) {
  SmallVector<std::string, 2> v;
  EXPECT_TRUE(v.empty());
  v.push_back(item(0));
  v.emplace_back(item(1));
  EXPECT_TRUE(inside(v));
  EXPECT_EQ(v.capacity(), 2u);
  v.push_back(item(2));
  EXPECT_FALSE(inside(v));
  EXPECT_EQ(contents(v), (std::vector<std::string>{item(0), item(1), item(2)}));
  EXPECT_EQ(v.front(), item(0));
  EXPECT_EQ(v.back(), item(2));
  EXPECT_EQ(v.at(1), item(1));
  EXPECT_THROW((void)v.at(3), std::out_of_range);
}

TEST(SmallVector, AppendsACopyOfItsOwnElementWhileGrowing) {
  SmallVector<std::string, 2> v{item(0), item(1)};
  v.push_back(v[0]);  // the source moves with the growth
  v.emplace_back(v[1]);
  EXPECT_EQ(contents(v), (std::vector<std::string>{item(0), item(1), item(0), item(1)}));
}

TEST(SmallVector, CopiesAndMovesInlineAndHeapContents) {
  for (const int n : {1, 2, 5}) {
    SmallVector<std::string, 2> source;
    for (int i = 0; i < n; ++i)
      source.push_back(item(i));
    const std::vector<std::string> expected = contents(source);

    SmallVector<std::string, 2> copy(source);
    EXPECT_EQ(contents(copy), expected);
    EXPECT_EQ(copy, source);

    SmallVector<std::string, 2> moved(std::move(source));
    EXPECT_EQ(contents(moved), expected);
    EXPECT_TRUE(source.empty())
        << "a moved-from vector is empty";  // NOLINT(bugprone-use-after-move)
    source.push_back(item(9));              // and usable
    EXPECT_EQ(contents(source), std::vector<std::string>{item(9)});

    SmallVector<std::string, 2> assigned{item(7), item(8), item(9)};
    assigned = moved;
    EXPECT_EQ(contents(assigned), expected);
    assigned = std::move(moved);
    EXPECT_EQ(contents(assigned), expected);
    auto& self = assigned;
    assigned = self;
    assigned = std::move(self);
    EXPECT_EQ(contents(assigned), expected) << "self-assignment keeps the elements";
  }
}

TEST(SmallVector, ResizesReservesAndClears) {
  SmallVector<std::string, 2> v;
  v.resize(3);
  EXPECT_EQ(contents(v), (std::vector<std::string>{"", "", ""}));
  v[1] = item(1);
  v.resize(2);
  EXPECT_EQ(contents(v), (std::vector<std::string>{"", item(1)}));
  v.reserve(10);
  EXPECT_GE(v.capacity(), 10u);
  EXPECT_EQ(contents(v), (std::vector<std::string>{"", item(1)}));
  v.pop_back();
  EXPECT_EQ(v.size(), 1u);
  v.clear();
  EXPECT_TRUE(v.empty());
  v = {item(4)};
  EXPECT_EQ(contents(v), std::vector<std::string>{item(4)});
}

TEST(SmallVector, DestroysEveryElementOnce) {
  auto counter = std::make_shared<int>(0);
  {
    SmallVector<std::shared_ptr<int>, 1> v;
    for (int i = 0; i < 4; ++i)
      v.push_back(counter);
    SmallVector<std::shared_ptr<int>, 1> copy = v;
    EXPECT_EQ(counter.use_count(), 9);
    copy = std::move(v);
    EXPECT_EQ(counter.use_count(), 5);
  }
  EXPECT_EQ(counter.use_count(), 1);
}

// Copies throw once a shared budget of copies is spent.
struct CopyBudget {
  explicit CopyBudget(int* left) : left(left), text(item(*left)) {}
  CopyBudget(const CopyBudget& other) : left(other.left), text(other.text) {
    if (--*left < 0) throw std::runtime_error("copy refused");
  }
  CopyBudget(CopyBudget&&) noexcept = default;
  CopyBudget& operator=(const CopyBudget&) = default;
  int* left;
  std::string text;
};

TEST(SmallVector, ACopyThatThrowsFreesWhatItBuilt) {
  // The sanitizer build's leak check fails this test if the half-made copy's heap block or its
  // elements are lost.
  int left = 100;
  SmallVector<CopyBudget, 1> source;
  for (int i = 0; i < 4; ++i)
    source.push_back(CopyBudget(&left));
  left = 2;
  EXPECT_THROW((SmallVector<CopyBudget, 1>(source)), std::runtime_error);
  left = 100;
  const SmallVector<CopyBudget, 1> copy(source);
  EXPECT_EQ(copy.size(), 4u);
}

}  // namespace
}  // namespace gpubind
