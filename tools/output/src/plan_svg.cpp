// Lays the node out as nested boxes (package > NUMA > L3 > cores) measured bottom-up, attaches
// each GPU and NIC to the smallest box its locality names, then draws it all in one pass.
#include "gpubind/output/plan_svg.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <sstream>

namespace gpubind {
namespace {

constexpr double kCellW = 30, kCellH = 22, kGap = 4, kPad = 8, kHeader = 18, kChipH = 18;
constexpr double kMargin = 16, kTitleH = 30, kLegendRowH = 18, kCharW = 6.4;
constexpr int kLegendRowsPerColumn = 32;
const char* const kReservedFill = "url(#reserved)";
const char* const kFreeFill = "#ffffff";

std::string escape(const std::string& text) {
  std::string out;
  for (const char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        // XML 1.0 forbids most control characters even escaped.
        if (static_cast<unsigned char>(c) >= 0x20 || c == '\t' || c == '\n') out += c;
    }
  }
  return out;
}

std::string number(double value) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.1f", value);
  return buffer;
}

std::string join(const std::vector<int>& values) {
  std::string out;
  for (const int value : values)
    out += (out.empty() ? "" : ",") + std::to_string(value);
  return out;
}

double text_width(const std::string& text) {
  return static_cast<double>(text.size()) * kCharW;
}

struct Device {
  bool is_gpu = true;
  int index = 0;
};

struct Box {
  enum class Kind { kMachine, kPackage, kNuma, kL3 } kind = Kind::kMachine;
  int index = -1;
  int package = -1, numa = -1;  // where an L3 or NUMA box sits, to attach devices
  std::string label;
  std::vector<Box> children;
  std::vector<int> cores;  // L3 boxes: indices into Topology::cores
  std::vector<Device> devices;
  int per_row = 1;  // children (or core columns) per row
  double w = 0, h = 0;
};

// Who uses each PU, GPU and NIC: task ranks in plan order.
struct Usage {
  std::map<int, std::vector<int>> pu_tasks, gpu_tasks, nic_tasks;

  explicit Usage(const Plan& plan) {
    for (const TaskPlan& task : plan.tasks) {
      task.cpus.for_each([&](int pu) { pu_tasks[pu].push_back(task.rank); });
      std::set<int> gpus;
      for (const TaskGpu& gpu : task.gpus)
        gpus.insert(gpu.node_index);
      for (const int gpu : gpus)
        gpu_tasks[gpu].push_back(task.rank);
      if (task.nic_index >= 0) nic_tasks[task.nic_index].push_back(task.rank);
    }
  }
  static const std::vector<int>& of(const std::map<int, std::vector<int>>& map, int key) {
    static const std::vector<int> none;
    const auto found = map.find(key);
    return found == map.end() ? none : found->second;
  }
};

int row_length(size_t children, Box::Kind kind) {
  if (kind == Box::Kind::kMachine) return 2;  // packages side by side, two a row
  if (kind == Box::Kind::kPackage)            // NUMA nodes in a square-ish grid
    return std::max(1, static_cast<int>(std::ceil(std::sqrt(static_cast<double>(children)))));
  return std::min<int>(std::max<size_t>(children, 1), 4);  // L3s in a NUMA node, four a row
}

int core_columns(size_t cores) {
  return cores <= 32 ? std::min<int>(cores, 8) : 16;
}

