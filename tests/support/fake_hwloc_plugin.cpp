// A stand-in for hwloc's OpenCL plugin: where it is allowed to run, discovery gains a GPU OS
// device "opencl9d9" hanging off no PCI device, as the real plugin's do in a virtual machine. Built
// as hwloc_opencl.so and found through HWLOC_PLUGINS_PATH by tests/cli/discovery_test.sh.
#include <hwloc.h>
extern "C" {  // hwloc's plugin header declares C functions without C linkage guards
#include <hwloc/plugins.h>
}

#include <cstring>

namespace {

int discover(hwloc_backend* backend, hwloc_disc_status*) {
  hwloc_topology_t topology = backend->topology;
  hwloc_obj_t device = hwloc_alloc_setup_object(topology, HWLOC_OBJ_OS_DEVICE, HWLOC_UNKNOWN_INDEX);
  device->name = strdup("opencl9d9");
  device->attr->osdev.type = HWLOC_OBJ_OSDEV_COPROC;
  hwloc_obj_add_info(device, "Backend", "OpenCL");
  hwloc_obj_add_info(device, "OpenCLDeviceType", "GPU");
  hwloc_insert_object_by_parent(topology, hwloc_get_root_obj(topology), device);
  return 0;
}

hwloc_backend* instantiate(hwloc_topology* topology, hwloc_disc_component* component, unsigned,
                           const void*, const void*, const void*) {
  hwloc_backend* backend = hwloc_backend_alloc(topology, component);
  if (backend) backend->discover = discover;
  return backend;
}

hwloc_disc_component disc = {"opencl", HWLOC_DISC_PHASE_IO, 0, instantiate, 10, 1, nullptr};

}  // namespace

extern "C" {
extern const hwloc_component hwloc_opencl_component;
const hwloc_component hwloc_opencl_component = {HWLOC_COMPONENT_ABI,       nullptr, nullptr,
                                                HWLOC_COMPONENT_TYPE_DISC, 0,       &disc};
}
