// The compact transport between the SPANK plugin and gpubindd, on gpubindd's socket next to gRPC:
// loading a gRPC client costs slurmstepd ~13 ms per job step (dynamic linking of ~60 libraries),
// this costs nothing. The payloads are binder.proto's messages, as gRPC carries them; only the
// framing differs. The daemon tells the two apart by the first bytes a client sends: gRPC's HTTP/2
// preface, or kMagic followed by the frame's version.
//
//   request:  "GPUBIND" | u8 version | u32 length (little-endian) | gpubind.v1.PlanRequest
//   answer:   u8 status | u32 length (little-endian) | gpubind.v1.PlanResponse (kStatusPlan),
//             or a text: why the request was refused (kStatusRefused), what it names that the
//             daemon's topology lacks (kStatusNodeMismatch), or which versions the daemon
//             speaks (kStatusUnsupportedVersion)
//
// Fields a side does not know are skipped by protobuf's rules: a newer plugin and an older daemon
// still agree. A frame version a daemon does not speak is answered kStatusUnsupportedVersion, and
// the plugin treats any status it does not know as "no daemon" (it falls back), never as a refusal.
#pragma once

#include <cstddef>
#include <cstdint>

#include "gpubind/protocol/limits.h"

namespace gpubind::compact {

inline constexpr char kMagic[7] = {'G', 'P', 'U', 'B', 'I', 'N', 'D'};
// Version 1 carried key=value texts; 2 carries protobuf.
inline constexpr uint8_t kVersion = 2;
// The first release's frame began "GPUBIND1": its version byte is the character '1'.
inline constexpr uint8_t kFirstReleaseVersion = '1';
inline constexpr size_t kRequestHeaderBytes = sizeof kMagic + 1 + 4;
inline constexpr size_t kAnswerHeaderBytes = 1 + 4;
using protocol::kMaxRequestBytes;
inline constexpr uint32_t kMaxAnswerBytes = 16 * 1024 * 1024;

inline constexpr uint8_t kStatusPlan = 0;
inline constexpr uint8_t kStatusRefused = 1;
inline constexpr uint8_t kStatusUnsupportedVersion = 2;
// The request names CPUs or GPUs the daemon's topology lacks (text: which): the client may plan
// from another view of the node. An older plugin reads this unknown status as "no daemon", and
// falls back just the same.
inline constexpr uint8_t kStatusNodeMismatch = 3;

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
