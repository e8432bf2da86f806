#include "gpubind/env.h"

#include <gtest/gtest.h>

namespace gpubind {
namespace {

PlaceholderValues values_with(Placeholder p, std::string value) {
  PlaceholderValues v;
  v[static_cast<size_t>(p)] = std::move(value);
  return v;
}

TEST(EnvTemplate, AcceptsKnownPlaceholders) {
  EXPECT_TRUE(validate_template("{gpus}"));
  EXPECT_TRUE(validate_template("plain"));
  EXPECT_TRUE(validate_template("{nic_rdma}:1 {local_rank}/{ntasks} {cpu_mask}"));
}

TEST(EnvTemplate, RejectsUnknownOrUnbalancedPlaceholders) {
  auto unknown = validate_template("{gpu}");
  ASSERT_FALSE(unknown);
  EXPECT_NE(unknown.error().message.find("unknown placeholder {gpu}"), std::string::npos);
  EXPECT_NE(unknown.error().message.find("gpus"), std::string::npos) << "lists the known names";
  EXPECT_FALSE(validate_template("{gpus"));
  EXPECT_FALSE(validate_template("gpus}"));
}

TEST(EnvTemplate, FillsPlaceholders) {
  PlaceholderValues v = values_with(Placeholder::kNicRdma, "mlx5_0");
  v[static_cast<size_t>(Placeholder::kLocalRank)] = "3";
  EXPECT_EQ(render_template("{nic_rdma}:1", v), "mlx5_0:1");
  EXPECT_EQ(render_template("rank{local_rank}-{nic_rdma}", v), "rank3-mlx5_0");
  EXPECT_EQ(render_template("USER", v), "USER");
}

TEST(EnvTemplate, EmptyPlaceholderMeansTheVariableIsNotSet) {
  const PlaceholderValues v = values_with(Placeholder::kNic, "hsn0");
  EXPECT_EQ(render_template("{nic_netdev}", v), std::nullopt);
  EXPECT_EQ(render_template("{nic}", v), "hsn0");
}

}  // namespace
}  // namespace gpubind