// package > NUMA > L3 > cores, in topology order. An L3 spanning NUMA nodes appears in each.
Box build_tree(const Topology& topology) {
  Box machine;
  machine.label = "Node" + (topology.hostname.empty() ? "" : " " + topology.hostname);
  std::map<int, size_t> package_at;
  std::map<std::pair<int, int>, size_t> numa_at;
  std::map<std::tuple<int, int, int>, size_t> l3_at;
  for (size_t c = 0; c < topology.cores.size(); ++c) {
    const Core& core = topology.cores[c];
    if (!package_at.count(core.package_index)) {
      package_at[core.package_index] = machine.children.size();
      Box package;
      package.kind = Box::Kind::kPackage;
      package.index = package.package = core.package_index;
      package.label = "Package " + std::to_string(core.package_index);
      machine.children.push_back(package);
    }
    Box& package = machine.children[package_at[core.package_index]];
    const auto numa_key = std::make_pair(core.package_index, core.numa_index);
    if (!numa_at.count(numa_key)) {
      numa_at[numa_key] = package.children.size();
      Box numa;
      numa.kind = Box::Kind::kNuma;
      numa.index = numa.numa = core.numa_index;
      numa.package = core.package_index;
      numa.label = "NUMA " + std::to_string(core.numa_index);
      package.children.push_back(numa);
    }
    Box& numa = package.children[numa_at[numa_key]];
    const auto l3_key = std::make_tuple(core.package_index, core.numa_index, core.l3_index);
    if (!l3_at.count(l3_key)) {
      l3_at[l3_key] = numa.children.size();
      Box l3;
      l3.kind = Box::Kind::kL3;
      l3.index = core.l3_index;
      l3.package = core.package_index;
      l3.numa = core.numa_index;
      l3.label = core.l3_index >= 0 ? "L3 " + std::to_string(core.l3_index) : "cores";
      numa.children.push_back(l3);
    }
    numa.children[l3_at[l3_key]].cores.push_back(static_cast<int>(c));
  }
  return machine;
}

Box* find_box(Box& box, Box::Kind kind, int index) {
  if (box.kind == kind && box.index == index) return &box;
  for (Box& child : box.children) {
    if (Box* found = find_box(child, kind, index)) return found;
  }
  return nullptr;
}

// The smallest drawn box the device's locality names; the machine when none does.
void attach(Box& machine, const Locality& locality, Device device) {
  Box* target = nullptr;
  switch (locality.kind) {
    case LocalityKind::kL3:
      target = find_box(machine, Box::Kind::kL3, locality.l3_index);
      break;
    case LocalityKind::kNuma:
      target = find_box(machine, Box::Kind::kNuma, locality.numa_index);
      break;
    case LocalityKind::kPackage:
      target = find_box(machine, Box::Kind::kPackage, locality.package_index);
      break;
    case LocalityKind::kMachine:
    case LocalityKind::kUnknown:
      break;
  }
  (target ? *target : machine).devices.push_back(device);
}

std::string gpu_label(const Gpu& gpu) {
  std::string label = "GPU " + std::to_string(gpu.index);
  if (!gpu.pci_bus_id.empty()) label += " · " + gpu.pci_bus_id;
  if (gpu.partitions > 1)
    label += " · part " + std::to_string(gpu.partition + 1) + "/" + std::to_string(gpu.partitions);
  if (gpu.tiles > 0) label += " · " + std::to_string(gpu.tiles) + " tiles";
  return label;
}

std::string nic_label(const Nic& nic) {
  std::string label = "NIC " + nic.name;
  const std::string& other = nic.name == nic.netdev ? nic.rdma : nic.netdev;
  if (!other.empty() && other != nic.name) label += " (" + other + ")";
  return label;
}

class Drawing {
 public:
  Drawing(const Topology& topology, const CpuSet& reserved, const Plan& plan)
      : topology_(topology), reserved_(reserved), usage_(plan) {}

  void measure(Box& box) const {
    double content_w = 0, content_h = 0;
    if (box.kind == Box::Kind::kL3) {
      const int columns = core_columns(box.cores.size());
      const int rows = (static_cast<int>(box.cores.size()) + columns - 1) / columns;
      box.per_row = columns;
      content_w = columns * kCellW + (columns - 1) * kGap;
      content_h = rows * kCellH + (rows - 1) * kGap;
    } else {
      box.per_row = row_length(box.children.size(), box.kind);
      double row_w = 0, row_h = 0;
      for (size_t i = 0; i < box.children.size(); ++i) {
        measure(box.children[i]);
        if (i % box.per_row == 0 && i > 0) {
          content_h += row_h + kGap;
          row_w = row_h = 0;
        }
        row_w += (row_w > 0 ? kGap : 0) + box.children[i].w;
        row_h = std::max(row_h, box.children[i].h);
        content_w = std::max(content_w, row_w);
      }
      content_h += row_h;
    }
    for (const Device& device : box.devices) {
      content_w = std::max(content_w, text_width(device_label(device)) + 12);
      content_h += kGap + kChipH;
    }
    content_w = std::max(content_w, text_width(box.label));
    box.w = content_w + 2 * kPad;
    box.h = kHeader + content_h + kPad;
  }

