// The streaming reader: fixed-size training batches from an l3 dataset.
//
// Pipeline (one reader per rank):
//   read      one scheduler thread walks this rank's share of the epoch's
//             global order (l3/reader/sample_order.hpp), fetches each record from the
//             RAM cache or the memory-mapped shard (checksum verified), and
//             queues it; at most `read_ahead` records wait in the queue.
//   decode    `workers` threads take records, read the header, draw each
//             example's crop (l3/reader/transforms.hpp) and decode only the union of
//             the crops' boxes (l3::decode_region through a DecodeBackend);
//   transform crop, resize, flip into a per-worker scratch (uint8 HWC);
//   assemble  layout + dtype + normalisation straight into the example's slot
//             of one contiguous batch tensor (N x C x H x W or N x H x W x C).
// Batch buffers form a ring of `prefetch + echo_window` buffers allocated once
// (BatchAllocator hook); nothing is allocated
// per batch in steady state. next() hands out one batch at a time; its buffer
// is reused once next() is called again.
//
// Order and resume: state() counts the GLOBAL positions of the epoch's order
// consumed by all ranks together, so restore() continues with exactly the
// remaining samples under any world size (see RankPlan). Random transforms
// are seeded by (seed, epoch, record, echo copy): a resumed run draws the
// same crops.
//
// Data echoing (echo = e > 1): each fresh record is decoded once and emitted
// e times with independent random crops/flips. Echo works on windows of
// `echo_window` batches (default e): a window holds echo_window * batch / e
// fresh records of this rank, and its examples are shuffled inside the window
// by a keyed permutation (the shuffle buffer). Decoded images of a window are
// not kept: a worker produces all e copies of its record at once.
//
// Cache: with cache_bytes > 0, compressed records are kept in RAM the first
// time they are read, as long as they fit the budget; nothing is evicted, so
// from the second epoch on the hit count per epoch is fixed (CoorDL's MinIO).
//
// Peer cache: with peer_cache.servers set, a record missing from the RAM cache
// is looked for in its owner's memcached before storage, and a record read
// from storage is stored into its owner (CoorDL's partitioned cache across
// nodes; l3/reader/peer_cache.hpp, spec/format.md §8.6). Metrics::bytes_read then
// counts storage reads only.
//
// Errors: a record whose checksum, header or tile data is invalid either
// raises (ErrorPolicy::raise: next() throws the l3::Error for that batch; the
// batch counts as consumed and next() goes on with the following batch), or
// is replaced (ErrorPolicy::skip) by the next valid record of this rank's
// sequence (which then appears twice in the epoch), so batches stay full.
// Both are counted in Metrics. Errors other than data errors always raise.
//
// Thread safety: one consumer thread calls next(), state(), restore(),
// set_epoch(); metrics() may be called from any thread.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>

#include "l3/format/dataset.hpp"
#include "l3/reader/peer_cache.hpp"
#include "l3/reader/reader_backend.hpp"
#include "l3/reader/sample_order.hpp"
#include "l3/reader/transforms.hpp"

namespace l3 {

enum class ErrorPolicy { raise, skip };

struct ReaderOptions {
  std::uint32_t batch_size = 64;
  std::uint32_t workers = 2;     // decode/transform threads
  std::uint32_t prefetch = 2;    // batches prepared ahead of the consumer (>= 1)
  std::uint32_t read_ahead = 0;  // records queued between read and decode; 0: 2 * batch_size

  // Order.
  std::uint64_t seed = 0;
  bool shuffle = true;
  std::uint64_t block_size = 0;  // > 0: shuffle blocks of this many consecutive records
  std::uint32_t world_size = 1;
  std::uint32_t rank = 0;
  Remainder remainder = Remainder::pad;  // equal samples per rank: pad by wrapping, or drop
  std::uint64_t epoch = 0;               // the first epoch

  // Data echoing.
  std::uint32_t echo = 1;          // e >= 1: examples per fresh record
  std::uint32_t echo_window = 0;   // batches per shuffle window; 0: echo. window*batch must be a multiple of echo

