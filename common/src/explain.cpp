#include "gpubind/explain.h"

namespace gpubind {

const char* nearness_name(Nearness nearness) {
  switch (nearness) {
    case Nearness::kPciSwitch:
      return "pci-switch";
    case Nearness::kL3:
      return "l3";
    case Nearness::kNuma:
      return "numa";
    case Nearness::kPackage:
      return "package";
    case Nearness::kMachine:
      return "machine";
    case Nearness::kNoAnchor:
      return "none";
    case Nearness::kUnknown:
      return "unknown";
  }
  return "machine";
}

const char* gpu_reason_name(GpuReason reason) {
  switch (reason) {
    case GpuReason::kRankOrder:
      return "rank-order";
    case GpuReason::kCoreShare:
      return "core-share";
    case GpuReason::kNearest:
      return "nearest";
    case GpuReason::kLeastLoaded:
      return "least-loaded";
    case GpuReason::kUnplaced:
      return "unplaced";
    case GpuReason::kFixed:
      return "fixed";
  }
  return "rank-order";
}

const char* core_source_name(CoreSource source) {
  switch (source) {
    case CoreSource::kGpuDomain:
      return "gpu-domain";
    case CoreSource::kNodeShare:
      return "node-share";
    case CoreSource::kSpare:
      return "spare";
    case CoreSource::kSpill:
      return "spill";
    case CoreSource::kFromRicher:
      return "from-richer";
    case CoreSource::kShared:
      return "shared";
    case CoreSource::kFixed:
      return "fixed";
  }
  return "gpu-domain";
}

}  // namespace gpubind
