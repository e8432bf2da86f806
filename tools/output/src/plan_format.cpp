#include "gpubind/output/plan_format.h"

#include <algorithm>
#include <sstream>

#include "gpubind/output/json.h"

namespace gpubind {
namespace {

using output::Json;

Json locality_json(const Locality& loc) {
  return Json{{"kind", locality_kind_name(loc.kind)},
              {"index", locality_index(loc)},
              {"cpus", loc.cpus.to_list()},
              {"l3_index", loc.l3_index},
              {"numa_index", loc.numa_index},
              {"package_index", loc.package_index},
              {"basis", loc.basis}};
}

// Pads cells into aligned columns.
std::string format_table(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> widths;
  for (const auto& row : rows) {
    widths.resize(std::max(widths.size(), row.size()), 0);
    for (size_t c = 0; c < row.size(); ++c)
      widths[c] = std::max(widths[c], row[c].size());
  }
  std::string out;
  for (const auto& row : rows) {
    std::string line;
    for (size_t c = 0; c < row.size(); ++c) {
      line += row[c];
      if (c + 1 < row.size()) line += std::string(widths[c] - row[c].size() + 2, ' ');
    }
    out += line + "\n";
  }
  return out;
}

std::string plural(int n, const char* word) {
  return std::to_string(n) + " " + word + (n == 1 ? "" : "s");
}

}  // namespace

std::string plan_to_json(const Plan& plan) {
  Json tasks = Json::array();
  for (const TaskPlan& task : plan.tasks) {
    Json gpus = Json::array();
    for (const TaskGpu& gpu : task.gpus) {
      Json entry{{"step_index", gpu.step_index},
                 {"pci", gpu.pci},
                 {"node_index", gpu.node_index},
                 {"token", gpu.token},
                 {"vendor", vendor_name(gpu.vendor)}};
      if (gpu.tile_index >= 0) entry["tile_index"] = gpu.tile_index;
      gpus.push_back(std::move(entry));
    }
    Json env = Json::object(), only_if_unset = Json::array();
    for (const EnvVar var : task.env) {
      const std::string name(var.name);
      env[name] = std::string(var.value);
      if (var.only_if_unset) only_if_unset.push_back(name);
    }
    tasks.push_back(Json{{"rank", task.rank},
                         {"cpus", task.cpus.to_list()},
                         {"cpu_mask", task.cpus.to_mask()},
                         {"ncores", task.ncores},
                         {"gpus", std::move(gpus)},
                         {"nic_index", task.nic_index},
                         {"nic_names", task.nic_index >= 0 ? Json(task.nic_names) : Json(nullptr)},
                         {"nic_indices", task.nic_indices},
                         {"numa_node", task.numa_node},
                         {"l3_index", task.l3_index},
                         {"env", std::move(env)},
                         {"env_only_if_unset", std::move(only_if_unset)}});
  }
  return output::to_text(Json{{"tasks", std::move(tasks)}, {"warnings", plan.warnings}}) + "\n";
}

std::string plan_to_table(const Plan& plan) {
  std::vector<std::vector<std::string>> rows = {
      {"rank", "cpus", "mask", "cores", "L3", "NUMA", "GPUs (PCI)", "NIC"}};
  for (const TaskPlan& task : plan.tasks) {
    std::string gpus;
    for (const TaskGpu& gpu : task.gpus) {
      if (!gpus.empty()) gpus += " ";
      gpus += gpu.pci.empty() ? gpu.token : gpu.token + " (" + gpu.pci + ")";
    }
    rows.push_back({std::to_string(task.rank), task.cpus.to_list(), task.cpus.to_mask(),
                    std::to_string(task.ncores),
                    task.l3_index >= 0 ? std::to_string(task.l3_index) : "-",
                    task.numa_node >= 0 ? std::to_string(task.numa_node) : "-",
                    gpus.empty() ? "-" : gpus, task.nic_index >= 0 ? task.nic_names : "-"});
  }
  std::string out = format_table(rows);
  for (const std::string& warning : plan.warnings)
    out += "warning: " + warning + "\n";
  return out;
}

std::string topology_to_json(const Topology& topology) {
  Json gpus = Json::array(), nics = Json::array();
  for (const Gpu& gpu : topology.gpus) {
    gpus.push_back(Json{{"index", gpu.index},
                        {"pci", gpu.pci_bus_id},
                        {"vendor", vendor_name(gpu.vendor)},
                        {"model", gpu.model},
                        {"os_name", gpu.os_name},
                        {"partition", gpu.partition},
                        {"partitions", gpu.partitions},
                        {"tiles", gpu.tiles},
                        {"uuid", gpu.uuid},
                        {"mig_instances", gpu.mig_instances},
                        {"found_by", gpu.found_by},
                        {"locality", locality_json(gpu.locality)}});
  }
  for (const Nic& nic : topology.nics) {
    nics.push_back(Json{{"index", nic.index},
                        {"name", nic.name},
                        {"netdev", nic.netdev},
                        {"rdma", nic.rdma},
                        {"rdma_port", nic.rdma_port},
                        {"pci", nic.pci_bus_id},
                        {"kind", nic_kind_name(nic.kind)},
                        {"locality", locality_json(nic.locality)}});
  }
  return output::to_text(Json{{"source", topology.source},
                              {"hostname", topology.hostname},
                              {"packages", topology.package_count},
                              {"numa_nodes", topology.numa_count},
                              {"l3_caches", topology.l3_count},
                              {"cores", topology.cores.size()},
                              {"pus", topology.all_pus().count()},
                              {"numa_os_numbers", topology.numa_os_numbers},
                              {"gpus", std::move(gpus)},
                              {"nics", std::move(nics)},
                              {"warnings", topology.warnings}}) +
         "\n";
}

std::string topology_to_text(const Topology& topology) {
  std::ostringstream out;
  out << "Node " << (topology.hostname.empty() ? "(unnamed)" : topology.hostname) << " from "
      << topology.source << ": " << plural(topology.package_count, "package") << ", "
      << plural(topology.numa_count, "NUMA node") << ", " << plural(topology.l3_count, "L3") << ", "
      << plural(static_cast<int>(topology.cores.size()), "core") << ", "
      << plural(topology.all_pus().count(), "PU") << "\n\n";
  std::vector<std::vector<std::string>> gpus = {
      {"GPU", "PCI", "vendor", "device", "partition", "tiles", "locality", "CPUs"}};
  for (const Gpu& gpu : topology.gpus) {
    gpus.push_back({std::to_string(gpu.index), gpu.pci_bus_id.empty() ? "-" : gpu.pci_bus_id,
                    vendor_name(gpu.vendor), gpu.os_name.empty() ? "(PCI)" : gpu.os_name,
                    std::to_string(gpu.partition + 1) + "/" + std::to_string(gpu.partitions),
                    std::to_string(gpu.tiles), describe_locality(gpu.locality),
                    gpu.locality.cpus.to_list()});
  }
  out << (topology.gpus.empty() ? "No GPUs.\n" : format_table(gpus)) << "\n";
  // What found each GPU and why its locality is what it is: an administrator's first question
  // when a GPU is missing, counted twice or placed on the wrong side of the node.
  for (const Gpu& gpu : topology.gpus) {
    out << "GPU " << gpu.index << ": " << (gpu.found_by.empty() ? "-" : gpu.found_by);
    if (!gpu.uuid.empty()) out << "; " << gpu.uuid;
    if (gpu.mig_instances > 0) out << "; " << plural(gpu.mig_instances, "MIG instance");
    if (!locality_known(gpu.locality)) {
      out << "; locality unknown (" << gpu.locality.basis << ")";
    } else if (!gpu.locality.basis.empty()) {
      out << "; locality from " << gpu.locality.basis;
    }
    out << "\n";
  }
  if (!topology.gpus.empty()) out << "\n";
  std::vector<std::vector<std::string>> nics = {
      {"NIC", "name", "netdev", "rdma", "port", "kind", "PCI", "locality", "CPUs"}};
  for (const Nic& nic : topology.nics) {
    const bool rdma = !nic.rdma.empty();
    nics.push_back({std::to_string(nic.index), nic.name, nic.netdev.empty() ? "-" : nic.netdev,
                    rdma ? nic.rdma : "-", rdma ? std::to_string(nic.rdma_port) : "-",
                    nic_kind_name(nic.kind), nic.pci_bus_id.empty() ? "-" : nic.pci_bus_id,
                    describe_locality(nic.locality), nic.locality.cpus.to_list()});
  }
  out << (topology.nics.empty() ? "No high-speed NICs matched the patterns.\n"
                                : format_table(nics));
  for (const Nic& nic : topology.nics) {
    if (!locality_known(nic.locality)) {
      out << "NIC " << nic.index << ": locality unknown (" << nic.locality.basis << ")\n";
    } else if (!nic.locality.basis.empty() && nic.locality.basis != "PCI local CPUs") {
      out << "NIC " << nic.index << ": locality from " << nic.locality.basis << "\n";
    }
  }
  for (const std::string& warning : topology.warnings)
    out << "warning: " << warning << "\n";
  return out.str();
}

}  // namespace gpubind
