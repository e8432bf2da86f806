// binder.proto's messages walked by their descriptors, so that a test of a hand-kept mapping
// covers every field the schema has, fields added after the test was written included: a message
// is filled in full by reflection, sent through the mapping, and what comes back is compared
// field by field with what was sent.
#pragma once

#include <google/protobuf/message.h>

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "gpubind/output/json.h"

namespace gpubind::testing {

// Sets every field of `message` and of the messages inside it to a value that is not the
// field's default: numbers and strings distinct across the whole tree (strings are
// "<field>-<n>"), enums their last value, bools true; repeated fields get two elements, and
// bools inside the second element of a repeated message are false, so a reader that drops a
// bool and one that always sets it both show.
void fill_every_field(google::protobuf::Message& message);

// A field a mapping leaves out on purpose ("gpubind.v1.PlanResponse.cached"), and why.
struct Omission {
  std::string_view field;
  std::string_view reason;
};

// A field that came back missing or changed: its full name, and where and how.
struct LostField {
  std::string field;
  std::string detail;
};

// Every field of `sent` (recursively) that `received` does not hold with the same value, the
// omitted ones aside: one entry per field, its first difference.
std::vector<LostField> fields_lost(const google::protobuf::Message& sent,
                                   const google::protobuf::Message& received,
                                   std::span<const Omission> omitted);

// Every field of `message` (recursively) that holds its default value, the omitted ones aside: for
// a message made by code that sets each field from its own state rather than from another
// message (the daemon's status), which must then be made to hold no default.
std::vector<LostField> fields_unset(const google::protobuf::Message& message,
                                    std::span<const Omission> omitted);

// A field JSON output holds under another key.
struct JsonKey {
  std::string_view field;
  std::string_view key;
};

// The same against JSON output made from `sent`: every field is a key of its name (or its
// `renamed` key) holding the same value; messages are objects, repeated fields arrays.
std::vector<LostField> fields_lost_in_json(const google::protobuf::Message& sent,
                                           const output::Json& json,
                                           std::span<const Omission> omitted,
                                           std::span<const JsonKey> renamed = {});

// The full names of the fields in `lost`, sorted.
std::vector<std::string> names_of(const std::vector<LostField>& lost);
// One line per lost field, for a failure message.
std::string describe(const std::vector<LostField>& lost);

// The fields `omitted` names that binder.proto's package does not have (renamed or removed):
// an omission list must not outlive its field.
std::vector<std::string> unknown_fields(std::span<const Omission> omitted);
std::vector<std::string> unknown_fields(std::span<const JsonKey> renamed);

}  // namespace gpubind::testing
