#include "schema_fields.h"

#include <google/protobuf/descriptor.h>

#include <algorithm>
#include <cstdint>
#include <stdexcept>

namespace gpubind::testing {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::DescriptorPool;
using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

// Deeper than any message of binder.proto nests: a message that contains itself stops here.
constexpr int kMaxDepth = 8;

class Filler {
 public:
  void fill(Message& message, bool second_element, int depth) {
    if (depth > kMaxDepth) return;
    const Descriptor* type = message.GetDescriptor();
    for (int i = 0; i < type->field_count(); ++i) {
      const FieldDescriptor* field = type->field(i);
      if (field->is_repeated()) {
        for (int element = 0; element < 2; ++element)
          add(message, field, second_element || element == 1, depth);
      } else {
        set(message, field, second_element, depth);
      }
    }
  }

 private:
  void set(Message& message, const FieldDescriptor* field, bool second_element, int depth) {
    const Reflection& r = *message.GetReflection();
    switch (field->cpp_type()) {
      case FieldDescriptor::CPPTYPE_MESSAGE:
        return fill(*r.MutableMessage(&message, field), second_element, depth + 1);
      case FieldDescriptor::CPPTYPE_INT32:
        return r.SetInt32(&message, field, static_cast<int32_t>(next()));
      case FieldDescriptor::CPPTYPE_INT64:
        return r.SetInt64(&message, field, kLarge + next());
      case FieldDescriptor::CPPTYPE_UINT32:
        return r.SetUInt32(&message, field, static_cast<uint32_t>(next()));
      case FieldDescriptor::CPPTYPE_UINT64:
        return r.SetUInt64(&message, field, kLarge + next());
      case FieldDescriptor::CPPTYPE_DOUBLE:
        return r.SetDouble(&message, field, next() + 0.5);
      case FieldDescriptor::CPPTYPE_FLOAT:
        return r.SetFloat(&message, field, static_cast<float>(next()) + 0.5f);
      case FieldDescriptor::CPPTYPE_BOOL:
        return r.SetBool(&message, field, !second_element);
      case FieldDescriptor::CPPTYPE_ENUM:
        return r.SetEnum(&message, field, last_value(field));
      case FieldDescriptor::CPPTYPE_STRING:
        return r.SetString(&message, field, text(field));
    }
  }

  void add(Message& message, const FieldDescriptor* field, bool second_element, int depth) {
    const Reflection& r = *message.GetReflection();
    switch (field->cpp_type()) {
      case FieldDescriptor::CPPTYPE_MESSAGE:
        return fill(*r.AddMessage(&message, field), second_element, depth + 1);
      case FieldDescriptor::CPPTYPE_INT32:
        return r.AddInt32(&message, field, static_cast<int32_t>(next()));
      case FieldDescriptor::CPPTYPE_INT64:
        return r.AddInt64(&message, field, kLarge + next());
      case FieldDescriptor::CPPTYPE_UINT32:
        return r.AddUInt32(&message, field, static_cast<uint32_t>(next()));
      case FieldDescriptor::CPPTYPE_UINT64:
        return r.AddUInt64(&message, field, kLarge + next());
      case FieldDescriptor::CPPTYPE_DOUBLE:
        return r.AddDouble(&message, field, next() + 0.5);
      case FieldDescriptor::CPPTYPE_FLOAT:
        return r.AddFloat(&message, field, static_cast<float>(next()) + 0.5f);
      case FieldDescriptor::CPPTYPE_BOOL:
        return r.AddBool(&message, field, !second_element);
      case FieldDescriptor::CPPTYPE_ENUM:
        return r.AddEnum(&message, field, last_value(field));
      case FieldDescriptor::CPPTYPE_STRING:
        return r.AddString(&message, field, text(field));
    }
  }

  // Small numbers: they stay inside the request's limits (GPU indices, smt, task counts).
  int64_t next() { return ++counter_; }
  std::string text(const FieldDescriptor* field) {
    return std::string(field->name()) + "-" + std::to_string(next());
  }
  static const google::protobuf::EnumValueDescriptor* last_value(const FieldDescriptor* field) {
    const auto* type = field->enum_type();
    const auto* value = type->value(type->value_count() - 1);
    if (value->number() == 0)
      throw std::logic_error(std::string(field->full_name()) + ": no value but the default");
    return value;
  }

