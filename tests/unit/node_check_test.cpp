// The node health check (check_node), its policy fields (`expect`) and the live facts it reads.
#include "gpubind/node_check.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>

#include "../support/fixtures.h"
#include "gpubind/discovery/live_facts.h"
#include "gpubind/policy_loader.h"

namespace gpubind {
namespace {

using testing::fixture;

std::vector<std::string> codes(const std::vector<NodeFault>& faults) {
  std::vector<std::string> out;
  for (const NodeFault& f : faults)
    out.push_back(f.code);
  return out;
}

SitePolicy lumi_expectation() {
  SitePolicy policy;
  policy.expect.gpu_count = 8;
  policy.expect.gpu_model = "*mi250x*";  // case does not matter
  policy.expect.nic_count = 4;
  policy.expect.nics = {"hsn[0-3]"};
  policy.expect.gpu_nic_pairing = ExpectedNode::Pairing::kNuma;
  policy.expect.numa_balancing = ExpectedNode::NumaBalancing::kOff;
  return policy;
}

TEST(NodeCheck, NothingExpectedAndNothingLiveIsHealthy) {
  for (const char* name : {"lumi-g", "dgx-h100", "aurora-pvc", "a100-pcionly", "cpuless-numa"}) {
    const auto faults = check_node(fixture(name), SitePolicy{}, LiveFacts{});
    EXPECT_FALSE(has_faults(faults)) << name << ": " << faults[0].message;
  }
}

TEST(NodeCheck, TheNodeThePolicyDescribesIsHealthy) {
  LiveFacts facts;
  facts.numa_balancing_read = true;
  facts.numa_balancing = 0;
  EXPECT_TRUE(check_node(fixture("lumi-g"), lumi_expectation(), facts).empty());
}

TEST(NodeCheck, AMissingGpuIsCountedAndNamedByWhatWasFound) {
  Topology node = fixture("lumi-g");
  node.gpus.pop_back();
  const auto faults = check_node(node, lumi_expectation(), LiveFacts{});
  ASSERT_EQ(codes(faults), std::vector<std::string>{"gpu-count"});
  EXPECT_EQ(faults[0].message, "expected 8 GPUs, found 7");
}

TEST(NodeCheck, AnotherModelIsAFaultPerGpuAnUnknownOneAWarning) {
  Topology node = fixture("lumi-g");
  node.gpus[2].model = "AMD Instinct MI210";
  node.gpus[3].model = "";
  const auto faults = check_node(node, lumi_expectation(), LiveFacts{});
  ASSERT_EQ(codes(faults), (std::vector<std::string>{"gpu-model", "gpu-model"}));
  EXPECT_EQ(faults[0].severity, NodeFault::Severity::kFault);
  EXPECT_NE(faults[0].message.find("GPU 2 ("), std::string::npos) << faults[0].message;
  EXPECT_NE(faults[0].message.find("'AMD Instinct MI210'"), std::string::npos);
  EXPECT_EQ(faults[1].severity, NodeFault::Severity::kWarning);
  EXPECT_TRUE(has_faults(faults));
}

// A node that reports no I/O locality (one package or two): a fault naming the devices, unless
// the policy says it is expected (a VM); never for a node whose devices have their domains.
TEST(NodeCheck, UnknownIoLocalityIsAFaultUnlessExpected) {
  for (const char* name : {"lumi-g-noloc", "dgx-h100-noloc"}) {
    const auto faults = check_node(fixture(name), SitePolicy{}, LiveFacts{});
    ASSERT_EQ(codes(faults), std::vector<std::string>{"io-locality-unknown"}) << name;
    EXPECT_EQ(faults[0].severity, NodeFault::Severity::kFault);
    EXPECT_NE(faults[0].message.find("GPU 0 ("), std::string::npos) << faults[0].message;
    SitePolicy vm;
    vm.expect.io_locality_unknown = true;
    EXPECT_FALSE(has_faults(check_node(fixture(name), vm, LiveFacts{}))) << name;
  }
  EXPECT_FALSE(has_faults(check_node(fixture("lumi-g"), SitePolicy{}, LiveFacts{})));
}

// Slurm's node line against the node (a BIOS SMT change after the line was written): a fault
// naming both views; the line the node has passes; a line without the counts is not read.
TEST(NodeCheck, SlurmsNodeLineMustBeTheNodes) {
  const std::string lumi_line =
      "NodeName=nid001 Arch=x86_64 CoresPerSocket=64 CPUAlloc=0 CPUTot=128 CPULoad=0.01 "
      "Boards=1 Sockets=1 ThreadsPerCore=2 RealMemory=512000";
  auto line = parse_slurm_node_line(lumi_line, "scontrol show node -o nid001");
  ASSERT_TRUE(line);
  EXPECT_EQ(line->cpus, 128);
  EXPECT_EQ(line->cores_per_socket, 64);
  EXPECT_EQ(line->threads_per_core, 2);
  LiveFacts facts;
  facts.slurm_node = line;
  EXPECT_FALSE(has_faults(check_node(fixture("lumi-g"), SitePolicy{}, facts)));

  // Slurm still counts 2 threads a core where the node now has 1 (CPUs 0-63 online).
  facts.slurm_node = parse_slurm_node_line("CoresPerSocket=32 CPUTot=64 Sockets=1 ThreadsPerCore=2",
                                           "scontrol show node -o nid001");
  ASSERT_TRUE(facts.slurm_node);
  const auto faults = check_node(fixture("lumi-g"), SitePolicy{}, facts);
  ASSERT_EQ(codes(faults), std::vector<std::string>{"slurm-node"});
  EXPECT_NE(faults[0].message.find("1 x 32 cores x 2 threads, 64 CPUs"), std::string::npos)
      << faults[0].message;
  EXPECT_NE(faults[0].message.find("(64 cores x 2 threads, 128 CPUs)"), std::string::npos);
  EXPECT_FALSE(parse_slurm_node_line("NodeName=x State=DOWN", "s"));
  EXPECT_FALSE(parse_slurm_node_line("CPUTot=x Sockets=1 CoresPerSocket=2 ThreadsPerCore=1", "s"));
}

TEST(NodeCheck, AMissingNicIsCountedAndNamed) {
  Topology node = fixture("lumi-g");
  node.nics.erase(node.nics.begin() + 2);  // hsn2
  const auto faults = check_node(node, lumi_expectation(), LiveFacts{});
  const auto got = codes(faults);
  ASSERT_GE(got.size(), 2u);
  EXPECT_EQ(got[0], "nic-count");
  EXPECT_EQ(faults[0].message, "expected 4 NICs matching nic_patterns, found 3");
  EXPECT_EQ(got[1], "nic-missing");
  EXPECT_EQ(faults[1].message, "NIC hsn2 is missing");
  // The GCDs of hsn2's NUMA node have no NIC there any more.
  EXPECT_EQ(std::count(got.begin(), got.end(), "gpu-nic-pairing"), 2)
      << ::testing::PrintToString(got);
}

TEST(NodeCheck, NicNamesMatchNameNetdevOrRdmaDeviceAndGlobs) {
  SitePolicy policy;
  policy.expect.nics = {"cxi[0-3]", "hsn*"};
  EXPECT_TRUE(check_node(fixture("lumi-g"), policy, LiveFacts{}).empty());
  policy.expect.nics = {"mlx5_*", "hsn[3-4]"};
  const auto faults = check_node(fixture("lumi-g"), policy, LiveFacts{});
  ASSERT_EQ(codes(faults), (std::vector<std::string>{"nic-missing", "nic-missing"}));
  EXPECT_EQ(faults[0].message, "no NIC matches 'mlx5_*'");
  EXPECT_EQ(faults[1].message, "NIC hsn4 is missing");
}

TEST(NodeCheck, PairingByNumaNodeOrPackage) {
  SitePolicy numa;
  numa.expect.gpu_nic_pairing = ExpectedNode::Pairing::kNuma;
  SitePolicy package;
  package.expect.gpu_nic_pairing = ExpectedNode::Pairing::kPackage;
  EXPECT_TRUE(check_node(fixture("dgx-h100"), numa, LiveFacts{}).empty());
  Topology node = fixture("dgx-h100");
  // Every NIC on package 0: the GPUs of package 1 have none on theirs.
  for (Nic& nic : node.nics) {
    nic.locality.package_index = 0;
    nic.locality.numa_index = 0;
  }
  const auto faults = check_node(node, package, LiveFacts{});
  ASSERT_EQ(faults.size(), 4u);
  EXPECT_EQ(faults[0].code, "gpu-nic-pairing");
  EXPECT_NE(faults[0].message.find("GPU 4 ("), std::string::npos) << faults[0].message;
  EXPECT_NE(faults[0].message.find("no NIC on its package (package 1)"), std::string::npos)
      << faults[0].message;
  // A node without NICs pairs nothing.
  node.nics.clear();
  EXPECT_EQ(check_node(node, numa, LiveFacts{}).size(), 8u);
}

TEST(NodeCheck, AGpuWhoseLocalityHasNoCpusIsAFault) {
  Topology node = fixture("lumi-g");
  node.gpus[1].locality.cpus = CpuSet();
  auto faults = check_node(node, SitePolicy{}, LiveFacts{});
  ASSERT_EQ(codes(faults), std::vector<std::string>{"gpu-no-cpus"});
  // A locality of the whole machine on a node of several NUMA nodes: bindings are guessed.
  node = fixture("lumi-g");
  node.gpus[1].locality.kind = LocalityKind::kMachine;
  faults = check_node(node, SitePolicy{}, LiveFacts{});
  ASSERT_EQ(codes(faults), std::vector<std::string>{"gpu-locality"});
  EXPECT_FALSE(has_faults(faults));
}

TEST(NodeCheck, LinksDownAreFaultsOneActivePortIsEnough) {
  const Topology& node = fixture("dgx-h100");
  LiveFacts facts;
  facts.nic_links.resize(node.nics.size());
  for (size_t n = 0; n < node.nics.size(); ++n) {
    facts.nic_links[n] = {{node.nics[n].netdev, "up", true},
                          {node.nics[n].rdma + ":1", "ACTIVE", true},
                          {node.nics[n].rdma + ":2", "DOWN", false}};
  }
  EXPECT_TRUE(check_node(node, SitePolicy{}, facts).empty());
  facts.nic_links[3][1] = {node.nics[3].rdma + ":1", "INIT", false};
  facts.nic_links[5][0] = {node.nics[5].netdev, "down", false};
  const auto faults = check_node(node, SitePolicy{}, facts);
  ASSERT_EQ(codes(faults), (std::vector<std::string>{"nic-down", "nic-down"}));
  EXPECT_NE(faults[0].message.find("mlx5_3:1 INIT, mlx5_3:2 DOWN"), std::string::npos)
      << faults[0].message;
  EXPECT_NE(faults[1].message.find("(" + node.nics[5].netdev + " down)"), std::string::npos)
      << faults[1].message;
}

TEST(NodeCheck, NumaBalancingAsThePolicyWantsWhenRead) {
  SitePolicy policy;
  policy.expect.numa_balancing = ExpectedNode::NumaBalancing::kOff;
  LiveFacts facts;
  facts.numa_balancing = 1;
  EXPECT_TRUE(check_node(fixture("lumi-g"), policy, facts).empty()) << "offline: not read";
  facts.numa_balancing_read = true;
  auto faults = check_node(fixture("lumi-g"), policy, facts);
  ASSERT_EQ(codes(faults), std::vector<std::string>{"numa-balancing"});
  EXPECT_EQ(faults[0].message, "kernel.numa_balancing is 1, the policy wants it off (0)");
  // A kernel without the sysctl does not balance.
  facts.numa_balancing.reset();
  EXPECT_TRUE(check_node(fixture("lumi-g"), policy, facts).empty());
  policy.expect.numa_balancing = ExpectedNode::NumaBalancing::kOn;
  EXPECT_EQ(codes(check_node(fixture("lumi-g"), policy, facts)),
            std::vector<std::string>{"numa-balancing"});
}

TEST(NodeCheck, TheDaemonMustAnswerWhenAsked) {
  LiveFacts facts;
  facts.daemon_error = "";
  EXPECT_TRUE(check_node(fixture("lumi-g"), SitePolicy{}, facts).empty());
  facts.daemon_error = "/run/gpubind/gpubind.sock: daemon unavailable";
  const auto faults = check_node(fixture("lumi-g"), SitePolicy{}, facts);
  ASSERT_EQ(codes(faults), std::vector<std::string>{"daemon"});
  EXPECT_NE(faults[0].message.find("daemon unavailable"), std::string::npos);
}

TEST(NodeCheck, APlugstackThatLoadsNoGpubindIsAFault) {
  LiveFacts facts;
  facts.plugstack = LiveFacts::Plugstack{"/run/slurm/conf/plugstack.conf", ""};
  EXPECT_TRUE(check_node(fixture("lumi-g"), SitePolicy{}, facts).empty());
  facts.plugstack->missing = "include plugstack.conf.d/*.conf names no file here";
  const auto faults = check_node(fixture("lumi-g"), SitePolicy{}, facts);
  ASSERT_EQ(codes(faults), std::vector<std::string>{"plugin-not-loaded"});
  EXPECT_NE(faults[0].message.find("/run/slurm/conf/plugstack.conf"), std::string::npos);
  EXPECT_NE(faults[0].message.find("names no file here"), std::string::npos);
}

TEST(NodeCheck, NicNameRangesExpandLikeSlurmHostLists) {
  EXPECT_EQ(*expand_nic_names("hsn[0-3]"),
            (std::vector<std::string>{"hsn0", "hsn1", "hsn2", "hsn3"}));
  EXPECT_EQ(*expand_nic_names("mlx5_[0-1,6]"),
            (std::vector<std::string>{"mlx5_0", "mlx5_1", "mlx5_6"}));
  EXPECT_EQ(*expand_nic_names("ib[08-10]"), (std::vector<std::string>{"ib08", "ib09", "ib10"}));
  EXPECT_EQ(*expand_nic_names("p[0-1]s[0-1]"),
            (std::vector<std::string>{"p0s0", "p0s1", "p1s0", "p1s1"}));
  EXPECT_EQ(*expand_nic_names("ibp*"), std::vector<std::string>{"ibp*"});
  for (const char* bad : {"", "hsn[0-3", "hsn0]", "hsn[3-0]", "hsn[a]", "hsn[0-99999]"}) {
    EXPECT_FALSE(expand_nic_names(bad)) << bad;
  }
}

TEST(NodeCheckPolicy, ReadsTheExpectBlock) {
  auto policy = parse_policy(R"(
expect {
  gpu_count: 8
  gpu_model: "*MI250X*"
  nic_count: 4
  nics: "hsn[0-3]"
  nics: "cxi*"
  gpu_nic_pairing: PACKAGE
  numa_balancing: ON
})",
                             "p.conf");
  ASSERT_TRUE(policy) << policy.error().message;
  EXPECT_EQ(policy->expect.gpu_count, 8);
  EXPECT_EQ(policy->expect.gpu_model, "*MI250X*");
  EXPECT_EQ(policy->expect.nic_count, 4);
  EXPECT_EQ(policy->expect.nics, (std::vector<std::string>{"hsn[0-3]", "cxi*"}));
  EXPECT_EQ(policy->expect.gpu_nic_pairing, ExpectedNode::Pairing::kPackage);
  EXPECT_EQ(policy->expect.numa_balancing, ExpectedNode::NumaBalancing::kOn);
  auto empty = parse_policy("", "p.conf");
  ASSERT_TRUE(empty);
  EXPECT_EQ(empty->expect.gpu_count, 0);
  EXPECT_EQ(empty->expect.gpu_nic_pairing, ExpectedNode::Pairing::kUnchecked);
}

TEST(NodeCheckPolicy, BadValuesNameTheFieldAndLine) {
  const std::pair<const char*, const char*> cases[] = {
      {"expect {\n  nics: \"hsn[0-3\"\n}", "p.conf:2: expect.nics[0]: 'hsn[0-3': '[' without ']'"},
      {"expect {\n  gpu_count: 5000\n}", "p.conf:2: expect.gpu_count: 5000 GPUs is not plausible"},
      {"expect {\n\n  nic_count: 2000\n}", "p.conf:3: expect.nic_count: 2000 NICs"},
      {"expect { gpu_model: \"[MI250X\" }", "p.conf:1: expect.gpu_model: pattern '[MI250X' has an"},
      {"expect { nics: \"\" }", "p.conf:1: expect.nics[0]: empty name"},
      {"expect { gpu_nic_pairing: SOCKET }", "p.conf:1:"},
  };
  for (const auto& [text, want] : cases) {
    auto policy = parse_policy(text, "p.conf");
    ASSERT_FALSE(policy) << text;
    EXPECT_EQ(policy.error().message.rfind(want, 0), 0u) << policy.error().message;
  }
}

TEST(NodeCheckLive, ReadsLinksAndNumaBalancingUnderTheFsRoot) {
  const std::filesystem::path root =
      std::filesystem::temp_directory_path() / ("gpubind-live-facts-" + std::to_string(getpid()));
  std::filesystem::remove_all(root);
  auto write = [&](const std::string& path, const std::string& text) {
    std::filesystem::create_directories((root / path).parent_path());
    std::ofstream(root / path) << text;
  };
  Topology node;
  node.nics.resize(3);
  node.nics[0].netdev = "hsn0";
  node.nics[0].rdma = "cxi0";  // no infiniband ports: the netdev is its link
  node.nics[1].netdev = "ib0";
  node.nics[1].rdma = "mlx5_0";
  node.nics[2].netdev = "eth9";  // absent
  write("sys/class/net/hsn0/operstate", "up\n");
  write("sys/class/net/ib0/operstate", "unknown\n");
  write("sys/class/net/ib0/carrier", "1\n");
  write("sys/class/infiniband/mlx5_0/ports/1/state", "4: ACTIVE\n");
  write("sys/class/infiniband/mlx5_0/ports/2/state", "1: DOWN\n");
  write("proc/sys/kernel/numa_balancing", "1\n");
  setenv("HWLOC_FSROOT", root.c_str(), 1);
  const LiveFacts facts = discovery::read_live_facts(node);
  unsetenv("HWLOC_FSROOT");
  std::filesystem::remove_all(root);
  ASSERT_EQ(facts.nic_links.size(), 3u);
  ASSERT_EQ(facts.nic_links[0].size(), 1u);
  EXPECT_TRUE(facts.nic_links[0][0].up);
  ASSERT_EQ(facts.nic_links[1].size(), 3u);
  EXPECT_TRUE(facts.nic_links[1][0].up) << "operstate unknown with a carrier";
  EXPECT_EQ(facts.nic_links[1][1].device, "mlx5_0:1");
  EXPECT_TRUE(facts.nic_links[1][1].up);
  EXPECT_EQ(facts.nic_links[1][2].state, "DOWN");
  EXPECT_FALSE(facts.nic_links[1][2].up);
  EXPECT_EQ(facts.nic_links[2][0].state, "absent");
  EXPECT_TRUE(facts.numa_balancing_read);
  EXPECT_EQ(facts.numa_balancing, 1);
  const auto faults = check_node(node, SitePolicy{}, facts);
  ASSERT_EQ(codes(faults), std::vector<std::string>{"nic-down"});
  EXPECT_NE(faults[0].message.find("eth9 absent"), std::string::npos) << faults[0].message;
}

}  // namespace
}  // namespace gpubind
