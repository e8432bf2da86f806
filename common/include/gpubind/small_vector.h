// A vector that keeps its first N elements inside itself. A plan holds one small list per task
// (a task's GPUs: nearly always one); a heap block each made those lists the largest cost of
// planning many tasks, since the allocator's per-size cache holds only a few blocks.
#pragma once

#include <algorithm>
#include <cstddef>
#include <initializer_list>
#include <memory>
#include <new>
#include <stdexcept>
#include <type_traits>
#include <utility>

namespace gpubind {

template <class T, std::size_t N>
class SmallVector {
  static_assert(N > 0);

 public:
  using value_type = T;
  using size_type = std::size_t;
  using iterator = T*;
  using const_iterator = const T*;
  using reference = T&;
  using const_reference = const T&;

  SmallVector() = default;
  // Delegating first, so the destructor frees what is built if a copy throws.
  SmallVector(std::initializer_list<T> items) : SmallVector() {
    assign(items.begin(), items.end());
  }
  SmallVector(const SmallVector& other) : SmallVector() { assign(other.begin(), other.end()); }
  SmallVector(SmallVector&& other) noexcept(std::is_nothrow_move_constructible_v<T>) {
    take(std::move(other));
  }
  SmallVector& operator=(const SmallVector& other) {
    if (this != &other) assign(other.begin(), other.end());
    return *this;
  }
  SmallVector& operator=(SmallVector&& other) noexcept(std::is_nothrow_move_constructible_v<T>) {
    if (this != &other) {
      release();
      take(std::move(other));
    }
    return *this;
  }
  SmallVector& operator=(std::initializer_list<T> items) {
    assign(items.begin(), items.end());
    return *this;
  }
  ~SmallVector() { release(); }

  size_type size() const { return size_; }
  size_type capacity() const { return capacity_; }
  bool empty() const { return size_ == 0; }
  T* data() { return data_; }
  const T* data() const { return data_; }
  iterator begin() { return data_; }
  iterator end() { return data_ + size_; }
  const_iterator begin() const { return data_; }
  const_iterator end() const { return data_ + size_; }
  T& operator[](size_type i) { return data_[i]; }
  const T& operator[](size_type i) const { return data_[i]; }
  T& at(size_type i) {
    if (i >= size_) throw std::out_of_range("SmallVector::at");
    return data_[i];
  }
  const T& at(size_type i) const { return const_cast<SmallVector*>(this)->at(i); }
  T& front() { return data_[0]; }
  const T& front() const { return data_[0]; }
  T& back() { return data_[size_ - 1]; }
  const T& back() const { return data_[size_ - 1]; }

  void reserve(size_type wanted) {
    if (wanted > capacity_) reallocate(wanted);
  }
  void push_back(const T& item) { emplace_back(item); }
  void push_back(T&& item) { emplace_back(std::move(item)); }
  template <class... Args>
  T& emplace_back(Args&&... args) {
    if (size_ == capacity_) {
      // Built before moving, as `args` may name an element of this vector.
      T item(std::forward<Args>(args)...);
      reallocate(2 * capacity_);
      T& added = *std::construct_at(data_ + size_, std::move(item));
      ++size_;
      return added;
    }
    // Counted once built: an element whose constructor throws is not there to destroy.
    T& added = *std::construct_at(data_ + size_, std::forward<Args>(args)...);
    ++size_;
    return added;
  }
  void pop_back() { std::destroy_at(data_ + --size_); }
  void clear() {
    std::destroy(begin(), end());
    size_ = 0;
  }
  void resize(size_type n) {
    if (n < size_) {
      std::destroy(begin() + n, end());
      size_ = n;
      return;
    }
    reserve(n);
    for (; size_ < n; ++size_)
      std::construct_at(data_ + size_);
  }

  bool operator==(const SmallVector& other) const {
    return std::equal(begin(), end(), other.begin(), other.end());
  }

 private:
  T* inline_data() { return reinterpret_cast<T*>(inline_); }
  bool on_heap() const { return capacity_ > N; }

  template <class It>
  void assign(It first, It last) {
    clear();
    reserve(static_cast<size_type>(std::distance(first, last)));
    for (; first != last; ++first) {
      std::construct_at(data_ + size_, *first);
      ++size_;
    }
  }
  void reallocate(size_type capacity) {
    T* bigger = std::allocator<T>().allocate(capacity);
    try {
      std::uninitialized_move(begin(), end(), bigger);
    } catch (...) {
      std::allocator<T>().deallocate(bigger, capacity);
      throw;
    }
    std::destroy(begin(), end());
    if (on_heap()) std::allocator<T>().deallocate(data_, capacity_);
    data_ = bigger;
    capacity_ = capacity;
  }
  void release() {
    clear();
    if (on_heap()) std::allocator<T>().deallocate(data_, capacity_);
    data_ = inline_data();
    capacity_ = N;
  }
  // `this` holds nothing and its inline room on entry.
  void take(SmallVector&& other) {
    if (other.on_heap()) {
      data_ = std::exchange(other.data_, other.inline_data());
      capacity_ = std::exchange(other.capacity_, N);
      size_ = std::exchange(other.size_, 0);
      return;
    }
    std::uninitialized_move(other.begin(), other.end(), data_);
    size_ = other.size_;
    other.clear();
  }

  alignas(T) std::byte inline_[N * sizeof(T)];
  T* data_ = inline_data();
  size_type size_ = 0;
  size_type capacity_ = N;
};

}  // namespace gpubind
