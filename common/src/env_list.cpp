#include "gpubind/env_list.h"

#include <algorithm>

#include "gpubind/sanitizers.h"

namespace gpubind {

namespace {

// A plan makes one environment per task and frees them all together; the C library keeps only
// a few freed blocks of one size at hand, so at a few dozen tasks most of them took its slow
// path. Freed buffers wait here instead, per thread, for the next plan's tasks: in lists by
// size class, linked through their own first bytes, up to a bound on the bytes kept.
class BufferPool {
 public:
  static constexpr size_t kGrain = 64;                // capacities are multiples of this
  static constexpr size_t kLargest = 4096;            // larger buffers go straight to the heap
  static constexpr size_t kMaxKeptBytes = 256 << 10;  // per thread

  BufferPool() { current = this; }
  ~BufferPool() {
    current = nullptr;
    gone = true;
    for (char*& head : free_) {
      while (head) {
        char* next = next_of(head);
        ::operator delete(head);
        head = next;
      }
    }
  }

  // The calling thread's pool while it exists, and whether it is gone (destroyed at the
  // thread's exit): lists freed before it was made or after it is gone, such as static ones,
  // go to the heap. Trivially destructible, so both can still be read then.
  static inline thread_local BufferPool* current = nullptr;
  static inline thread_local bool gone = false;

  static size_t rounded(size_t capacity) { return (capacity + kGrain - 1) / kGrain * kGrain; }

  char* take(size_t capacity) {
    char*& head = free_[capacity / kGrain];
    char* text = head;
    if (!text) return nullptr;
    head = next_of(text);
    kept_bytes_ -= capacity;
    return text;
  }
  bool keep(char* text, size_t capacity) {
    if (kept_bytes_ + capacity > kMaxKeptBytes) return false;
    std::memcpy(text, &free_[capacity / kGrain], sizeof(char*));
    free_[capacity / kGrain] = text;
    kept_bytes_ += capacity;
    return true;
  }

 private:
  static char* next_of(const char* text) {
    char* next;
    std::memcpy(&next, text, sizeof next);
    return next;
  }

  char* free_[kLargest / kGrain + 1] = {};
  size_t kept_bytes_ = 0;
};

// The calling thread's pool, made on first use. Under AddressSanitizer buffers come from and go
// back to the heap, so a use after free is still seen.
BufferPool* thread_pool() {
  if constexpr (kAddressSanitizer) return nullptr;
  if (BufferPool::gone) return nullptr;
  thread_local BufferPool pool;
  return &pool;
}

}  // namespace

char* EnvList::acquire_buffer(size_t& capacity) {
  capacity = BufferPool::rounded(std::max<size_t>(capacity, 1));
  if (capacity <= BufferPool::kLargest) {
    if (BufferPool* pool = thread_pool()) {
      if (char* text = pool->take(capacity)) return text;
    }
  }
  return static_cast<char*>(::operator new(capacity));
}

void EnvList::release_buffer(char* text, size_t capacity) {
  if (!text) return;
  if (capacity <= BufferPool::kLargest) {
    // Only a pool that exists: one made now, at the thread's or program's exit, would never
    // be destroyed.
    if (BufferPool* pool = BufferPool::current; pool && pool->keep(text, capacity)) return;
  }
  ::operator delete(text);
}

void EnvList::reallocate(size_t capacity) {
  char* text = acquire_buffer(capacity);
  if (size_) std::memcpy(text, text_, size_);
  release_buffer(text_, capacity_);
  text_ = text;
  capacity_ = capacity;
}

EnvList::Var EnvList::operator[](size_t i) const {
  if (i >= count_) return {};
  Iterator it = begin();
  for (; i > 0; --i)
    ++it;
  return *it;
}

std::optional<std::string_view> EnvList::value_of(std::string_view name) const {
  for (const Var var : *this) {
    if (var.name == name) return var.value;
  }
  return std::nullopt;
}

}  // namespace gpubind
