#include "gpubind/topology_hwloc.h"

#include <gtest/gtest.h>

#include <algorithm>

#include <fstream>

#include "../support/fixtures.h"

namespace gpubind {
namespace {

using testing::fixture;
using testing::fixture_path;

std::vector<int> gpu_l3s(const Topology& t) {
  std::vector<int> l3s;
  for (const Gpu& gpu : t.gpus)
    l3s.push_back(gpu.locality.l3_index);
  return l3s;
}

TEST(TopologyHwloc, LumiGCpuSide) {
  const Topology& t = fixture("lumi-g");
  EXPECT_EQ(t.hostname, "lumi-g");
  EXPECT_EQ(t.package_count, 1);
  EXPECT_EQ(t.numa_count, 4);
  EXPECT_EQ(t.l3_count, 8);
  ASSERT_EQ(t.cores.size(), 64u);
  EXPECT_EQ(t.all_pus().count(), 128);
  EXPECT_EQ(t.cores[9].pus, (std::vector<int>{9, 73}));
  EXPECT_EQ(t.cores[9].l3_index, 1);
  EXPECT_EQ(t.cores[17].numa_index, 1);
  EXPECT_EQ(t.l3_pus(6).to_list(), "48-55,112-119");
}

TEST(TopologyHwloc, LumiGGpusInPciOrderWithTheirCcd) {
  const Topology& t = fixture("lumi-g");
  ASSERT_EQ(t.gpus.size(), 8u);
  const char* buses[] = {"c1", "c6", "c9", "ce", "d1", "d6", "d9", "de"};
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(t.gpus[i].index, i);
    EXPECT_EQ(t.gpus[i].pci_bus_id, std::string("0000:") + buses[i] + ":00.0");
    EXPECT_EQ(t.gpus[i].vendor, Vendor::kAmd);
    EXPECT_EQ(t.gpus[i].os_name, "rsmi" + std::to_string(i));
    EXPECT_EQ(t.gpus[i].locality.kind, LocalityKind::kL3);
  }
  EXPECT_EQ(gpu_l3s(t), (std::vector<int>{6, 7, 2, 3, 0, 1, 4, 5}));
  EXPECT_EQ(t.gpus[0].locality.numa_index, 3);
  EXPECT_EQ(t.gpus[0].locality.cpus.to_list(), "48-55,112-119");
}

// Devices local to every CPU of a node with several L3s or NUMA nodes have no locality known,
// whatever object hwloc hung them from (the machine on one package as on two); every fixture
// whose devices sit in their domains keeps them known.
TEST(TopologyHwloc, DevicesLocalToTheWholeNodeHaveUnknownLocality) {
  for (const char* name : {"lumi-g-noloc", "dgx-h100-noloc"}) {
    const Topology& t = fixture(name);
    ASSERT_FALSE(t.gpus.empty());
    for (const Gpu& gpu : t.gpus) {
      EXPECT_EQ(gpu.locality.kind, LocalityKind::kUnknown) << name << " GPU " << gpu.index;
      EXPECT_EQ(gpu.locality.cpus, t.all_pus());
      EXPECT_EQ(gpu.locality.package_index, -1) << "no package claimed";
      EXPECT_NE(gpu.locality.basis.find("no I/O locality reported"), std::string::npos);
    }
    for (const Nic& nic : t.nics)
      EXPECT_EQ(nic.locality.kind, LocalityKind::kUnknown) << name << " " << nic.name;
  }
  for (const char* name : {"lumi-g", "dgx-h100", "aurora-pvc", "a100-pcionly", "cpuless-numa",
                           "mi300a-tpx", "workstation-mixed"}) {
    const Topology& t = fixture(name);
    for (const Gpu& gpu : t.gpus)
      EXPECT_TRUE(locality_known(gpu.locality)) << name << " GPU " << gpu.index;
    for (const Nic& nic : t.nics)
      EXPECT_TRUE(locality_known(nic.locality)) << name << " " << nic.name;
  }
}

// One rule for what is a GPU: the Teslas found by PCI class alone count; the board's onboard ATI
// ES1000 (a GPU vendor's VGA device on conventional PCI, no runtime) does not, and is said.
TEST(TopologyHwloc, OnboardVideoIsNoGpu) {
  const Topology& t = fixture("tesla-es1000");
  ASSERT_EQ(t.gpus.size(), 3u);
  for (const Gpu& gpu : t.gpus) {
    EXPECT_EQ(gpu.vendor, Vendor::kNvidia);
    EXPECT_NE(gpu.pci_bus_id, "0000:0b:01.0");
  }
  ASSERT_EQ(t.warnings.size(), 1u);
  EXPECT_NE(t.warnings[0].find("0000:0b:01.0"), std::string::npos) << t.warnings[0];
  EXPECT_NE(t.warnings[0].find("onboard video, not counted as a GPU"), std::string::npos);
  // A VGA-class GPU on PCIe is still a GPU (the workstation's GTX 1070 and Vega FE).
  const Topology& workstation = fixture("workstation-mixed");
  EXPECT_EQ(std::count_if(workstation.gpus.begin(), workstation.gpus.end(),
                          [](const Gpu& g) { return g.pci_bus_id == "0000:01:00.0"; }),
            1);
}

TEST(TopologyHwloc, LumiGSlingshotNicsAndNoManagementNic) {
  const Topology& t = fixture("lumi-g");
  ASSERT_EQ(t.nics.size(), 4u) << "nmn0 must not match the default patterns";
  const int l3s[] = {7, 3, 1, 5};
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(t.nics[i].name, "hsn" + std::to_string(i)) << "hsn* comes before cxi*";
    EXPECT_EQ(t.nics[i].netdev, "hsn" + std::to_string(i));
    EXPECT_EQ(t.nics[i].rdma, "cxi" + std::to_string(i));
    EXPECT_EQ(t.nics[i].kind, NicKind::kSlingshot);
    EXPECT_EQ(t.nics[i].locality.l3_index, l3s[i]);
    EXPECT_EQ(nic_ordinal(t.nics[i]), i);
  }
}