  void draw(const Box& box, double x, double y, std::ostringstream& out) const {
    static const std::map<Box::Kind, std::pair<const char*, const char*>> kStyle = {
        {Box::Kind::kMachine, {"machine", "#fafafa"}},
        {Box::Kind::kPackage, {"package", "#eeeeee"}},
        {Box::Kind::kNuma, {"numa", "#e3ebf5"}},
        {Box::Kind::kL3, {"l3", "#fdfdf5"}}};
    const auto& [css, fill] = kStyle.at(box.kind);
    out << "<g class=\"" << css << "\" data-index=\"" << box.index << "\">\n";
    out << "<rect x=\"" << number(x) << "\" y=\"" << number(y) << "\" width=\"" << number(box.w)
        << "\" height=\"" << number(box.h) << "\" rx=\"4\" fill=\"" << fill
        << "\" stroke=\"#777\"/>\n";
    out << "<text x=\"" << number(x + kPad) << "\" y=\"" << number(y + 13) << "\" class=\"label\">"
        << escape(box.label) << "</text>\n";
    double cursor_y = y + kHeader;
    if (box.kind == Box::Kind::kL3) {
      for (size_t i = 0; i < box.cores.size(); ++i) {
        const int column = static_cast<int>(i) % box.per_row,
                  row = static_cast<int>(i) / box.per_row;
        draw_core(box.cores[i], x + kPad + column * (kCellW + kGap),
                  cursor_y + row * (kCellH + kGap), out);
      }
      const int rows = (static_cast<int>(box.cores.size()) + box.per_row - 1) / box.per_row;
      cursor_y += rows * kCellH + (rows - 1) * kGap;
    } else {
      double row_x = x + kPad, row_h = 0;
      for (size_t i = 0; i < box.children.size(); ++i) {
        if (i % box.per_row == 0 && i > 0) {
          cursor_y += row_h + kGap;
          row_x = x + kPad;
          row_h = 0;
        }
        draw(box.children[i], row_x, cursor_y, out);
        row_x += box.children[i].w + kGap;
        row_h = std::max(row_h, box.children[i].h);
      }
      cursor_y += row_h;
    }
    for (const Device& device : box.devices) {
      cursor_y += kGap;
      draw_device(device, x + kPad, cursor_y, box.w - 2 * kPad, out);
      cursor_y += kChipH;
    }
    out << "</g>\n";
  }

  std::string device_label(const Device& device) const {
    return device.is_gpu ? gpu_label(topology_.gpus[device.index])
                         : nic_label(topology_.nics[device.index]);
  }

 private:
  std::string pu_fill(int pu) const {
    const auto& tasks = Usage::of(usage_.pu_tasks, pu);
    if (!tasks.empty()) return task_colour(tasks.front());
    return reserved_.test(pu) ? kReservedFill : kFreeFill;
  }

