// A task's environment: its variables in the order they are set, all in one buffer. A
// 4096-task plan holds ~45,000 variables; two strings each cost more than planning them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <optional>
#include <string>
#include <string_view>

namespace gpubind {

class EnvList {
 public:
  struct Var {
    std::string_view name;
    std::string_view value;
    bool only_if_unset = false;
  };

  class Iterator {
   public:
    using iterator_category = std::forward_iterator_tag;
    using value_type = Var;
    using difference_type = std::ptrdiff_t;
    using pointer = const Var*;
    using reference = Var;

    Iterator() = default;
    Iterator(const std::string* text, size_t at) : text_(text), at_(at) {}
    Var operator*() const { return EnvList::read(*text_, at_); }
    Iterator& operator++() {
      at_ = EnvList::next(*text_, at_);
      return *this;
    }
    Iterator operator++(int) {
      Iterator before = *this;
      ++*this;
      return before;
    }
    bool operator==(const Iterator& other) const { return at_ == other.at_; }

   private:
    const std::string* text_ = nullptr;
    size_t at_ = 0;
  };

  EnvList() = default;
  EnvList(std::initializer_list<Var> vars) {
    for (const Var& var : vars)
      add(var.name, var.value, var.only_if_unset);
  }

  void add(std::string_view name, std::string_view value, bool only_if_unset = false) {
    char* p = grow(name, value.size(), only_if_unset);
    std::memcpy(p, value.data(), value.size());
    ++count_;
  }

  // Adds `name` with the value `write(std::string& out)` appends to `out`; when `write` returns
  // false the variable is not added (a template with an empty placeholder). Values are thus
  // rendered straight into the buffer.
  template <class Write>
  bool add_written(std::string_view name, bool only_if_unset, Write&& write) {
    const size_t start = begin_var(name, only_if_unset);
    if (!write(text_)) {
      text_.resize(start);
      return false;
    }
    end_var(start, name.size());
    return true;
  }

  // Room for `bytes` in all (bytes() of a similar list): one allocation per task.
  void reserve(size_t bytes) { text_.reserve(bytes); }
  size_t size() const { return count_; }
  size_t bytes() const { return text_.size(); }  // names, values and a few bytes per variable
  bool empty() const { return count_ == 0; }
  void clear() {
    text_.clear();
    count_ = 0;
  }

  Iterator begin() const { return {&text_, 0}; }
  Iterator end() const { return {&text_, text_.size()}; }
  // The i-th variable, empty past the end (a walk from the first: for tests and tools, not loops).
  Var operator[](size_t i) const;
  // The value of the first variable called `name`.
  std::optional<std::string_view> value_of(std::string_view name) const;

  bool operator==(const EnvList& other) const = default;

 private:
  // Each variable: u32 name length, u32 value length, u8 only_if_unset, the name, the value.
  static constexpr size_t kHeader = 2 * sizeof(uint32_t) + 1;

  static uint32_t u32_at(const std::string& text, size_t at) {
    uint32_t n = 0;
    std::memcpy(&n, text.data() + at, sizeof n);
    return n;
  }
  static Var read(const std::string& text, size_t at) {
    const uint32_t name = u32_at(text, at), value = u32_at(text, at + sizeof(uint32_t));
    const char* p = text.data() + at + kHeader;
    return {{p, name}, {p + name, value}, text[at + 2 * sizeof(uint32_t)] != 0};
  }
  static size_t next(const std::string& text, size_t at) {
    return at + kHeader + u32_at(text, at) + u32_at(text, at + sizeof(uint32_t));
  }
  // Appends a variable's header and name with room for `value_bytes`, where it returns.
  char* grow(std::string_view name, size_t value_bytes, bool only_if_unset) {
    const size_t start = text_.size();
    text_.resize(start + kHeader + name.size() + value_bytes);
    char* p = text_.data() + start;
    const uint32_t lengths[2] = {static_cast<uint32_t>(name.size()),
                                 static_cast<uint32_t>(value_bytes)};
    std::memcpy(p, lengths, sizeof lengths);
    p[sizeof lengths] = only_if_unset ? 1 : 0;
    std::memcpy(p + kHeader, name.data(), name.size());
    return p + kHeader + name.size();
  }
  size_t begin_var(std::string_view name, bool only_if_unset) {
    const size_t start = text_.size();
    grow(name, 0, only_if_unset);
    return start;
  }
  void end_var(size_t start, size_t name_bytes) {
    const auto value_bytes = static_cast<uint32_t>(text_.size() - start - kHeader - name_bytes);
    std::memcpy(text_.data() + start + sizeof(uint32_t), &value_bytes, sizeof value_bytes);
    ++count_;
  }

  std::string text_;
  size_t count_ = 0;
};

}  // namespace gpubind
