#include "gpubind/client/flux_job.h"

#include "gpubind/cpuset.h"

namespace gpubind::client {
namespace {

// Just enough JSON for R: objects, arrays, strings, numbers, true/false/null; nesting bounded.
struct Json {
  enum class Kind { kNull, kBool, kNumber, kString, kArray, kObject } kind = Kind::kNull;
  std::string text;         // a string's value, a number's digits
  std::vector<Json> items;  // an array's; an object's values, in the order of `keys`
  std::vector<std::string> keys;

  const Json* member(std::string_view name) const {
    for (size_t i = 0; i < keys.size(); ++i)
      if (keys[i] == name) return &items[i];
    return nullptr;
  }
};

class JsonReader {
 public:
  explicit JsonReader(std::string_view text) : text_(text) {}

  Result<Json> document() {
    Json value;
    if (auto read = this->value(value, 0); !read) return read.error();
    skip_space();
    if (at_ != text_.size()) return fault("text after the JSON value").error();
    return value;
  }

 private:
  static constexpr int kMaxDepth = 32;

  Status value(Json& out, int depth) {
    if (depth > kMaxDepth) return fault("nested too deeply");
    skip_space();
    if (at_ >= text_.size()) return fault("the text ends before a value");
    const char c = text_[at_];
    if (c == '{') return object(out, depth);
    if (c == '[') return array(out, depth);
    if (c == '"') {
      out.kind = Json::Kind::kString;
      return string(out.text);
    }
    for (const auto& [word, kind] : {std::pair{std::string_view("true"), Json::Kind::kBool},
                                     std::pair{std::string_view("false"), Json::Kind::kBool},
                                     std::pair{std::string_view("null"), Json::Kind::kNull}}) {
      if (text_.substr(at_, word.size()) == word) {
        out.kind = kind;
        out.text = word;
        at_ += word.size();
        return Ok{};
      }
    }
    const size_t start = at_;
    while (at_ < text_.size() &&
           std::string_view("+-.eE0123456789").find(text_[at_]) != std::string_view::npos)
      ++at_;
    if (at_ == start) return fault(std::string("unexpected '") + c + "'");
    out.kind = Json::Kind::kNumber;
    out.text = text_.substr(start, at_ - start);
    return Ok{};
  }

  Status object(Json& out, int depth) {
    out.kind = Json::Kind::kObject;
    ++at_;
    if (next_is('}')) return Ok{};
    do {
      skip_space();
      std::string key;
      if (at_ >= text_.size() || text_[at_] != '"') return fault("an object key is not a string");
      if (auto read = string(key); !read) return read;
      if (!next_is(':')) return fault("no ':' after key \"" + key + "\"");
      Json member;
      if (auto read = value(member, depth + 1); !read) return read;
      out.keys.push_back(std::move(key));
      out.items.push_back(std::move(member));
    } while (next_is(','));
    return next_is('}') ? Status{Ok{}} : fault("an object does not end with '}'");
  }

  Status array(Json& out, int depth) {
    out.kind = Json::Kind::kArray;
    ++at_;
    if (next_is(']')) return Ok{};
    do {
      Json item;
      if (auto read = value(item, depth + 1); !read) return read;
      out.items.push_back(std::move(item));
    } while (next_is(','));
    return next_is(']') ? Status{Ok{}} : fault("an array does not end with ']'");
  }

  // R's strings are ids, names and idsets: escapes other than \" \\ \/ are refused.
  Status string(std::string& out) {
    ++at_;
    while (at_ < text_.size() && text_[at_] != '"') {
      char c = text_[at_++];
      if (c == '\\') {
        if (at_ >= text_.size()) break;
        c = text_[at_++];
        if (c != '"' && c != '\\' && c != '/') return fault("an escape R does not use");
      } else if (static_cast<unsigned char>(c) < 0x20) {
        return fault("a control character in a string");
      }
      out.push_back(c);
    }
    if (at_ >= text_.size()) return fault("a string does not end");
    ++at_;
    return Ok{};
  }

  bool next_is(char c) {
    skip_space();
    if (at_ < text_.size() && text_[at_] == c) {
      ++at_;
      return true;
    }
    return false;
  }

  void skip_space() {
    while (at_ < text_.size() &&
           std::string_view(" \t\r\n").find(text_[at_]) != std::string_view::npos)
      ++at_;
  }

  Status fault(const std::string& what) const {
    return make_error("not JSON at byte " + std::to_string(at_) + ": " + what);
  }

  std::string_view text_;
  size_t at_ = 0;
};

// An RFC 22 idset ("0-3,5", or bracketed "[0-3,5]"), as a set of ids.
Result<CpuSet> idset(const std::string& text) {
  std::string_view ids = text;
  if (ids.size() >= 2 && ids.front() == '[' && ids.back() == ']')
    ids = ids.substr(1, ids.size() - 2);
  if (ids.empty()) return CpuSet{};
  return CpuSet::parse_list(ids);
}

}  // namespace

bool flux_constrained(const EnvLookup& env) {
  if (!env("FLUX_JOB_ID")) return false;
  const auto value = env("FLUX_EXEC_CONSTRAINED_RESOURCES");
  return value && !value->empty() && *value != "0";
}

Result<std::vector<int>> flux_rank_gpus(std::string_view r_json, int rank) {
  auto document = JsonReader(r_json).document();
  if (!document) return make_error("Flux's R is " + document.error().message);
  const Json* version = document->member("version");
  if (!version || version->text != "1")
    return make_error("Flux's R is not version 1 (no \"version\":1)");
  const Json* execution = document->member("execution");
  const Json* lite = execution ? execution->member("R_lite") : nullptr;
  if (!lite || lite->kind != Json::Kind::kArray)
    return make_error("Flux's R has no execution.R_lite list");
  for (const Json& entry : lite->items) {
    const Json* ranks = entry.member("rank");
    const Json* children = entry.member("children");
    if (!ranks || ranks->kind != Json::Kind::kString || !children)
      return make_error("an R_lite entry has no \"rank\" idset or no \"children\"");
    auto in = idset(ranks->text);
    if (!in) return make_error("R_lite rank '" + ranks->text + "': " + in.error().message);
    if (!in->test(rank)) continue;
    const Json* gpus = children->member("gpu");
    if (!gpus) return std::vector<int>{};
    auto ids = idset(gpus->text);
    if (!ids) return make_error("R_lite gpu '" + gpus->text + "': " + ids.error().message);
    return ids->to_vector();
  }
  return make_error("Flux's R lists no resources for broker rank " + std::to_string(rank));
}

}  // namespace gpubind::client
