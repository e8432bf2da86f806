// The sysfs/procfs readers of live discovery, each on a small tree laid out as its kernel driver
// lays it out, and the loader's rules that use them.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "../support/fixtures.h"
#include "gpubind/discovery/fs_root.h"
#include "gpubind/discovery/gpu_drivers.h"
#include "gpubind/planner.h"
#include "gpubind/policy.h"
#include "gpubind/topology_hwloc.h"

namespace gpubind::discovery {
namespace {

namespace fs = std::filesystem;

// A scratch tree standing for the root of a node's file system.
class Tree {
 public:
  Tree() {
    char name[] = "/tmp/gpubind-tree-XXXXXX";
    root_ = mkdtemp(name);
  }
  ~Tree() { fs::remove_all(root_); }
  const std::string& root() const { return root_; }

  void file(const std::string& path, const std::string& text) const {
    fs::create_directories(fs::path(root_ + path).parent_path());
    std::ofstream(root_ + path) << text;
  }
  void folder(const std::string& path) const { fs::create_directories(root_ + path); }

 private:
  std::string root_;
};

// ---- NVIDIA: /proc/driver/nvidia/gpus/<bus id>/information ---------------------------------

// As nv-procfs.c prints it.
constexpr const char* kNvidiaInformation =
    "Model: \t\t NVIDIA H100 80GB HBM3\n"
    "IRQ:   \t\t 35\n"
    "GPU UUID: \t GPU-8c2f0e7a-3f55-5e0d-a4b2-69e0c3a1d5f7\n"
    "Video BIOS: \t 96.00.99.00.01\n"
    "Bus Type: \t PCIe\n"
    "DMA Size: \t 52 bits\n"
    "DMA Mask: \t 0xfffffffffffff\n"
    "Bus Location: \t 0000:18:00.0\n"
    "Device Minor: \t 3\n"
    "GPU Firmware: \t 550.54.15\n"
    "GPU Excluded:\t No\n";

TEST(NvidiaProcfs, ReadsUuidModelAndMinor) {
  Tree tree;
  tree.file("/proc/driver/nvidia/gpus/0000:18:00.0/information", kNvidiaInformation);
  const auto info = read_nvidia_gpu_info(tree.root(), "0000:18:00.0");
  ASSERT_TRUE(info);
  EXPECT_EQ(info->uuid, "GPU-8c2f0e7a-3f55-5e0d-a4b2-69e0c3a1d5f7");
  EXPECT_EQ(info->model, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(info->minor, 3);
}

TEST(AmdProductName, TheFruNameTrimmedOrNothing) {
  Tree tree;
  EXPECT_EQ(read_amd_product_name(tree.root(), "0000:c1:00.0"), "");
  tree.file("/sys/bus/pci/devices/0000:c1:00.0/product_name", "AMD Instinct MI250X\n");
  EXPECT_EQ(read_amd_product_name(tree.root(), "0000:c1:00.0"), "AMD Instinct MI250X");
}

TEST(NvidiaProcfs, NoFileOrNoUuidIsNothing) {
  Tree tree;
  EXPECT_FALSE(read_nvidia_gpu_info(tree.root(), "0000:18:00.0"));
  tree.file("/proc/driver/nvidia/gpus/0000:18:00.0/information", "Model: \t\t X\n");
  EXPECT_FALSE(read_nvidia_gpu_info(tree.root(), "0000:18:00.0"));
}

// ---- NVIDIA: /proc/driver/nvidia/capabilities/gpu<minor>/mig -------------------------------

// As the driver lays it out (os.c, nv-caps.c): gi<G>/access for each GPU instance,
// gi<G>/ci<C>/access for each of its compute instances; the node-wide config and monitor
// capabilities in capabilities/mig.
TEST(NvidiaMig, CountsComputeInstancesOfTheGpusOwnMinor) {
  Tree tree;
  const std::string mig = "/proc/driver/nvidia/capabilities/gpu2/mig";
  tree.file("/proc/driver/nvidia/capabilities/mig/config", "DeviceFileMinor: 1\n");
  tree.file("/proc/driver/nvidia/capabilities/mig/monitor", "DeviceFileMinor: 2\n");
  for (const char* instance : {"/gi1/ci0", "/gi2/ci0", "/gi2/ci1"})
    tree.file(mig + instance + "/access", "DeviceFileMinor: 7\n");
  tree.file(mig + "/gi1/access", "DeviceFileMinor: 6\n");
  tree.folder(mig + "/gi9");  // a GPU instance without compute instances: no MIG device
  tree.file("/proc/driver/nvidia/capabilities/gpu3/mig/gi1/ci0/access", "");
  EXPECT_EQ(count_nvidia_mig_instances(tree.root(), 2), 3);
  EXPECT_EQ(count_nvidia_mig_instances(tree.root(), 3), 1);
  EXPECT_EQ(nvidia_mig_folder(2), mig);
}

TEST(NvidiaMig, NoFolderOrUnknownMinorIsNone) {
  Tree tree;
  EXPECT_EQ(count_nvidia_mig_instances(tree.root(), 0), 0);
  tree.folder("/proc/driver/nvidia/capabilities/gpu0/mig");  // MIG off: the folder is there
  EXPECT_EQ(count_nvidia_mig_instances(tree.root(), 0), 0);
  EXPECT_EQ(count_nvidia_mig_instances(tree.root(), -1), 0);
}

TEST(NvidiaMig, OnlyGiAndCiFoldersWithNumbersCount) {
  Tree tree;
  const std::string mig = "/proc/driver/nvidia/capabilities/gpu0/mig";
  tree.folder(mig + "/gi1/ci0");
  tree.folder(mig + "/gi1/ci");       // no number
  tree.folder(mig + "/gi1/cix1");     // not digits after the prefix
  tree.folder(mig + "/gi1/ci1.old");  // digits, then more
  tree.file(mig + "/gi1/ci2", "");    // a file, not a folder
  tree.folder(mig + "/gix/ci0");      // not a GPU instance
  tree.file(mig + "/gi3", "");        // a file named like a GPU instance
  tree.folder(mig + "/config/ci0");   // beside the GPU instances
  // The static table of every instance that could exist is no count.
  tree.file("/proc/driver/nvidia-caps/mig-minors",
            "gpu0/gi1/access 3\ngpu0/gi1/ci0/access 4\ngpu0/gi1/ci1/access 5\n");
  EXPECT_EQ(count_nvidia_mig_instances(tree.root(), 0), 1);
}

// ---- Intel: i915 gt folders, xe tile folders, the PCI device id -----------------------------

TEST(IntelTiles, I915CountsTheCardsGtFolders) {
  Tree tree;
  tree.folder("/sys/bus/pci/devices/0000:18:00.0/drm/card1/gt/gt0");
  tree.folder("/sys/bus/pci/devices/0000:18:00.0/drm/card1/gt/gt1");
  tree.folder("/sys/bus/pci/devices/0000:18:00.0/drm/renderD129");
  const IntelTiles tiles = read_intel_tiles(tree.root(), "0000:18:00.0", 0x0bd6);
  EXPECT_EQ(tiles.tiles, 2);
  EXPECT_NE(tiles.evidence.find("i915"), std::string::npos) << tiles.evidence;
  EXPECT_TRUE(tiles.warning.empty());
}

TEST(IntelTiles, XeCountsTileFoldersNotGts) {
  Tree tree;
  // xe numbers GTs device-wide and adds a media GT per tile: tiles are what count.
  for (const char* gt : {"tile0/gt0", "tile0/gt1", "tile1/gt2", "tile1/gt3"})
    tree.folder(std::string("/sys/bus/pci/devices/0000:42:00.0/") + gt);
  const IntelTiles tiles = read_intel_tiles(tree.root(), "0000:42:00.0", 0x0bd6);
  EXPECT_EQ(tiles.tiles, 2);
  EXPECT_NE(tiles.evidence.find("xe"), std::string::npos) << tiles.evidence;
}

TEST(IntelTiles, OneTileIsNoSubDevice) {
  Tree tree;
  tree.folder("/sys/bus/pci/devices/0000:18:00.0/drm/card0/gt/gt0");
  EXPECT_EQ(read_intel_tiles(tree.root(), "0000:18:00.0", 0x0bda).tiles, 0);
}

TEST(IntelTiles, WithoutDriverFoldersThePciDeviceIdDecidesAndWarns) {
  Tree tree;
  const IntelTiles max1550 = read_intel_tiles(tree.root(), "0000:18:00.0", 0x0bd5);
  EXPECT_EQ(max1550.tiles, 2);
  EXPECT_NE(max1550.warning.find("0x0bd5"), std::string::npos) << max1550.warning;
  EXPECT_EQ(read_intel_tiles(tree.root(), "0000:18:00.0", 0x0bda).tiles, 0);  // Max 1100
  const IntelTiles flex = read_intel_tiles(tree.root(), "0000:18:00.0", 0x56c0);
  EXPECT_EQ(flex.tiles, 0);
  EXPECT_TRUE(flex.warning.empty());
}

// ---- AMD: KFD topology and amdgpu's partition files -----------------------------------------

// A KFD node's properties as kfd_topology.c prints them (the keys the reader uses and a few).
std::string kfd_properties(int simds, unsigned location_id, unsigned domain) {
  return "cpu_cores_count " + std::to_string(simds ? 0 : 24) + "\nsimd_count " +
         std::to_string(simds) + "\nmem_banks_count 1\nvendor_id 4098\ndevice_id 29856\n" +
         "location_id " + std::to_string(location_id) + "\ndomain " + std::to_string(domain) +
         "\ndrm_render_minor 128\n";
}

void add_kfd_node(const Tree& tree, int node, int simds, unsigned location_id, unsigned domain) {
  const std::string path = "/sys/class/kfd/kfd/topology/nodes/" + std::to_string(node);
  tree.file(path + "/properties", kfd_properties(simds, location_id, domain));
  tree.file(path + "/gpu_id", simds ? "4242\n" : "0\n");
}

TEST(KfdTopology, LeavesCpuNodesOutAndReadsLocations) {
  Tree tree;
  add_kfd_node(tree, 0, 0, 0, 0);
  add_kfd_node(tree, 1, 228, 0x0200, 1);
  const auto nodes = read_kfd_gpu_nodes(tree.root());
  ASSERT_EQ(nodes.size(), 1u);
  EXPECT_EQ(nodes[0].node, 1);
  EXPECT_EQ(nodes[0].domain, 1u);
  EXPECT_EQ(nodes[0].location_id, 0x0200u);
}

TEST(KfdTopology, PartitionsInTheFunctionBitsBelongToTheirDevice) {
  // Kernels that OR the partition's node id into the location (kfd_topology_add_device).
  Tree tree;
  add_kfd_node(tree, 0, 0, 0, 0);
  for (unsigned p = 0; p < 3; ++p)
    add_kfd_node(tree, 1 + static_cast<int>(p), 76, 0x0200 | p, 1);  // 0001:02:00.0
  for (unsigned p = 0; p < 3; ++p)
    add_kfd_node(tree, 4 + static_cast<int>(p), 76, 0x0200 | p, 2);  // 0002:02:00.0
  const auto by_device =
      kfd_nodes_by_device(read_kfd_gpu_nodes(tree.root()), {"0001:02:00.0", "0002:02:00.0"});
  ASSERT_EQ(by_device.size(), 2u);
  EXPECT_EQ(by_device.at("0001:02:00.0"), (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(by_device.at("0002:02:00.0"), (std::vector<int>{4, 5, 6}));
}

TEST(KfdTopology, PartitionsInTheHighBitsBelongToTheirDeviceInPartitionOrder) {
  // Kernels that put it in location_id[31:28]; nodes listed out of partition order.
  Tree tree;
  add_kfd_node(tree, 1, 38, (2u << 28) | 0xc100, 0);
  add_kfd_node(tree, 2, 38, (0u << 28) | 0xc100, 0);
  add_kfd_node(tree, 3, 38, (1u << 28) | 0xc100, 0);
  add_kfd_node(tree, 4, 38, 0xc600, 0);  // another device on another bus
  const auto by_device =
      kfd_nodes_by_device(read_kfd_gpu_nodes(tree.root()), {"0000:c1:00.0", "0000:c6:00.0"});
  EXPECT_EQ(by_device.at("0000:c1:00.0"), (std::vector<int>{2, 3, 1}));
  EXPECT_EQ(by_device.at("0000:c6:00.0"), (std::vector<int>{4}));
}

TEST(AmdPartitioning, KfdNodesCountThePartitionsAndTheModesAreRead) {
  Tree tree;
  tree.file("/sys/bus/pci/devices/0001:02:00.0/current_compute_partition", "TPX\n");
  tree.file("/sys/bus/pci/devices/0001:02:00.0/current_memory_partition", "NPS1\n");
  const AmdPartitioning parts =
      read_amd_partitioning(tree.root(), "0001:02:00.0", 0x74a0, {1, 2, 3});
  EXPECT_EQ(parts.partitions, 3);
  EXPECT_EQ(parts.compute_mode, "TPX");
  EXPECT_EQ(parts.memory_mode, "NPS1");
  EXPECT_TRUE(parts.warning.empty());
}

TEST(AmdPartitioning, WithoutKfdTheModeGivesTheCountWithAWarning) {
  Tree tree;
  tree.file("/sys/bus/pci/devices/0000:05:00.0/current_compute_partition", "CPX\n");
  const AmdPartitioning mi300x = read_amd_partitioning(tree.root(), "0000:05:00.0", 0x74a1, {});
  EXPECT_EQ(mi300x.partitions, 8);
  EXPECT_NE(mi300x.warning.find("KFD"), std::string::npos) << mi300x.warning;
  const AmdPartitioning mi300a = read_amd_partitioning(tree.root(), "0000:05:00.0", 0x74a0, {});
  EXPECT_EQ(mi300a.partitions, 6);
  // CPX on a device whose XCD count is unknown: one GPU, said so.
  const AmdPartitioning unknown = read_amd_partitioning(tree.root(), "0000:05:00.0", 0x7777, {});
  EXPECT_EQ(unknown.partitions, 1);
  EXPECT_FALSE(unknown.warning.empty());
}

TEST(AmdPartitioning, SpxOrNoFilesIsOneGpuWithoutWarning) {
  Tree tree;
  EXPECT_EQ(read_amd_partitioning(tree.root(), "0000:05:00.0", 0x74a1, {}).partitions, 1);
  tree.file("/sys/bus/pci/devices/0000:05:00.0/current_compute_partition", "SPX\n");
  const AmdPartitioning spx = read_amd_partitioning(tree.root(), "0000:05:00.0", 0x74a1, {});
  EXPECT_EQ(spx.partitions, 1);
  EXPECT_TRUE(spx.warning.empty());
}

// ---- HWLOC_FSROOT ---------------------------------------------------------------------------

TEST(FsRoot, FollowsHwlocFsroot) {
  const char* saved = std::getenv("HWLOC_FSROOT");
  const std::string before = saved ? saved : "";
  setenv("HWLOC_FSROOT", "/srv/tree//", 1);
  EXPECT_EQ(fs_root(), "/srv/tree");
  setenv("HWLOC_FSROOT", "/", 1);
  EXPECT_EQ(fs_root(), "");
  unsetenv("HWLOC_FSROOT");
  EXPECT_EQ(fs_root(), "");
  if (saved) setenv("HWLOC_FSROOT", before.c_str(), 1);
}

}  // namespace
}  // namespace gpubind::discovery

namespace gpubind {
namespace {

// ---- CPU-less NUMA nodes --------------------------------------------------------------------

// GPUs and a NIC below CPU-less NUMA nodes (tests/fixtures/generate.py, cpuless_numa): each is
// local to the nearest NUMA node with CPUs on its own socket, never to the first L3.
TEST(CpuLessNuma, DevicesTakeTheNearestNumaNodeWithCpus) {
  const Topology& t = testing::fixture("cpuless-numa");
  ASSERT_EQ(t.gpus.size(), 2u);
  EXPECT_EQ(t.gpus[0].locality.cpus.to_list(), "0-7");
  // Socket 1 has two NUMA nodes with CPUs; the distance matrix puts NUMA 2 (CPUs 16-23) nearer.
  EXPECT_EQ(t.gpus[1].locality.cpus.to_list(), "16-23");
  EXPECT_EQ(t.gpus[1].locality.package_index, 1);
  EXPECT_NE(t.gpus[1].locality.basis.find("P#2"), std::string::npos) << t.gpus[1].locality.basis;
  ASSERT_EQ(t.nics.size(), 1u);
  EXPECT_EQ(t.nics[0].locality.cpus.to_list(), "16-23");
}

TEST(CpuLessNuma, TasksPreferTheirGpusNumaNodeByItsLinuxNumber) {
  const Topology& t = testing::fixture("cpuless-numa");
  // hwloc's logical order puts the CPU-less nodes between: Linux numbers are not indices here.
  EXPECT_EQ(t.numa_os_numbers, (std::vector<int>{0, 4, 1, 2, 5}));
  PlanRequest request;
  request.ntasks = 2;
  auto plan = make_plan(t, SitePolicy{}, request);
  ASSERT_TRUE(plan) << plan.error().message;
  EXPECT_EQ(plan->tasks[0].numa_node, 0);
  EXPECT_EQ(plan->tasks[1].numa_node, 2);  // NUMA node 2, hwloc's logical NUMA 3
  for (const TaskPlan& task : plan->tasks)
    EXPECT_NE(task.numa_node, 4) << "memory on a CPU-less node";
}

// ---- NVIDIA MIG on a node discovered live ---------------------------------------------------

#ifdef GPUBIND_MAKE_TREE
// tests/fsroot/specs/SPEC.json written as a tree (make_tree.py) and discovered live.
Topology live_from_spec(const std::string& spec) {
  const discovery::Tree tree;
  const std::string make = std::string(GPUBIND_MAKE_TREE) + " --spec " + GPUBIND_FSROOT_SPECS +
                           "/" + spec + ".json " + tree.root();
  EXPECT_EQ(std::system(make.c_str()), 0) << make;
  const char* saved = std::getenv("HWLOC_FSROOT");
  const std::string before = saved ? saved : "";
  setenv("HWLOC_FSROOT", tree.root().c_str(), 1);
  auto topology = load_topology_live(SitePolicy::default_nic_patterns());
  if (saved) {
    setenv("HWLOC_FSROOT", before.c_str(), 1);
  } else {
    unsetenv("HWLOC_FSROOT");
  }
  EXPECT_TRUE(topology) << topology.error().message;
  return topology ? *topology : Topology{};
}

// Slurm's indices count MIG instances GPU by GPU in PCI order: 0-2 are GPU 2's, 3-4 GPU 5's.
// dgx-h100-mig: MIG on GPU 2 (3 instances, NUMA 0) and GPU 5 (2 instances, NUMA 1).
TEST(LiveMig, AStepOfMigInstancesIsPlacedNearTheirParentGpus) {
  const Topology t = live_from_spec("dgx-h100-mig");
  ASSERT_EQ(t.gpus.size(), 8u);
  for (const Gpu& gpu : t.gpus)
    EXPECT_EQ(gpu.mig_instances, gpu.index == 2 ? 3 : gpu.index == 5 ? 2 : 0) << gpu.index;
  PlanRequest request;
  request.ntasks = 2;
  request.unplaced_gpus = {"MIG-0c7f41d2-9a3b-5e6f-8d1c-2b4a6e8f0a11",
                           "MIG-5d2e8b19-47c6-5a0f-b3e1-9c8d7f6a5b22"};
  // Slurm numbers the 6 GPUs without MIG first, then GPU 2's 3 instances (6-8), GPU 5's 2 (9-10).
  request.unplaced_slurm_indices = {7, 9};
  const auto plan = make_plan(t, SitePolicy{}, request);
  ASSERT_TRUE(plan) << plan.error().message;
  EXPECT_TRUE(plan->warnings.empty()) << plan->warnings.front();
  const int parents[] = {2, 5};
  for (int r : {0, 1}) {
    const Gpu& parent = t.gpus[static_cast<size_t>(parents[r])];
    ASSERT_EQ(plan->tasks[r].gpus.size(), 1u);
    EXPECT_EQ(plan->tasks[r].gpus[0].node_index, parent.index) << "rank " << r;
    EXPECT_TRUE(plan->tasks[r].cpus.is_subset_of(parent.locality.cpus)) << "rank " << r;
    EXPECT_EQ(plan->tasks[r].numa_node, t.numa_os_number(parent.locality.numa_index));
  }
}
// Without GPU runtimes no OS device names the GPUs: the kernel driver's own name does (NVIDIA's
// procfs "Model", amdgpu's FRU product_name), not the PCI database's, which a bare node lacks.
TEST(LiveModel, TheKernelDriverNamesGpusNoRuntimeNamed) {
  const Topology nvidia = live_from_spec("dgx-h100");
  ASSERT_EQ(nvidia.gpus.size(), 8u);
  for (const Gpu& gpu : nvidia.gpus) {
    EXPECT_EQ(gpu.model, "NVIDIA H100 80GB HBM3") << gpu.pci_bus_id;
    EXPECT_NE(
        gpu.found_by.find("model from /proc/driver/nvidia/gpus/" + gpu.pci_bus_id + "/information"),
        std::string::npos)
        << gpu.found_by;
  }
  const Topology amd = live_from_spec("lumi-g-mi250x");
  ASSERT_FALSE(amd.gpus.empty());
  for (const Gpu& gpu : amd.gpus) {
    EXPECT_EQ(gpu.model, "AMD Instinct MI250X") << gpu.pci_bus_id;
    EXPECT_NE(gpu.found_by.find("product_name"), std::string::npos) << gpu.found_by;
  }
}
#endif

}  // namespace
}  // namespace gpubind
