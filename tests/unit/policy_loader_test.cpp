#include "gpubind/policy_loader.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

namespace gpubind {
namespace {

::testing::AssertionResult fails_with(const Result<SitePolicy>& result, const std::string& text) {
  if (result) return ::testing::AssertionFailure() << "parsed, expected an error with: " << text;
  if (result.error().message.find(text) == std::string::npos) {
    return ::testing::AssertionFailure()
           << "error '" << result.error().message << "' lacks: " << text;
  }
  return ::testing::AssertionSuccess();
}

TEST(PolicyLoader, EmptyPolicyIsTheDefault) {
  auto policy = parse_policy("# nothing\n", "site.conf");
  ASSERT_TRUE(policy) << policy.error().message;
  const SitePolicy defaults;
  EXPECT_TRUE(policy->reserved_cpus.empty());
  EXPECT_FALSE(policy->reserve_first_core_per_l3);
  EXPECT_EQ(policy->nic_patterns, defaults.nic_patterns);
  EXPECT_EQ(policy->smt, 0);
  EXPECT_EQ(policy->order, Order::kGpu);
  EXPECT_EQ(policy->gpu_env.size(), defaults.gpu_env.size());
  EXPECT_EQ(policy->nic_env.size(), defaults.nic_env.size());
  EXPECT_EQ(policy->omp_env.size(), 1u);
  EXPECT_EQ(policy->source, "site.conf");
}

TEST(PolicyLoader, ReadsEveryField) {
  auto policy = parse_policy(R"(
reserved_cpus: "0,52"
reserve_first_core_per_l3: true
nic_patterns: "hsi*"
nic_patterns: "mlx5_*"
smt: 1
order: CPU
gpu_order: "0000:c1:00.0"
gpu_order: "3"
gpu_env { name: "CUDA_VISIBLE_DEVICES" value: "{gpus}" when: "nvidia" }
nic_env { name: "FI_PROVIDER" value: "cxi" when: "slingshot" }
omp_env { name: "OMP_NUM_THREADS" value: "{ncores}" only_if_unset: true }
omp_places: true
topology_file: "/etc/gpubind/node.xml"
)",
                             "site.conf");
  ASSERT_TRUE(policy) << policy.error().message;
  EXPECT_EQ(policy->reserved_cpus.to_list(), "0,52");
  EXPECT_TRUE(policy->reserve_first_core_per_l3);
  EXPECT_EQ(policy->nic_patterns, (std::vector<std::string>{"hsi*", "mlx5_*"}));
  EXPECT_EQ(policy->smt, 1);
  EXPECT_EQ(policy->order, Order::kCpu);
  EXPECT_EQ(policy->gpu_order, (std::vector<std::string>{"0000:c1:00.0", "3"}));
  ASSERT_EQ(policy->gpu_env.size(), 1u) << "a group given replaces its defaults";
  EXPECT_EQ(policy->gpu_env[0].when, "nvidia");
  ASSERT_EQ(policy->nic_env.size(), 1u);
  EXPECT_EQ(policy->nic_env[0].name, "FI_PROVIDER");
  ASSERT_EQ(policy->omp_env.size(), 1u);
  EXPECT_EQ(policy->omp_env[0].value, "{ncores}");
  EXPECT_TRUE(policy->omp_env[0].only_if_unset);
  EXPECT_TRUE(policy->omp_places);
  EXPECT_EQ(policy->topology_file, "/etc/gpubind/node.xml");
}

TEST(PolicyLoader, SyntaxErrorNamesFileLineAndColumn) {
  EXPECT_TRUE(fails_with(parse_policy("smt: 1\nreserved_cpus \"0\"\n", "p.conf"), "p.conf:2:"));
  EXPECT_TRUE(fails_with(parse_policy("smt: 1\n\nbogus_field: 2\n", "p.conf"), "p.conf:3:"));
  EXPECT_TRUE(fails_with(parse_policy("smt: 1\n\nbogus_field: 2\n", "p.conf"), "bogus_field"));
  // protobuf reports a bad enum value where the next token starts; the message names both.
  EXPECT_TRUE(
      fails_with(parse_policy("order: SIDEWAYS\n", "p.conf"), "\"SIDEWAYS\" for field \"order\""));
  EXPECT_TRUE(fails_with(parse_policy("smt: -1\n", "p.conf"), "p.conf:1:"));
}

TEST(PolicyLoader, SemanticErrorsNameFileLineAndField) {
  EXPECT_TRUE(fails_with(parse_policy("smt: 1\n\nreserved_cpus: \"0-x\"\n", "p.conf"),
                         "p.conf:3: reserved_cpus: invalid cpu list '0-x'"));
  EXPECT_TRUE(fails_with(parse_policy("smt: 99\n", "p.conf"), "p.conf:1: smt:"));
  EXPECT_TRUE(fails_with(parse_policy("nic_patterns: \"hsn*\"\nnic_patterns: \"\"\n", "p.conf"),
                         "p.conf:2: nic_patterns[1]: empty pattern"));
  EXPECT_TRUE(fails_with(parse_policy("gpu_order: \"\"\n", "p.conf"), "p.conf:1: gpu_order[0]"));
}

// A policy is the site's, but its variables reach every user's tasks: none may change what a
// task runs.
TEST(PolicyLoader, VariablesThatChangeWhatRunsAreRefused) {
  for (const char* name : {"LD_PRELOAD", "BASH_ENV", "PATH", "PYTHONPATH", "OMP_TOOL_LIBRARIES"}) {
    const std::string text = "omp_env { name: \"" + std::string(name) + "\" value: \"/x\" }\n";
    EXPECT_TRUE(fails_with(parse_policy(text, "p.conf"), "p.conf:1: omp_env[0].name:")) << name;
    EXPECT_TRUE(fails_with(parse_policy(text, "p.conf"), "gpubind never sets it")) << name;
  }
}

TEST(PolicyLoader, TemplateErrorsPointIntoTheGroup) {
  const char* text =
      "gpu_env { name: \"CUDA_VISIBLE_DEVICES\" value: \"{gpus}\" }\n"
      "gpu_env {\n"
      "  name: \"ROCR_VISIBLE_DEVICES\"\n"
      "  value: \"{gpuz}\"\n"
      "}\n";
  EXPECT_TRUE(fails_with(parse_policy(text, "p.conf"), "p.conf:4: gpu_env[1].value:"));
  EXPECT_TRUE(fails_with(parse_policy(text, "p.conf"), "unknown placeholder {gpuz}"));
  EXPECT_TRUE(fails_with(parse_policy("nic_env { name: \"1BAD\" value: \"x\" }\n", "p.conf"),
                         "nic_env[0].name: '1BAD' is not a valid environment variable name"));
  EXPECT_TRUE(
      fails_with(parse_policy("gpu_env { name: \"X\" value: \"x\" when: \"matrox\" }\n", "p.conf"),
                 "gpu_env[0].when: 'matrox' is not one of"));
  EXPECT_TRUE(
      fails_with(parse_policy("omp_env { name: \"X\" value: \"x\" when: \"amd\" }\n", "p.conf"),
                 "omp_env[0].when"));
}

TEST(PolicyLoader, FileErrorsNameThePath) {
  EXPECT_TRUE(fails_with(load_policy_file("/nonexistent/policy.conf"),
                         "policy file '/nonexistent/policy.conf': No such file or directory"));
  EXPECT_TRUE(fails_with(load_policy_file("/tmp"), "not a regular file"));
  EXPECT_TRUE(fails_with(parse_policy(std::string(kMaxPolicyBytes + 1, ' '), "big.conf"),
                         "big.conf: policy is larger than"));
}

long resident_kib() {
  std::ifstream statm("/proc/self/statm");
  long size = 0, resident = 0;
  statm >> size >> resident;
  return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

// A 100 MB policy is refused having read just past the limit, not loaded whole (SIGHUP on a huge
// file once took the daemon to 214 MB).
TEST(PolicyLoader, AHugeFileIsRefusedWithoutBeingLoaded) {
  const std::string path = ::testing::TempDir() + "/gpubind-huge-policy.conf";
  { std::ofstream out(path); }
  ASSERT_EQ(truncate(path.c_str(), 100L << 20), 0);
  const long before = resident_kib();
  EXPECT_TRUE(fails_with(load_policy_file(path), "policy is larger than"));
  EXPECT_LT(resident_kib() - before, 16 * 1024) << "KiB grown while refusing it";
  std::remove(path.c_str());
}

TEST(PolicyLoader, LoadsAFile) {
  const std::string path = ::testing::TempDir() + "/gpubind-policy-test.conf";
  {
    std::ofstream out(path);
    out << "reserve_first_core_per_l3: true\nsmt: 1\n";
  }
  auto policy = load_policy_file(path);
  std::remove(path.c_str());
  ASSERT_TRUE(policy) << policy.error().message;
  EXPECT_TRUE(policy->reserve_first_core_per_l3);
  EXPECT_EQ(policy->source, path);
}

}  // namespace
}  // namespace gpubind
