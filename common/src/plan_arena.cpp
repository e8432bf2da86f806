#include "plan_arena.h"

#include <algorithm>

namespace gpubind {

PlanArena::PlanArena() : previous_(current_) {
  current_ = this;
}

PlanArena::~PlanArena() {
  current_ = previous_;
}

void* PlanArena::allocate_in_new_chunk(std::size_t bytes) {
  const std::size_t last = chunks_.empty() ? kInlineBytes : chunks_.back().size;
  const std::size_t size = std::max(std::min(2 * last, kMaxChunkBytes), bytes);
  // new[] of std::byte is aligned for any fundamental type.
  chunks_.push_back({std::make_unique_for_overwrite<std::byte[]>(size), size});
  next_ = chunks_.back().bytes.get();
  end_ = next_ + size;
  void* p = next_;
  next_ += bytes;
  return p;
}

bool PlanArena::in_chunks(const std::byte* p) const {
  return std::any_of(chunks_.begin(), chunks_.end(), [p](const Chunk& c) {
    return std::less_equal<>()(c.bytes.get(), p) && std::less<>()(p, c.bytes.get() + c.size);
  });
}

}  // namespace gpubind