TEST(TopologyHwloc, SitePatternsSelectOtherNics) {
  auto t = load_topology_xml(fixture_path("lumi-g.xml"), {"nmn*"});
  ASSERT_TRUE(t) << t.error().message;
  ASSERT_EQ(t->nics.size(), 1u);
  EXPECT_EQ(t->nics[0].name, "nmn0");
  EXPECT_EQ(t->nics[0].kind, NicKind::kEthernet);
  EXPECT_EQ(t->nics[0].locality.kind, LocalityKind::kNuma) << "under the NUMA group, not an L3";
  EXPECT_EQ(t->nics[0].locality.numa_index, 0);
}

TEST(TopologyHwloc, IntelTilesBelongToTheirGpu) {
  const Topology& t = fixture("aurora-pvc");
  ASSERT_EQ(t.gpus.size(), 6u);
  for (const Gpu& gpu : t.gpus) {
    EXPECT_EQ(gpu.vendor, Vendor::kIntel);
    EXPECT_EQ(gpu.tiles, 2) << gpu.os_name;
    EXPECT_EQ(gpu.partitions, 1);
  }
  EXPECT_EQ(t.gpus[3].pci_bus_id, "0001:18:00.0");
  EXPECT_EQ(t.gpus[3].locality.package_index, 1);
  EXPECT_EQ(t.nics.size(), 8u);
}

TEST(TopologyHwloc, GpusFoundByPciClassWithoutOsDevices) {
  const Topology& t = fixture("dgx-h100");
  ASSERT_EQ(t.gpus.size(), 8u);
  for (const Gpu& gpu : t.gpus) {
    EXPECT_EQ(gpu.vendor, Vendor::kNvidia);
    EXPECT_TRUE(gpu.os_name.empty());
  }
  EXPECT_EQ(t.gpus[4].pci_bus_id, "0000:9d:00.0");
  // The package's L3 and NUMA node hold the same cores: the L3 names it.
  EXPECT_EQ(t.gpus[4].locality.kind, LocalityKind::kL3);
  EXPECT_EQ(t.gpus[4].locality.numa_index, 1);
}

