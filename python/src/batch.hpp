// Batches handed to Python (batch_bindings.cpp): l3.Batch, its data as a numpy
// array (host batches) or a _DeviceArray (device batches: DLPack kDLCUDA, never
// copied), and the consumer streams a device batch was exported to.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "ext.hpp"
#include "l3/reader/reader.hpp"

namespace l3py {

// Consumer streams of a device batch, as the Python layer collects them from
// __dlpack__(stream=...): cudaStream_t values, 0 for the legacy default stream.
using StreamList = std::vector<std::uintptr_t>;

// As l3::Reader::next / release take them (cudaStream_t values).
inline std::vector<void*> as_streams(const StreamList& streams) {
  std::vector<void*> out;
  out.reserve(streams.size());
  for (std::uintptr_t s : streams) out.push_back(reinterpret_cast<void*>(s));
  return out;
}

// The array of a batch's data (the GIL held): `meta` is the reader's batch.
// Device batches and host batches without `owned` borrow the reader's buffer
// (the array keeps `reader` alive); with `owned` (a pooled buffer: the ring
// buffer handed over by Reader::detach, or a copy) the array owns that buffer.
nb::object batch_array(const std::shared_ptr<l3::Reader>& reader, const l3::Batch& meta, PooledBuffer* owned);

// One batch as Python sees it: l3.Batch (named fields, DLPack, `images, labels = batch`).
struct PyBatch {
  nb::object data;     // numpy array (host), _DeviceArray / l3.DeviceArray (device)
  nb::object labels;   // int64 numpy array; -1 for unlabelled records
  nb::object records;  // uint64 numpy array: each example's dataset index
  std::uint64_t epoch = 0;
  std::uint64_t index = 0;  // batch number within this rank's epoch
  double wait_seconds = 0;  // how long next() waited for it
  int device = -1;          // CUDA device holding `data`; -1: host memory
};

}  // namespace l3py