  // One cell per core, split into a strip per hardware thread when its threads differ in owner.
  void draw_core(int core_index, double x, double y, std::ostringstream& out) const {
    const Core& core = topology_.cores[core_index];
    std::vector<int> tasks;
    bool reserved = false;
    std::vector<std::string> fills;
    for (const int pu : core.pus) {
      for (const int task : Usage::of(usage_.pu_tasks, pu)) {
        if (std::find(tasks.begin(), tasks.end(), task) == tasks.end()) tasks.push_back(task);
      }
      reserved = reserved || reserved_.test(pu);
      fills.push_back(pu_fill(pu));
    }
    const bool uniform = std::all_of(fills.begin(), fills.end(),
                                     [&](const std::string& fill) { return fill == fills[0]; });
    out << "<g class=\"core" << (reserved ? " reserved" : "") << "\" data-core=\"" << core.index
        << "\" data-pus=\"" << join(core.pus) << "\" data-tasks=\"" << join(tasks) << "\">";
    out << "<title>core " << core.index << ", PUs " << join(core.pus)
        << (tasks.empty() ? "" : ", task " + join(tasks)) << (reserved ? ", reserved" : "")
        << "</title>";
    const size_t strips = uniform ? 1 : fills.size();
    for (size_t s = 0; s < strips; ++s) {
      const double strip_w = kCellW / static_cast<double>(strips);
      out << "<rect x=\"" << number(x + s * strip_w) << "\" y=\"" << number(y) << "\" width=\""
          << number(strip_w) << "\" height=\"" << number(kCellH) << "\" fill=\"" << fills[s]
          << "\"/>";
    }
    out << "<rect x=\"" << number(x) << "\" y=\"" << number(y) << "\" width=\"" << number(kCellW)
        << "\" height=\"" << number(kCellH) << "\" fill=\"none\" stroke=\"#555\"/>";
    out << "<text x=\"" << number(x + kCellW / 2) << "\" y=\"" << number(y + 15)
        << "\" class=\"cpu\">" << (core.pus.empty() ? -1 : core.pus.front()) << "</text></g>\n";
  }

  // A chip per device, striped with the colours of the tasks that use it.
  void draw_device(const Device& device, double x, double y, double w,
                   std::ostringstream& out) const {
    const auto& tasks =
        Usage::of(device.is_gpu ? usage_.gpu_tasks : usage_.nic_tasks, device.index);
    out << "<g class=\"" << (device.is_gpu ? "gpu" : "nic") << "\" data-index=\"" << device.index
        << "\" data-tasks=\"" << join(tasks) << "\">";
    if (tasks.empty()) {
      out << "<rect x=\"" << number(x) << "\" y=\"" << number(y) << "\" width=\"" << number(w)
          << "\" height=\"" << number(kChipH) << "\" fill=\"" << kFreeFill << "\"/>";
    }
    for (size_t t = 0; t < tasks.size(); ++t) {
      const double strip_w = w / static_cast<double>(tasks.size());
      out << "<rect x=\"" << number(x + t * strip_w) << "\" y=\"" << number(y) << "\" width=\""
          << number(strip_w) << "\" height=\"" << number(kChipH) << "\" fill=\""
          << task_colour(tasks[t]) << "\"/>";
    }
    out << "<rect x=\"" << number(x) << "\" y=\"" << number(y) << "\" width=\"" << number(w)
        << "\" height=\"" << number(kChipH) << "\" rx=\"3\" fill=\"none\" stroke=\""
        << (device.is_gpu ? "#b03030" : "#3050b0") << "\" stroke-width=\"2\"/>";
    out << "<text x=\"" << number(x + 6) << "\" y=\"" << number(y + 13) << "\" class=\"device\">"
        << escape(device_label(device)) << "</text></g>\n";
  }

  const Topology& topology_;
  const CpuSet& reserved_;
  Usage usage_;
};

std::string legend_line(const TaskPlan& task) {
  std::string line = "rank " + std::to_string(task.rank) + " · CPUs " + task.cpus.to_list();
  for (const TaskGpu& gpu : task.gpus) {
    line += " · GPU " + gpu.token + (gpu.pci.empty() ? "" : " (" + gpu.pci + ")");
  }
  if (!task.nic_names.empty()) line += " · NIC " + task.nic_names;
  return line;
}

struct LegendEntry {
  std::string fill, text, css;
};

std::vector<LegendEntry> legend_entries(const Plan& plan, const CpuSet& reserved) {
  std::vector<LegendEntry> entries;
  for (const TaskPlan& task : plan.tasks)
    entries.push_back({task_colour(task.rank), legend_line(task), "task"});
  if (!reserved.empty())
    entries.push_back({kReservedFill, "reserved by the site policy: " + reserved.to_list(), "key"});
  entries.push_back({kFreeFill, "not used by the step", "key"});
  for (const std::string& warning : plan.warnings)
    entries.push_back({"", "warning: " + warning, "warning"});
  return entries;
}

}  // namespace