  std::uint64_t cache_bytes = 0;   // RAM cache budget of compressed records; 0: no cache
  PeerCacheOptions peer_cache{};   // servers set: the nodes' memcached, after the RAM cache (local datasets)
  ErrorPolicy on_error = ErrorPolicy::raise;
  std::uint32_t max_replacements = 64;  // skip: records tried before giving up and raising
  // yes: check each record's checksum when read from storage (the default CPU
  // decoder then skips the image stream's own checksum: the same bytes);
  // no: only the stream's checksum is checked, when the record is decoded.
  Verify verify = Verify::yes;
  Limits limits{};                      // decoder limits

  TransformOptions transform{};
  std::shared_ptr<DecodeBackend> decoder;    // null: CPU (l3::decode_region)
  std::shared_ptr<BatchAllocator> allocator; // null: CPU (aligned new)
  // Non-null: whole windows are decoded AND transformed by this backend (the
  // CUDA batch backend: batches in device memory); `decoder`, `allocator` and
  // `workers` are then unused (one thread drives the backend).
  std::shared_ptr<BatchBackend> batch_backend;
};

// One batch: a contiguous tensor and its labels. Valid until the next call of
// next(), restore(), set_epoch() or the reader's destruction.
struct Batch {
  void* data = nullptr;  // size x C x H x W (chw) or size x H x W x C (hwc), dtype elements
  std::size_t bytes = 0;
  std::uint32_t size = 0, channels = 0, height = 0, width = 0;
  Layout layout = Layout::chw;
  DType dtype = DType::float32;
  std::span<const std::int64_t> labels;    // kNoLabel for unlabelled records
  std::span<const std::uint64_t> records;  // the dataset index of each example
  std::uint64_t epoch = 0;
  std::uint64_t index = 0;     // batch number within this rank's epoch
  double wait_seconds = 0;     // how long next() waited for this batch
  int device = -1;             // CUDA device that holds `data`; -1: host memory
};

// Where an epoch stands, for exact resume. Serialises to a small JSON object.
struct ReaderState {
  std::uint64_t seed = 0;
  std::uint64_t epoch = 0;
  std::uint64_t consumed = 0;      // global positions of the epoch's order consumed (all ranks)
  std::uint64_t dataset_size = 0;  // records; restore() checks it
  // Echo only (same world size and options): batches already delivered from the
  // window that starts at `consumed`. A restore under another world size
  // restarts that window (up to echo_window - 1 batches are repeated).
  std::uint32_t world_size = 1;
  std::uint64_t window_batches = 0;

  std::string to_json() const;
  static ReaderState from_json(const std::string& text);  // corrupt_header on malformed text
  bool operator==(const ReaderState&) const = default;
};

// Busy seconds summed over threads. Batch mode: `decode` is the backend's
// whole run (decode, transforms and assembly of a window, on the device) plus
// the host's planning; transform and assemble stay 0.
struct StageTimes {
  double read = 0, decode = 0, transform = 0, assemble = 0;
};

// DS-Analyzer's what-if: what it takes to feed one batch every `step_seconds`
// (a GPU's step time), from the busy seconds measured per delivered example.
// Assumes worker threads scale linearly (each has its own core): a lower bound
// on what is needed.
struct FeedPlan {
  double step_seconds = 0;
  std::uint32_t batch_size = 0;
  double worker_seconds_per_batch = 0;  // decode + transform + assemble, one thread
  double read_seconds_per_batch = 0;    // the read thread
  double workers_needed = 0;            // worker threads that keep up (fractional)
  std::uint32_t workers = 0;            // worker threads this run had
  double max_images_per_second = 0;     // what those workers and the read thread can produce
  double images_per_second_needed = 0;  // batch_size / step_seconds
  std::string limit;                    // "none" (fed), "workers" or "read"; "unknown" without data
};

struct Metrics {
  std::uint64_t batches = 0;
  std::uint64_t examples = 0;      // delivered
  std::uint64_t fresh = 0;         // delivered examples that are a record's first copy
  std::uint64_t echoed = 0;        // delivered examples that are a further copy (echo)
  std::uint64_t bytes_read = 0;    // compressed bytes read from storage (not from the RAM cache or a peer)
  std::uint64_t records_read = 0;  // records read from storage
  std::uint64_t cache_hits = 0, cache_misses = 0;
  std::uint64_t cache_bytes = 0, cache_records = 0;  // what the cache holds
  bool peer_cache = false;         // ReaderOptions::peer_cache in use
  PeerCacheStats peer;             // its counters
  std::uint64_t corrupt = 0;       // records that failed (checksum, header or tile data)
  std::uint64_t replaced = 0;      // slots filled with a replacement record (skip)
  std::uint64_t raised = 0;        // batches that raised an error
  StageTimes busy;
  double wait_seconds = 0;         // consumer time blocked in next()
  double max_wait_seconds = 0;
  std::uint64_t stalled_batches = 0;  // batches the consumer waited > 1 ms for
  double wall_seconds = 0;          // from the first next() (or reset) to the last batch
  std::uint32_t workers = 0;        // threads of the decode/transform/assemble stages

