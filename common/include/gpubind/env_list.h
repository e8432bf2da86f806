// A task's environment: its variables in the order they are set, all in one buffer. A
// 4096-task plan holds ~45,000 variables; two strings each cost more than planning them, and
// std::string's out-of-line appends cost a large share of planning an oversubscribed node.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <iterator>
#include <optional>
#include <string_view>
#include <utility>

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
    Iterator(const char* text, size_t at) : text_(text), at_(at) {}
    Var operator*() const { return EnvList::read(text_, at_); }
    Iterator& operator++() {
      at_ = EnvList::next(text_, at_);
      return *this;
    }
    Iterator operator++(int) {
      Iterator before = *this;
      ++*this;
      return before;
    }
    bool operator==(const Iterator& other) const { return at_ == other.at_; }

   private:
    const char* text_ = nullptr;
    size_t at_ = 0;
  };

  // Appends a value being written into the list (see add_written).
  class ValueWriter {
   public:
    void append(std::string_view text) { list_.append_raw(text.data(), text.size()); }
    void push_back(char c) { list_.append_raw(&c, 1); }
    ValueWriter& operator+=(std::string_view text) {
      append(text);
      return *this;
    }

   private:
    friend class EnvList;
    explicit ValueWriter(EnvList& list) : list_(list) {}
    EnvList& list_;
  };

  EnvList() = default;
  EnvList(std::initializer_list<Var> vars) {
    for (const Var& var : vars)
      add(var.name, var.value, var.only_if_unset);
  }
  EnvList(const EnvList& other) { *this = other; }
  EnvList(EnvList&& other) noexcept { *this = std::move(other); }
  EnvList& operator=(const EnvList& other) {
    if (this == &other) return *this;
    clear();
    reserve(other.size_);
    if (other.size_) std::memcpy(text_, other.text_, other.size_);
    size_ = other.size_;
    count_ = other.count_;
    return *this;
  }
  EnvList& operator=(EnvList&& other) noexcept {
    if (this == &other) return *this;
    release_buffer(text_, capacity_);
    text_ = std::exchange(other.text_, nullptr);
    size_ = std::exchange(other.size_, 0);
    capacity_ = std::exchange(other.capacity_, 0);
    count_ = std::exchange(other.count_, 0);
    return *this;
  }
  ~EnvList() { release_buffer(text_, capacity_); }

  [[gnu::always_inline]] void add(std::string_view name, std::string_view value,
                                  bool only_if_unset = false) {
    append_header(name, value.size(), only_if_unset);
    append_raw(value.data(), value.size());
    ++count_;
  }

  // Adds `name` with the value `write(ValueWriter& out)` appends to `out`; when `write` returns
  // false the variable is not added (a template with an empty placeholder). Values are thus
  // rendered straight into the buffer.
  template <class Write>
  bool add_written(std::string_view name, bool only_if_unset, Write&& write) {
    const size_t start = size_;
    append_header(name, 0, only_if_unset);
    ValueWriter out(*this);
    bool written = false;
    try {
      written = write(out);
    } catch (...) {
      size_ = start;  // no half-written variable stays behind
      throw;
    }
    if (!written) {
      size_ = start;
      return false;
    }
    const auto value_bytes = static_cast<uint32_t>(size_ - start - kHeader - name.size());
    std::memcpy(text_ + start + sizeof(uint32_t), &value_bytes, sizeof value_bytes);
    ++count_;
    return true;
  }

  // Room for `bytes` in all (bytes() of a similar list): one allocation per task.
  void reserve(size_t bytes) {
    if (bytes > capacity_) reallocate(bytes);
  }
  size_t size() const { return count_; }
  size_t bytes() const { return size_; }  // names, values and a few bytes per variable
  bool empty() const { return count_ == 0; }
  void clear() {
    size_ = 0;
    count_ = 0;
  }

  Iterator begin() const { return {text_, 0}; }
  Iterator end() const { return {text_, size_}; }
  // The i-th variable, empty past the end (a walk from the first: for tests and tools, not loops).
  Var operator[](size_t i) const;
  // The value of the first variable called `name`.
  std::optional<std::string_view> value_of(std::string_view name) const;

  bool operator==(const EnvList& other) const {
    return count_ == other.count_ && size_ == other.size_ &&
           (size_ == 0 || std::memcmp(text_, other.text_, size_) == 0);
  }

 private:
  // Each variable: u32 name length, u32 value length, u8 only_if_unset, the name, the value.
  static constexpr size_t kHeader = 2 * sizeof(uint32_t) + 1;

  static uint32_t u32_at(const char* text, size_t at) {
    uint32_t n = 0;
    std::memcpy(&n, text + at, sizeof n);
    return n;
  }
  static Var read(const char* text, size_t at) {
    const uint32_t name = u32_at(text, at), value = u32_at(text, at + sizeof(uint32_t));
    const char* p = text + at + kHeader;
    return {{p, name}, {p + name, value}, text[at + 2 * sizeof(uint32_t)] != 0};
  }
  static size_t next(const char* text, size_t at) {
    return at + kHeader + u32_at(text, at) + u32_at(text, at + sizeof(uint32_t));
  }

  [[gnu::always_inline]] void append_raw(const char* data, size_t n) {
    if (capacity_ - size_ < n) reallocate(std::max(size_ + n, 2 * capacity_));
    if (n) std::memcpy(text_ + size_, data, n);
    size_ += n;
  }
  [[gnu::always_inline]] void append_header(std::string_view name, size_t value_bytes,
                                            bool only_if_unset) {
    char header[kHeader];
    const uint32_t lengths[2] = {static_cast<uint32_t>(name.size()),
                                 static_cast<uint32_t>(value_bytes)};
    std::memcpy(header, lengths, sizeof lengths);
    header[sizeof lengths] = only_if_unset ? 1 : 0;
    // Doubling, so lists built without reserve() grow in few steps.
    if (const size_t need = size_ + kHeader + name.size() + value_bytes; need > capacity_)
      reallocate(std::max(need, 2 * capacity_));
    append_raw(header, kHeader);
    append_raw(name.data(), name.size());
  }
  void reallocate(size_t capacity);
  // Buffers come from, and go back to, a per-thread pool (env_list.cpp).
  static char* acquire_buffer(size_t& capacity);
  static void release_buffer(char* text, size_t capacity);

  char* text_ = nullptr;
  size_t size_ = 0, capacity_ = 0;
  size_t count_ = 0;
};

}  // namespace gpubind