  // 64-bit numbers past 32 bits, so a mapping that narrows them shows.
  static constexpr int64_t kLarge = int64_t{1} << 40;
  int64_t counter_ = 0;
};

// A scalar value as text: element `index` of a repeated field, or the field itself (-1).
std::string value_text(const Message& message, const FieldDescriptor* field, int index) {
  const Reflection& r = *message.GetReflection();
  const bool repeated = index >= 0;
  switch (field->cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32:
      return std::to_string(repeated ? r.GetRepeatedInt32(message, field, index)
                                     : r.GetInt32(message, field));
    case FieldDescriptor::CPPTYPE_INT64:
      return std::to_string(repeated ? r.GetRepeatedInt64(message, field, index)
                                     : r.GetInt64(message, field));
    case FieldDescriptor::CPPTYPE_UINT32:
      return std::to_string(repeated ? r.GetRepeatedUInt32(message, field, index)
                                     : r.GetUInt32(message, field));
    case FieldDescriptor::CPPTYPE_UINT64:
      return std::to_string(repeated ? r.GetRepeatedUInt64(message, field, index)
                                     : r.GetUInt64(message, field));
    case FieldDescriptor::CPPTYPE_DOUBLE:
      return std::to_string(repeated ? r.GetRepeatedDouble(message, field, index)
                                     : r.GetDouble(message, field));
    case FieldDescriptor::CPPTYPE_FLOAT:
      return std::to_string(repeated ? r.GetRepeatedFloat(message, field, index)
                                     : r.GetFloat(message, field));
    case FieldDescriptor::CPPTYPE_BOOL:
      return (repeated ? r.GetRepeatedBool(message, field, index) : r.GetBool(message, field))
                 ? "true"
                 : "false";
    case FieldDescriptor::CPPTYPE_ENUM:
      return std::string(
          (repeated ? r.GetRepeatedEnum(message, field, index) : r.GetEnum(message, field))
              ->name());
    case FieldDescriptor::CPPTYPE_STRING:
      return "\"" +
             (repeated ? r.GetRepeatedString(message, field, index) : r.GetString(message, field)) +
             "\"";
    case FieldDescriptor::CPPTYPE_MESSAGE:
      break;
  }
  return "(a message)";
}

// The same value as JSON output writes it, to compare with value_text.
std::string json_text(const FieldDescriptor* field, const output::Json& value) {
  if (value.is_string() && field->cpp_type() == FieldDescriptor::CPPTYPE_STRING)
    return "\"" + value.get<std::string>() + "\"";
  if (value.is_string() && field->cpp_type() == FieldDescriptor::CPPTYPE_ENUM)
    return value.get<std::string>();  // an enum by its value's name
  if (value.is_number_float()) return std::to_string(value.get<double>());
  return value.dump();
}

bool is_omitted(const FieldDescriptor* field, std::span<const Omission> omitted) {
  return std::any_of(omitted.begin(), omitted.end(),
                     [&](const Omission& o) { return o.field == field->full_name(); });
}

class Lost {
 public:
  void add(const FieldDescriptor* field, const std::string& where, const std::string& how) {
    const std::string name(field->full_name());
    for (const LostField& seen : fields_)
      if (seen.field == name) return;
    fields_.push_back({name, where + ": " + how});
  }
  std::vector<LostField> take() { return std::move(fields_); }

