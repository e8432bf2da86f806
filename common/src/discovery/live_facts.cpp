#include "gpubind/discovery/live_facts.h"

#include "gpubind/discovery/fs_root.h"
#include "gpubind/parse.h"

namespace gpubind::discovery {
namespace {

// net/core/net-sysfs.c prints operstate from RFC 2863's names; drivers that do not report it say
// "unknown", and then the carrier is the link.
NicLink netdev_link(const std::string& root, const std::string& netdev) {
  const std::string base = "/sys/class/net/" + netdev;
  auto operstate = read_small_file(root, base + "/operstate");
  if (!operstate) return {netdev, "absent", false};
  NicLink link{netdev, trimmed(*operstate), false};
  link.up = link.state == "up";
  if (link.state == "unknown") {
    auto carrier = read_small_file(root, base + "/carrier");
    link.up = carrier && trimmed(*carrier) == "1";
  }
  return link;
}

// drivers/infiniband/core/sysfs.c: "4: ACTIVE" (ib_port_state); the name is kept.
std::vector<NicLink> rdma_links(const std::string& root, const std::string& rdma) {
  std::vector<NicLink> links;
  const std::string ports = "/sys/class/infiniband/" + rdma + "/ports";
  for (const std::string& port : list_folder(root, ports)) {
    auto state = read_small_file(root, ports + "/" + port + "/state");
    NicLink link{rdma + ":" + port, "unreadable", false};
    if (state) {
      const std::string text = trimmed(*state);
      const size_t colon = text.find(':');
      link.state = colon == std::string::npos ? text : trimmed(text.substr(colon + 1));
      link.up = link.state == "ACTIVE";
    }
    links.push_back(std::move(link));
  }
  return links;
}

}  // namespace

LiveFacts read_live_facts(const Topology& topology) {
  const std::string root = fs_root();
  LiveFacts facts;
  for (const Nic& nic : topology.nics) {
    std::vector<NicLink> links;
    if (!nic.netdev.empty()) links.push_back(netdev_link(root, nic.netdev));
    // Slingshot's cxi devices have no infiniband ports: their netdev (hsn*) is the link.
    if (!nic.rdma.empty()) {
      for (NicLink& link : rdma_links(root, nic.rdma))
        links.push_back(std::move(link));
    }
    facts.nic_links.push_back(std::move(links));
  }
  facts.numa_balancing_read = true;
  if (auto text = read_small_file(root, "/proc/sys/kernel/numa_balancing")) {
    if (auto value = parse_whole_number(trimmed(*text), 0, 1 << 20))
      facts.numa_balancing = static_cast<int>(*value);
  }
  return facts;
}

}  // namespace gpubind::discovery