TEST(TopologyHwloc, InfinibandNicsShareTheGpuSwitch) {
  const Topology& t = fixture("dgx-h100");
  const Nic& mlx5_0 = t.nics[0];
  EXPECT_EQ(mlx5_0.name, "mlx5_0") << "mlx5_* comes before ib*";
  EXPECT_EQ(mlx5_0.netdev, "ibp26s0");
  EXPECT_EQ(mlx5_0.kind, NicKind::kInfiniband);
  // Behind one switch: the NIC's and GPU 0's paths share the root port and the switch's port.
  const std::vector<int>& nic_path = mlx5_0.locality.pci_path;
  const std::vector<int>& gpu0_path = t.gpus[0].locality.pci_path;
  ASSERT_GE(nic_path.size(), 2u);
  ASSERT_GE(gpu0_path.size(), 2u);
  EXPECT_EQ(nic_path[0], gpu0_path[0]);
  EXPECT_EQ(nic_path[1], gpu0_path[1]);
  EXPECT_NE(t.gpus[0].locality.pci_path[0], t.gpus[1].locality.pci_path[0]);
}

// The DGX H100 fixture with `infos` (hwloc's <info> elements) added to mlx5_0, loaded; its NIC 0.
Nic dgx_nic0_with_infos(const std::vector<std::pair<std::string, std::string>>& infos) {
  std::ifstream in(fixture_path("dgx-h100.xml"));
  std::string xml((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string guid = R"(<info name="NodeGUID" value="946d:ae03:0000:0000"/>)";
  const size_t at = xml.find(guid);
  EXPECT_NE(at, std::string::npos);
  std::string added;
  for (const auto& [name, value] : infos)
    added += R"(<info name=")" + name + R"(" value=")" + value + R"("/>)";
  xml.insert(at + guid.size(), added);
  const std::string path = ::testing::TempDir() + "/gpubind-ib-ports.xml";
  std::ofstream(path) << xml;
  auto loaded = load_topology_xml(path, SitePolicy::default_nic_patterns());
  std::remove(path.c_str());
  EXPECT_TRUE(loaded) << loaded.error().message;
  if (!loaded || loaded->nics.empty()) return {};
  EXPECT_EQ(loaded->nics[0].rdma, "mlx5_0");
  return loaded->nics[0];
}

// UCX offers only an RDMA device's ACTIVE ports (hwloc's Port<i>State 4), as "<device>:<port>".
TEST(TopologyHwloc, RdmaPortIsTheLowestActivePort) {
  EXPECT_EQ(dgx_nic0_with_infos({{"Port1State", "1"}, {"Port2State", "4"}}).rdma_port, 2)
      << "a dual-port HCA cabled on port 2";
  EXPECT_EQ(dgx_nic0_with_infos({{"Port1State", "4"}, {"Port2State", "4"}}).rdma_port, 1);
  EXPECT_EQ(dgx_nic0_with_infos({{"Port10State", "4"}, {"Port9State", "1"}, {"Port2State", "4"}})
                .rdma_port,
            2)
      << "ports compare as numbers";
  EXPECT_EQ(dgx_nic0_with_infos({{"Port1State", "5"}, {"Port2State", "4"}}).rdma_port, 2)
      << "ACTIVE_DEFER is not ACTIVE to UCX";
  EXPECT_EQ(dgx_nic0_with_infos({{"Port2State", "1"}, {"Port3State", "2"}}).rdma_port, 2)
      << "no active port: the lowest listed";
  EXPECT_EQ(
      dgx_nic0_with_infos({{"Port1LID", "0x4"}, {"PortState", "4"}, {"Port0State", "4"}}).rdma_port,
      1)
      << "no port states: port 1";
  EXPECT_EQ(fixture("dgx-h100").nics[0].rdma_port, 1);
}

TEST(TopologyHwloc, PartitionsOfOneDeviceAreSeparateGpus) {
  const Topology& t = fixture("mi300a-tpx");
  ASSERT_EQ(t.gpus.size(), 12u);
  for (int i = 0; i < 12; ++i) {
    EXPECT_EQ(t.gpus[i].os_name, "rsmi" + std::to_string(i));
    EXPECT_EQ(t.gpus[i].partition, i % 3);
    EXPECT_EQ(t.gpus[i].partitions, 3);
    EXPECT_EQ(t.gpus[i].locality.package_index, i / 3);
  }
  EXPECT_EQ(t.gpus[1].pci_bus_id, t.gpus[2].pci_bus_id);
}

TEST(TopologyHwloc, WorkstationIgnoresIntegratedAndBmcGraphicsAndFpgas) {
  const Topology& t = fixture("workstation-mixed");
  ASSERT_EQ(t.gpus.size(), 2u);
  EXPECT_EQ(t.gpus[0].vendor, Vendor::kNvidia);
  EXPECT_EQ(t.gpus[0].os_name, "cuda0");
  EXPECT_EQ(t.gpus[1].vendor, Vendor::kAmd);
  EXPECT_EQ(t.gpus[1].os_name, "opencl0d0");
  EXPECT_EQ(t.gpus[1].pci_bus_id, "0000:0a:00.0") << "not the FPGA at 05:00.0 (OpenCL accelerator)";
  EXPECT_TRUE(t.nics.empty());
}

TEST(TopologyHwloc, ReversedNumaPlacement) {
  const Topology& t = fixture("a100-pcionly");
  ASSERT_EQ(t.gpus.size(), 4u);
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(t.gpus[i].locality.kind, LocalityKind::kNuma);
    EXPECT_EQ(t.gpus[i].locality.numa_index, 3 - i);
    EXPECT_EQ(t.nics[i].locality.numa_index, 3 - i);
  }
  EXPECT_EQ(t.nics[0].rdma, "");
}

TEST(TopologyHwloc, LiveDiscoveryFindsThisMachine) {
  auto t = load_topology_live(SitePolicy::default_nic_patterns());
  ASSERT_TRUE(t) << t.error().message;
  EXPECT_EQ(t->source, "live");
  EXPECT_GE(t->cores.size(), 1u);
  EXPECT_GE(t->all_pus().count(), static_cast<int>(t->cores.size()));
}

TEST(TopologyHwloc, MissingOrBrokenFilesNameTheFile) {
  auto missing = load_topology_xml("/nonexistent/node.xml", {});
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().message,
            "topology file '/nonexistent/node.xml': No such file or directory");

  const std::string path = ::testing::TempDir() + "/gpubind-broken.xml";
  std::ofstream(path) << "<topology><object type=\"Machine\"";
  auto broken = load_topology_xml(path, {});
  ASSERT_FALSE(broken);
  EXPECT_NE(broken.error().message.find(path), std::string::npos) << broken.error().message;
  std::remove(path.c_str());

  auto dir = load_topology_xml("/tmp", {});
  ASSERT_FALSE(dir);
  EXPECT_NE(dir.error().message.find("not a file"), std::string::npos);
}

