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

BufferPool::~BufferPool() {
  for (void* p : free) ::operator delete(p, std::align_val_t{64});
}

void free_pooled_buffer(void* p) noexcept {
  auto* b = static_cast<PooledBuffer*>(p);
  {
    std::lock_guard lock(b->pool->m);
    if (b->pool->free.size() < b->pool->max_free) {
      b->pool->free.push_back(b->data);
      b->data = nullptr;
    }
  }
  if (b->data) ::operator delete(b->data, std::align_val_t{64});
  delete b;
}

PooledBuffer* take_pooled_buffer(const std::shared_ptr<BufferPool>& pool) {
  auto* b = new PooledBuffer{pool, nullptr};
  {
    std::lock_guard lock(pool->m);
    if (!pool->free.empty()) {
      b->data = pool->free.back();
      pool->free.pop_back();
    }
  }
  if (!b->data) {
    try {
      b->data = ::operator new(std::max<std::size_t>(pool->bytes, 1), std::align_val_t{64});
    } catch (...) {
      delete b;
      throw;
    }
  }
  return b;
}

U8Array owned_image(std::uint32_t h, std::uint32_t w, std::uint32_t c, HostBuffer* buf) {
  nb::capsule owner(buf, free_host_buffer);
  const std::size_t shape[3] = {h, w, c};
  return U8Array(buf->data, 3, shape, owner);
}

}  // namespace l3py
