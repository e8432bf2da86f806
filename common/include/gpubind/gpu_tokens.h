// How GPUs are named in visibility variables, in one place: the planner writes these forms
// (common/src/plan/gpu_names.cpp), the launch client reads a step's (step_env.cpp,
// worker_gpus.cpp) and the answer check tells them apart (answer_check.cpp).
//   "3"                a GPU by number (the node's, or its vendor's own count)
//   "GPU-<uuid>"       an NVIDIA GPU by UUID
//   "MIG-<uuid>"       an NVIDIA MIG instance ("MIG-GPU-<uuid>/<gi>/<ci>" before driver R470)
//   "3.1"              Level Zero COMPOSITE: tile 1 of card 3
//   "6,7" / "7"        Level Zero FLAT: a card's tiles (or one tile) as device numbers
//   "0000:c1:00.0"     a GPU by its PCI bus id (GPUBIND_GPU_PCI, a request's StepGpu.pci)
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace gpubind::gpu_tokens {

bool is_number(std::string_view token);  // digits only
// Whether `token` is made only of what every form above is made of (letters, digits and
// ".:/,-"): what a request may name a GPU by. Anything else (spaces, quotes, control bytes) names
// no GPU of any runtime and is refused where a request is read.
bool is_token_text(std::string_view token);
// A PCI bus id as Linux writes it: domain (4 to 8 hex digits, wider behind Intel VMD), bus,
// device, function ("0000:c1:00.0", "10000:e1:00.0").
bool is_pci_bus_id(std::string_view text);
bool is_gpu_uuid(std::string_view token);
bool is_mig(std::string_view token);
// The parent GPU's UUID a pre-R470 MIG token names ("MIG-GPU-<uuid>/1/0" -> "GPU-<uuid>"); ""
// for any other token.
std::string_view legacy_mig_parent_uuid(std::string_view token);

// COMPOSITE: tile `tile` of the card the step calls `card`.
std::string composite_tile(std::string_view card, int tile);
// Whether `token` names a tile of `card` in COMPOSITE's form ("3.1" of "3").
bool is_composite_tile_of(std::string_view token, std::string_view card);
// The card of a COMPOSITE tile ("3.1" -> "3"), nullopt for any other token.
std::optional<std::string_view> composite_card(std::string_view token);

// FLAT: devices first .. first + count - 1, "6,7" (one: "7").
std::string flat_devices(int first, int count);
// Whether `token` is FLAT device numbers: one or more numbers, comma-separated.
bool is_flat_devices(std::string_view token);

}  // namespace gpubind::gpu_tokens