TEST(TopologyHwloc, CpuNumbersBeyondTheSupportedRangeAreRefused) {
  // A fixture with one PU renumbered far beyond any node (hwloc accepts it).
  std::ifstream in(fixture_path("workstation-mixed.xml"));
  std::string xml((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string from = "type=\"PU\" os_index=\"15\"";
  ASSERT_NE(xml.find(from), std::string::npos);
  xml.replace(xml.find(from), from.size(), "type=\"PU\" os_index=\"1000000\"");
  const std::string path = ::testing::TempDir() + "/gpubind-huge-pu.xml";
  std::ofstream(path) << xml;
  auto loaded = load_topology_xml(path, {});
  std::remove(path.c_str());
  ASSERT_FALSE(loaded);
  EXPECT_NE(loaded.error().message.find("CPU number 1000000 is beyond the supported 65535"),
            std::string::npos)
      << loaded.error().message;
}

// hwloc keeps out-of-range bridge and OS device types from XML; reading them must stay defined
// (found by fuzzing: clang's -fsanitize=enum in the fuzz build flagged the load).
TEST(TopologyHwloc, OutOfRangeDeviceTypesFromXmlAreHandled) {
  std::ifstream in(fixture_path("a100-pcionly.xml"));
  std::string xml((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto replace_all = [&xml](const std::string& from, const std::string& to) {
    int count = 0;
    for (size_t at = xml.find(from); at != std::string::npos; at = xml.find(from, at + to.size())) {
      xml.replace(at, from.size(), to);
      ++count;
    }
    return count;
  };
  ASSERT_GT(replace_all("bridge_type=\"1-1\"", "bridge_type=\"77-1\""), 0);
  ASSERT_GT(replace_all("osdev_type=\"2\"", "osdev_type=\"99\""), 0);
  const std::string path = ::testing::TempDir() + "/gpubind-odd-types.xml";
  std::ofstream(path) << xml;
  auto loaded = load_topology_xml(path, SitePolicy::default_nic_patterns());
  std::remove(path.c_str());
  ASSERT_TRUE(loaded) << loaded.error().message;
  EXPECT_EQ(loaded->gpus.size(), fixture("a100-pcionly").gpus.size());
}

TEST(GpuOrder, ReordersByBusIdOrIndex) {
  Topology t = fixture("a100-pcionly");
  ASSERT_TRUE(apply_gpu_order(t, {"0000:c1:00.0", "81:00.0", "1", "0"}));
  EXPECT_EQ(t.gpus[0].pci_bus_id, "0000:c1:00.0");
  EXPECT_EQ(t.gpus[1].pci_bus_id, "0000:81:00.0");
  EXPECT_EQ(t.gpus[2].pci_bus_id, "0000:41:00.0");
  EXPECT_EQ(t.gpus[3].pci_bus_id, "0000:03:00.0");
  for (int i = 0; i < 4; ++i)
    EXPECT_EQ(t.gpus[i].index, i);
  EXPECT_EQ(t.gpus[0].locality.numa_index, 0);
}

TEST(GpuOrder, PartitionsShareABusIdAndAreTakenInTurn) {
  Topology t = fixture("mi300a-tpx");
  std::vector<std::string> order;
  for (int i = 11; i >= 0; --i)
    order.push_back(t.gpus[i].pci_bus_id);
  ASSERT_TRUE(apply_gpu_order(t, order));
  EXPECT_EQ(t.gpus[0].pci_bus_id, "0003:02:00.0");
  EXPECT_EQ(t.gpus[0].os_name, "rsmi9");
}

TEST(GpuOrder, RejectsBadOrders) {
  Topology t = fixture("a100-pcionly");
  auto check = [&](std::vector<std::string> order, const std::string& text) {
    Topology copy = t;
    auto status = apply_gpu_order(copy, order);
    ASSERT_FALSE(status);
    EXPECT_NE(status.error().message.find(text), std::string::npos) << status.error().message;
    EXPECT_EQ(copy.gpus[0].pci_bus_id, t.gpus[0].pci_bus_id) << "nothing half-applied";
  };
  check({"0", "1", "2"}, "names 3 GPUs but the node has 4");
  check({"0", "1", "2", "9"}, "'9' is out of range");
  check({"0", "1", "2", "2"}, "names GPU '2' twice");
  check({"0", "1", "2", "0000:ff:00.0"}, "'0000:ff:00.0' matches no GPU");
}

}  // namespace
}  // namespace gpubind
