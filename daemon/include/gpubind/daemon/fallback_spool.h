// The daemon's side of fallback reports (gpubind/protocol/fallback_reports.h): the spool folder
// it creates beside its socket, and the reports it counts and removes when its status is asked.
#pragma once

#include <array>
#include <cstdint>
#include <mutex>
#include <string>

#include "gpubind/protocol/fallback_reports.h"

namespace gpubind::v1 {
class GetStatusResponse;
}

namespace gpubind::daemon {

class FallbackSpool {
 public:
  // Reports read per call at most, so a flood of files cannot stall a status call for long; the
  // rest wait for the next call.
  static constexpr size_t kMaxPerCall = 10000;

  explicit FallbackSpool(std::string folder) : folder_(std::move(folder)) {}

  // Creates the folder (mode 0755: only the daemon's user may add files) unless it exists.
  // Under systemd the unit's RuntimeDirectory made it already.
  void prepare() const;
  // Counts and removes the reports waiting, then adds every reason's count to `response`. A
  // folder others may write to, or not a real folder, is not read: its files could be anyone's.
  void absorb_into(v1::GetStatusResponse& response);

  using Counts = std::array<uint64_t, protocol::kFallbackReasons.size()>;
  Counts absorb();

 private:
  const std::string folder_;
  std::mutex mutex_;
  Counts counts_{};
};

}  // namespace gpubind::daemon