  double images_per_second() const noexcept;
  // The stage that bounds throughput (DS-Analyzer style): "consumer" when the
  // consumer hardly waits, else "read" or the busiest worker stage.
  std::string bottleneck() const;
  std::string summary() const;  // several lines of text
  std::string to_json() const;
  // The what-if for a step time (> 0) and batch size (> 0); as text (one line) or JSON.
  FeedPlan feed_plan(double step_seconds, std::uint32_t batch_size) const;
  std::string feed_summary(double step_seconds, std::uint32_t batch_size) const;
  std::string to_json(double step_seconds, std::uint32_t batch_size) const;  // to_json() plus "what_if"
};

class Reader {
public:
  Reader(std::shared_ptr<const Dataset> dataset, ReaderOptions options);
  static Reader open(const std::filesystem::path& dir, ReaderOptions options, DatasetOptions dataset_options = {});
  ~Reader();
  Reader(Reader&&) noexcept;
  Reader& operator=(Reader&&) noexcept;

  // The next batch of this rank's epoch, or nullptr at its end. Throws the
  // l3::Error of a corrupt record under ErrorPolicy::raise.
  // Device batches (Batch::device >= 0): `consumer_streams` are the CUDA
  // streams (cudaStream_t; nullptr: the legacy default stream) on which the
  // consumers enqueued their reads of the batch the previous next() returned;
  // that buffer is refilled only after the work enqueued on each of them so
  // far has run. The order is kept on the device (an event per stream that
  // the backend's next writes wait for): the consumer's thread never blocks on
  // its streams. No stream: the legacy default stream. Ignored for host batches.
  const Batch* next(std::span<void* const> consumer_streams);
  const Batch* next(void* consumer_stream = nullptr);  // one consumer stream
  // Hands the batch the last next() returned back now, its refill ordered
  // after `consumer_streams` as next() orders it: before set_epoch(),
  // restore() or the reader's destruction while consumers' work on a device
  // batch may still be queued (those hand the batch back after the legacy
  // default stream). The batch must not be used after. No-op without one.
  void release(std::span<void* const> consumer_streams);
  // Hands the buffer of the batch the last next() returned over to the caller:
  // ownership without a copy, for consumers that keep batches past the next
  // call (l3.Loader). The caller frees it with the reader's BatchAllocator
  // (deallocate(p, Batch::bytes, kBatchAlignment)); the slot goes on in a new
  // buffer from that allocator, which Batch::data then points at (a pooling
  // allocator makes this free of allocation in steady state). Host batches of
  // the BatchAllocator only: throws invalid_argument with a batch backend or
  // without a batch handed out.
  void* detach();
  // Starts epoch `epoch` from its first position (the pipeline restarts).
  void set_epoch(std::uint64_t epoch);
  std::uint64_t epoch() const noexcept;
  // Batches of this rank in the current epoch (from the position it started at).
  std::uint64_t batches_in_epoch() const noexcept;

  ReaderState state() const;
  // Continues from `state` (any world size; seed and dataset size must match).
  void restore(const ReaderState& state);

  Metrics metrics() const;
  void reset_metrics();
  const ReaderOptions& options() const noexcept;
  const Dataset& dataset() const noexcept;

private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace l3
