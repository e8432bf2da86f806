// The compact plan protocol between the SPANK plugin and gpubindd, on gpubindd's socket next to
// gRPC: loading a gRPC client costs slurmstepd ~13 ms per job step (dynamic linking of ~60
// libraries), this costs nothing. The daemon tells the two apart by the first bytes a client
// sends: gRPC's HTTP/2 preface, or kMagic.
//
//   request:  "GPUBIND1" | u32 length (little-endian) | StepRequest text (step_text.h)
//   answer:   u8 status  | u32 length (little-endian) | StepPlan text (status 0) or the reason
//             the request was refused (status 1)
#pragma once

#include <cstddef>
#include <cstdint>

#include "gpubind/protocol/limits.h"

namespace gpubind::compact {

inline constexpr char kMagic[8] = {'G', 'P', 'U', 'B', 'I', 'N', 'D', '1'};
using protocol::kMaxRequestBytes;
inline constexpr uint32_t kMaxAnswerBytes = 16 * 1024 * 1024;
inline constexpr uint8_t kStatusPlan = 0;
inline constexpr uint8_t kStatusRefused = 1;

// The u32 little-endian lengths of both frames.
inline void put_length(char* out, uint32_t length) {
  for (int i = 0; i < 4; ++i)
    out[i] = static_cast<char>((length >> (8 * i)) & 0xff);
}

inline uint32_t get_length(const char* in) {
  uint32_t length = 0;
  for (int i = 0; i < 4; ++i)
    length |= static_cast<uint32_t>(static_cast<unsigned char>(in[i])) << (8 * i);
  return length;
}

}  // namespace gpubind::compact
