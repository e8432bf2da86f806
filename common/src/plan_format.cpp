#include "gpubind/plan_format.h"

#include <algorithm>
#include <sstream>

#include "gpubind/json.h"

namespace gpubind {
namespace {

void write_locality(JsonWriter& json, const Locality& loc) {
  json.begin_object();
  json.key("kind").value(locality_kind_name(loc.kind));
  json.key("index").value(locality_index(loc));
  json.key("cpus").value(loc.cpus.to_list());
  json.key("l3").value(loc.l3);
  json.key("numa").value(loc.numa);
  json.key("package").value(loc.package);
  json.end_object();
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
  JsonWriter json;
  json.begin_object().key("tasks").begin_array();
  for (const TaskPlan& task : plan.tasks) {
    json.begin_object();
    json.key("rank").value(task.rank);
    json.key("cpus").value(task.cpus.to_list());
    json.key("cpu_mask").value(task.cpus.to_mask());
    json.key("ncores").value(task.ncores);
    json.key("gpus").begin_array();
    for (const TaskGpu& gpu : task.gpus) {
      json.begin_object();
      json.key("index").value(gpu.step_index);
      json.key("pci").value(gpu.pci);
      json.key("node_index").value(gpu.gpu);
      json.key("token").value(gpu.token);
      json.key("vendor").value(vendor_name(gpu.vendor));
      if (gpu.tile >= 0) json.key("tile").value(gpu.tile);
      json.end_object();
    }
    json.end_array();
    if (task.nic >= 0) {
      json.key("nic").value(task.nic_name);
    } else {
      json.key("nic").null();
    }
    json.key("numa").value(task.numa);
    json.key("l3").value(task.l3);
    json.key("env").begin_object();
    for (const EnvVar& var : task.env)
      json.key(var.name).value(var.value);
    json.end_object();
    json.key("env_only_if_unset").begin_array();
    for (const EnvVar& var : task.env) {
      if (var.only_if_unset) json.value(var.name);
    }
    json.end_array();
    json.end_object();
  }
  json.end_array().key("warnings").begin_array();
  for (const std::string& warning : plan.warnings)
    json.value(warning);
  json.end_array().end_object();
  return json.str() + "\n";
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
                    std::to_string(task.ncores), task.l3 >= 0 ? std::to_string(task.l3) : "-",
                    task.numa >= 0 ? std::to_string(task.numa) : "-", gpus.empty() ? "-" : gpus,
                    task.nic >= 0 ? task.nic_name : "-"});
  }
  std::string out = format_table(rows);
  for (const std::string& warning : plan.warnings)
    out += "warning: " + warning + "\n";
  return out;
}

std::string topology_to_json(const Topology& topology) {
  JsonWriter json;
  json.begin_object();
  json.key("source").value(topology.source);
  json.key("hostname").value(topology.hostname);
  json.key("packages").value(topology.package_count);
  json.key("numa_nodes").value(topology.numa_count);
  json.key("l3_caches").value(topology.l3_count);
  json.key("cores").value(static_cast<int>(topology.cores.size()));
  json.key("pus").value(topology.all_pus().count());
  json.key("gpus").begin_array();
  for (const Gpu& gpu : topology.gpus) {
    json.begin_object();
    json.key("index").value(gpu.index);
    json.key("pci").value(gpu.pci_bus_id);
    json.key("vendor").value(vendor_name(gpu.vendor));
    json.key("model").value(gpu.model);
    json.key("os_name").value(gpu.os_name);
    json.key("partition").value(gpu.partition);
    json.key("partitions").value(gpu.partitions);
    json.key("tiles").value(gpu.tiles);
    json.key("locality");
    write_locality(json, gpu.locality);
    json.end_object();
  }
  json.end_array().key("nics").begin_array();
  for (const Nic& nic : topology.nics) {
    json.begin_object();
    json.key("index").value(nic.index);
    json.key("name").value(nic.name);
    json.key("netdev").value(nic.netdev);
    json.key("rdma").value(nic.rdma);
    json.key("pci").value(nic.pci_bus_id);
    json.key("kind").value(nic_kind_name(nic.kind));
    json.key("locality");
    write_locality(json, nic.locality);
    json.end_object();
  }
  json.end_array().end_object();
  return json.str() + "\n";
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
  std::vector<std::vector<std::string>> nics = {
      {"NIC", "name", "netdev", "rdma", "kind", "PCI", "locality", "CPUs"}};
  for (const Nic& nic : topology.nics) {
    nics.push_back({std::to_string(nic.index), nic.name, nic.netdev.empty() ? "-" : nic.netdev,
                    nic.rdma.empty() ? "-" : nic.rdma, nic_kind_name(nic.kind),
                    nic.pci_bus_id.empty() ? "-" : nic.pci_bus_id, describe_locality(nic.locality),
                    nic.locality.cpus.to_list()});
  }
  out << (topology.nics.empty() ? "No high-speed NICs matched the patterns.\n"
                                : format_table(nics));
  return out.str();
}

}  // namespace gpubind
