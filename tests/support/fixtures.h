// Test helpers: fixture topologies loaded through the real hwloc loader, cached per process.
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <string>

#include "gpubind/policy.h"
#include "gpubind/topology_hwloc.h"

namespace gpubind::testing {

inline std::string fixture_path(const std::string& name) {
  return std::string(GPUBIND_FIXTURES) + "/" + name;
}

// Loads tests/fixtures/NAME.xml with the default NIC patterns (fails the test on error).
inline const Topology& fixture(const std::string& name) {
  static std::map<std::string, Topology> cache;
  auto it = cache.find(name);
  if (it == cache.end()) {
    auto loaded =
        load_topology_xml(fixture_path(name + ".xml"), SitePolicy::default_nic_patterns());
    if (!loaded) {
      ADD_FAILURE() << loaded.error().message;
      static const Topology empty;
      return empty;
    }
    it = cache.emplace(name, std::move(*loaded)).first;
  }
  return it->second;
}

// The LUMI-G site practice: first core of every CCD reserved, one thread per core.
inline SitePolicy lumi_policy() {
  SitePolicy policy;
  policy.reserve_first_core_per_l3 = true;
  policy.smt = 1;
  return policy;
}

}  // namespace gpubind::testing