std::string task_colour(int rank) {
  static const char* const kPalette[] = {"#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2",
                                         "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"};
  constexpr int kPaletteSize = sizeof kPalette / sizeof kPalette[0];
  if (rank >= 0 && rank < kPaletteSize) return kPalette[rank];
  const double hue = std::fmod(std::abs(rank) * 137.508, 360.0);
  return "hsl(" + number(hue) + ",60%,62%)";
}

std::string plan_to_svg(const Topology& topology, const CpuSet& reserved, const Plan& plan,
                        const std::string& title) {
  Box machine = build_tree(topology);
  for (const Gpu& gpu : topology.gpus)
    attach(machine, gpu.locality, {true, gpu.index});
  for (size_t n = 0; n < topology.nics.size(); ++n)
    attach(machine, topology.nics[n].locality, {false, static_cast<int>(n)});
  const Drawing drawing(topology, reserved, plan);
  drawing.measure(machine);

  const std::vector<LegendEntry> legend = legend_entries(plan, reserved);
  double column_w = 0;
  for (const LegendEntry& entry : legend)
    column_w = std::max(column_w, text_width(entry.text) + 30);
  const int columns =
      (static_cast<int>(legend.size()) + kLegendRowsPerColumn - 1) / kLegendRowsPerColumn;
  const int rows = std::min<int>(legend.size(), kLegendRowsPerColumn);
  const double legend_y = kMargin + kTitleH + machine.h + kMargin;
  const double width =
      2 * kMargin + std::max({machine.w, columns * column_w, text_width(title) * 1.3});
  const double height = legend_y + rows * kLegendRowH + kMargin;

  std::ostringstream out;
  out << "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << number(width) << "\" height=\""
      << number(height) << "\" viewBox=\"0 0 " << number(width) << " " << number(height)
      << "\" font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\">\n"
      << "<defs><pattern id=\"reserved\" width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\" "
         "patternTransform=\"rotate(45)\"><rect width=\"6\" height=\"6\" fill=\"#d0d0d0\"/>"
         "<line x1=\"0\" y1=\"0\" x2=\"0\" y2=\"6\" stroke=\"#555\" stroke-width=\"2\"/>"
         "</pattern>\n<style>.label{font-size:11px;font-weight:bold;fill:#333}"
         ".cpu{font-size:10px;text-anchor:middle;fill:#111}.device{font-size:10px;fill:#111}"
         ".legend{font-size:11px;fill:#111}.title{font-size:16px;font-weight:bold}</style>"
         "</defs>\n"
      << "<rect width=\"100%\" height=\"100%\" fill=\"#ffffff\"/>\n"
      << "<text x=\"" << number(kMargin) << "\" y=\"" << number(kMargin + 16)
      << "\" class=\"title\">" << escape(title) << "</text>\n";
  drawing.draw(machine, kMargin, kMargin + kTitleH, out);
  out << "<g class=\"legend\">\n";
  for (size_t i = 0; i < legend.size(); ++i) {
    const double x = kMargin + static_cast<double>(i / kLegendRowsPerColumn) * column_w;
    const double y = legend_y + static_cast<double>(i % kLegendRowsPerColumn) * kLegendRowH;
    out << "<g class=\"" << legend[i].css << "\">";
    if (!legend[i].fill.empty()) {
      out << "<rect x=\"" << number(x) << "\" y=\"" << number(y) << "\" width=\"20\" height=\"13\" "
          << "fill=\"" << legend[i].fill << "\" stroke=\"#555\"/>";
    }
    out << "<text x=\"" << number(x + 26) << "\" y=\"" << number(y + 11) << "\" class=\"legend\">"
        << escape(legend[i].text) << "</text></g>\n";
  }
  out << "</g>\n</svg>\n";
  return out.str();
}

}  // namespace gpubind
