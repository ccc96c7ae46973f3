// Host buffers handed to Python through capsules, and the batch buffer pool.
#include <algorithm>
#include <new>

#include "ext.hpp"

namespace l3py {

void free_host_buffer(void* p) noexcept {
  auto* b = static_cast<HostBuffer*>(p);
  ::operator delete(b->data, std::align_val_t{64});
  delete b;
}

HostBuffer* new_host_buffer(std::size_t bytes) {
  auto* b = new HostBuffer;
  try {
    b->data = ::operator new(std::max<std::size_t>(bytes, 1), std::align_val_t{64});
  } catch (...) {
    delete b;
    throw;
  }
  b->bytes = bytes;
  return b;
}

namespace {

void* aligned_new(std::size_t bytes) { return ::operator new(std::max<std::size_t>(bytes, 1), std::align_val_t{l3::kBatchAlignment}); }
void aligned_delete(void* p) noexcept { ::operator delete(p, std::align_val_t{l3::kBatchAlignment}); }

// Buffers of the pool's size and alignment come from and go back to its free
// list; any other request (the reader asks for none) is plain aligned memory.
class PoolAllocator final : public l3::BatchAllocator {
public:
  explicit PoolAllocator(std::shared_ptr<BufferPool> pool) : pool_(std::move(pool)) {}
  const char* name() const noexcept override { return "l3py-pool"; }
  void* allocate(std::size_t bytes, std::size_t alignment) override {
    if (pooled(bytes, alignment)) return pool_->take();
    return ::operator new(std::max<std::size_t>(bytes, 1), std::align_val_t{alignment});
  }
  void deallocate(void* p, std::size_t bytes, std::size_t alignment) noexcept override {
    if (pooled(bytes, alignment)) return pool_->give(p);
    ::operator delete(p, std::align_val_t{alignment});
  }

private:
  bool pooled(std::size_t bytes, std::size_t alignment) const {
    return bytes == pool_->bytes && alignment == l3::kBatchAlignment;
  }
  std::shared_ptr<BufferPool> pool_;
};

}  // namespace

void* BufferPool::take() {
  {
    std::lock_guard lock(m);
    if (!free.empty()) {
      void* p = free.back();
      free.pop_back();
      return p;
    }
  }
  return aligned_new(bytes);
}

void BufferPool::give(void* data) noexcept {
  {
    std::lock_guard lock(m);
    if (free.size() < max_free) {
      free.push_back(data);
      return;
    }
  }
  aligned_delete(data);
}

BufferPool::~BufferPool() {
  for (void* p : free) aligned_delete(p);
}

void free_pooled_buffer(void* p) noexcept {
  auto* b = static_cast<PooledBuffer*>(p);
  b->pool->give(b->data);
  delete b;
}

PooledBuffer* take_pooled_buffer(const std::shared_ptr<BufferPool>& pool) {
  auto* b = new PooledBuffer{pool, nullptr};
  try {
    b->data = pool->take();
  } catch (...) {
    delete b;
    throw;
  }
  return b;
}

std::shared_ptr<l3::BatchAllocator> make_pool_allocator(std::shared_ptr<BufferPool> pool) {
  return std::make_shared<PoolAllocator>(std::move(pool));
}

U8Array owned_image(std::uint32_t h, std::uint32_t w, std::uint32_t c, HostBuffer* buf) {
  nb::capsule owner(buf, free_host_buffer);
  const std::size_t shape[3] = {h, w, c};
  return U8Array(buf->data, 3, shape, owner);
}

}  // namespace l3py