 private:
  std::vector<LostField> fields_;
};

std::string sent_got(const std::string& sent, const std::string& got) {
  return "sent " + sent + ", got " + got;
}

void compare(const Message& sent, const Message& got, const std::string& path,
             std::span<const Omission> omitted, Lost& lost) {
  const Reflection& rs = *sent.GetReflection();
  const Reflection& rg = *got.GetReflection();
  const Descriptor* type = sent.GetDescriptor();
  for (int i = 0; i < type->field_count(); ++i) {
    const FieldDescriptor* field = type->field(i);
    if (is_omitted(field, omitted)) continue;
    const std::string where = path + std::string(field->name());
    const bool is_message = field->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE;
    if (field->is_repeated()) {
      const int count = rs.FieldSize(sent, field);
      if (rg.FieldSize(got, field) != count) {
        lost.add(field, where,
                 sent_got(std::to_string(count) + " elements",
                          std::to_string(rg.FieldSize(got, field))));
        continue;
      }
      for (int e = 0; e < count; ++e) {
        const std::string at = where + "[" + std::to_string(e) + "]";
        if (is_message) {
          compare(rs.GetRepeatedMessage(sent, field, e), rg.GetRepeatedMessage(got, field, e),
                  at + ".", omitted, lost);
        } else if (value_text(sent, field, e) != value_text(got, field, e)) {
          lost.add(field, at, sent_got(value_text(sent, field, e), value_text(got, field, e)));
        }
      }
    } else if (field->has_presence() && rs.HasField(sent, field) != rg.HasField(got, field)) {
      lost.add(field, where, rs.HasField(sent, field) ? "sent set, got unset" : "got set, unsent");
    } else if (is_message) {
      compare(rs.GetMessage(sent, field), rg.GetMessage(got, field), where + ".", omitted, lost);
    } else if (value_text(sent, field, -1) != value_text(got, field, -1)) {
      lost.add(field, where, sent_got(value_text(sent, field, -1), value_text(got, field, -1)));
    }
  }
}

void find_unset(const Message& message, const std::string& path, std::span<const Omission> omitted,
                Lost& lost) {
  const Reflection& r = *message.GetReflection();
  const Descriptor* type = message.GetDescriptor();
  std::vector<const FieldDescriptor*> set;
  r.ListFields(message, &set);  // the fields not at their default (proto3), or present
  for (int i = 0; i < type->field_count(); ++i) {
    const FieldDescriptor* field = type->field(i);
    if (is_omitted(field, omitted)) continue;
    const std::string where = path + std::string(field->name());
    if (std::find(set.begin(), set.end(), field) == set.end()) {
      lost.add(field, where, "holds its default");
    } else if (field->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE && field->is_repeated()) {
      for (int e = 0; e < r.FieldSize(message, field); ++e)
        find_unset(r.GetRepeatedMessage(message, field, e), where + "[" + std::to_string(e) + "].",
                   omitted, lost);
    } else if (field->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
      find_unset(r.GetMessage(message, field), where + ".", omitted, lost);
    }
  }
}

std::string_view json_key(const FieldDescriptor* field, std::span<const JsonKey> renamed) {
  for (const JsonKey& k : renamed)
    if (k.field == field->full_name()) return k.key;
  return field->name();
}

void compare_json(const Message& sent, const output::Json& json, const std::string& path,
                  std::span<const Omission> omitted, std::span<const JsonKey> renamed, Lost& lost) {
  const Reflection& r = *sent.GetReflection();
  const Descriptor* type = sent.GetDescriptor();
  for (int i = 0; i < type->field_count(); ++i) {
    const FieldDescriptor* field = type->field(i);
    if (is_omitted(field, omitted)) continue;
    const std::string key(json_key(field, renamed));
    const std::string where = path + key;
    if (!json.is_object() || !json.contains(key)) {
      lost.add(field, where, "no such key in the JSON");
      continue;
    }
    const output::Json& value = json.at(key);
    const bool is_message = field->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE;
    if (field->is_repeated()) {
      const int count = r.FieldSize(sent, field);
      if (!value.is_array() || value.size() != static_cast<size_t>(count)) {
        lost.add(field, where, sent_got(std::to_string(count) + " elements", value.dump()));
        continue;
      }
      for (int e = 0; e < count; ++e) {
        const std::string at = where + "[" + std::to_string(e) + "]";
        if (is_message) {
          compare_json(r.GetRepeatedMessage(sent, field, e), value[e], at + ".", omitted, renamed,
                       lost);
        } else if (value_text(sent, field, e) != json_text(field, value[e])) {
          lost.add(field, at, sent_got(value_text(sent, field, e), value[e].dump()));
        }
      }
    } else if (is_message) {
      compare_json(r.GetMessage(sent, field), value, where + ".", omitted, renamed, lost);
    } else if (value_text(sent, field, -1) != json_text(field, value)) {
      lost.add(field, where, sent_got(value_text(sent, field, -1), value.dump()));
    }
  }
}

const FieldDescriptor* find_field(std::string_view full_name) {
  return DescriptorPool::generated_pool()->FindFieldByName(std::string(full_name));
}

}  // namespace

void fill_every_field(Message& message) {
  Filler().fill(message, false, 0);
}

std::vector<LostField> fields_lost(const Message& sent, const Message& received,
                                   std::span<const Omission> omitted) {
  Lost lost;
  compare(sent, received, "", omitted, lost);
  return lost.take();
}

std::vector<LostField> fields_lost_in_json(const Message& sent, const output::Json& json,
                                           std::span<const Omission> omitted,
                                           std::span<const JsonKey> renamed) {
  Lost lost;
  compare_json(sent, json, "", omitted, renamed, lost);
  return lost.take();
}

std::vector<LostField> fields_unset(const Message& message, std::span<const Omission> omitted) {
  Lost lost;
  find_unset(message, "", omitted, lost);
  return lost.take();
}

std::vector<std::string> names_of(const std::vector<LostField>& lost) {
  std::vector<std::string> names;
  for (const LostField& f : lost)
    names.push_back(f.field);
  std::sort(names.begin(), names.end());
  return names;
}

std::string describe(const std::vector<LostField>& lost) {
  std::string text;
  for (const LostField& f : lost)
    text += "  " + f.field + " (" + f.detail + ")\n";
  return text;
}

std::vector<std::string> unknown_fields(std::span<const Omission> omitted) {
  std::vector<std::string> unknown;
  for (const Omission& o : omitted)
    if (!find_field(o.field)) unknown.emplace_back(o.field);
  return unknown;
}

std::vector<std::string> unknown_fields(std::span<const JsonKey> renamed) {
  std::vector<std::string> unknown;
  for (const JsonKey& k : renamed)
    if (!find_field(k.field)) unknown.emplace_back(k.field);
  return unknown;
}

}  // namespace gpubind::testing
