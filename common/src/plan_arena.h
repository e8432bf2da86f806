// Scratch memory for one plan. The planner makes some sixty short-lived vectors per plan; for
// small nodes their malloc and free cost as much as the planning. From a bump arena they cost
// a pointer increment, and all go at once when the plan is done.
//
// Scratch<T> is a std::vector whose stateless allocator takes memory from the calling thread's
// current PlanArena (one per make_plan call, on its stack, so plans on other threads and
// nested uses stay apart), or from the heap when none is active. A Scratch vector must not
// outlive the arena it took memory from: the planner's are its members, declared after its
// arena, and its functions' locals.
#pragma once

#include <algorithm>
#include <cstddef>
#include <functional>
#include <memory>
#include <new>
#include <vector>

#include "gpubind/sanitizers.h"

namespace gpubind {

// Under AddressSanitizer scratch stays on the heap, so every out-of-bounds access is still seen
// (inside one arena buffer it would not be).
inline constexpr bool kScratchInArena = !kAddressSanitizer;

class PlanArena {
 public:
  PlanArena();  // becomes the calling thread's arena until destroyed
  ~PlanArena();
  PlanArena(const PlanArena&) = delete;
  PlanArena& operator=(const PlanArena&) = delete;

  void* allocate(std::size_t bytes) {
    bytes = (std::max<std::size_t>(bytes, 1) + kAlign - 1) & ~(kAlign - 1);
    if (static_cast<std::size_t>(end_ - next_) < bytes) return allocate_in_new_chunk(bytes);
    void* p = next_;
    next_ += bytes;
    return p;
  }
  bool holds(const void* p) const {
    const auto* b = static_cast<const std::byte*>(p);
    return (std::less_equal<>()(inline_, b) && std::less<>()(b, inline_ + kInlineBytes)) ||
           in_chunks(b);
  }

  static PlanArena* current() { return current_; }

 private:
  // Room for a small plan's scratch (a few KiB per hundred cores); larger plans take chunks
  // from the heap, each twice the last up to 64 KiB (or one vector's size). Past that, chunks
  // would be mapped and unmapped per plan, each page faulted in anew.
  static constexpr std::size_t kInlineBytes = 16 * 1024;
  static constexpr std::size_t kMaxChunkBytes = 64 * 1024;
  struct Chunk {
    std::unique_ptr<std::byte[]> bytes;
    std::size_t size;
  };

  static constexpr std::size_t kAlign = alignof(std::max_align_t);

  void* allocate_in_new_chunk(std::size_t bytes);
  bool in_chunks(const std::byte* p) const;

  alignas(std::max_align_t) std::byte inline_[kInlineBytes];
  std::byte* next_ = inline_;
  std::byte* end_ = inline_ + kInlineBytes;
  std::vector<Chunk> chunks_;
  PlanArena* previous_;

  static inline thread_local PlanArena* current_ = nullptr;
};

template <class T>
struct ArenaAllocator {
  using value_type = T;
  ArenaAllocator() = default;
  template <class U>
  ArenaAllocator(const ArenaAllocator<U>&) {}

  T* allocate(std::size_t n) {
    static_assert(alignof(T) <= alignof(std::max_align_t), "the arena aligns to max_align_t");
    PlanArena* arena = kScratchInArena ? PlanArena::current() : nullptr;
    if (arena) return static_cast<T*>(arena->allocate(n * sizeof(T)));
    return static_cast<T*>(::operator new(n * sizeof(T)));
  }
  void deallocate(T* p, std::size_t) {
    // Arena memory goes with its arena; a vector made outside one came from the heap. Only the
    // current arena is asked: arenas do not nest inside a plan.
    const PlanArena* arena = kScratchInArena ? PlanArena::current() : nullptr;
    if (!arena || !arena->holds(p)) ::operator delete(p);
  }
  template <class U>
  bool operator==(const ArenaAllocator<U>&) const {
    return true;
  }
};

template <class T>
using Scratch = std::vector<T, ArenaAllocator<T>>;

}  // namespace gpubind
