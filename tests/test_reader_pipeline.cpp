// The reader pipeline end to end: contents against a reference built from full
// decodes, partition through the reader, resume (also across a world-size
// change), echo and cache counts, error policies, buffer reuse. Also run under
// TSan (ctest label tsan).
#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <memory>
#include <set>
#include <utility>
#include <vector>

#include "l3/reader/reader.hpp"
#include "test_reader_util.hpp"

using namespace l3;

namespace {

struct Collected {
  std::vector<std::uint64_t> records;
  std::vector<std::int64_t> labels;
  std::vector<std::vector<std::uint8_t>> examples;  // bytes of each example
  std::uint64_t batches = 0;
};

// Reads up to max_batches batches (all when 0) and copies them out.
Collected collect(Reader& r, std::uint64_t max_batches = 0) {
  Collected c;
  while (!max_batches || c.batches < max_batches) {
    const Batch* b = r.next();
    if (!b) break;
    const std::size_t ex = b->bytes / b->size;
    for (std::uint32_t k = 0; k < b->size; ++k) {
      c.records.push_back(b->records[k]);
      c.labels.push_back(b->labels[k]);
      const auto* p = static_cast<const std::uint8_t*>(b->data) + k * ex;
      c.examples.emplace_back(p, p + ex);
    }
    ++c.batches;
  }
  return c;
}

void append(Collected& a, const Collected& b) {
  a.records.insert(a.records.end(), b.records.begin(), b.records.end());
  a.labels.insert(a.labels.end(), b.labels.begin(), b.labels.end());
  a.examples.insert(a.examples.end(), b.examples.begin(), b.examples.end());
  a.batches += b.batches;
}

ReaderOptions small_options() {
  ReaderOptions o;
  o.batch_size = 4;
  o.workers = 2;
  o.prefetch = 2;
  o.seed = 11;
  o.transform.width = 20;
  o.transform.height = 16;
  o.transform.dtype = DType::uint8;
  o.transform.layout = Layout::hwc;
  return o;
}

std::shared_ptr<const Dataset> open_synth(const std::string& name, const l3::test::SynthSpec& spec = {}) {
  const auto dir = l3::test::fresh_dir(name);
  l3::test::write_synth_dataset(dir, spec);
  return std::make_shared<const Dataset>(Dataset::open(dir));
}

// The example the reader should produce for `record` (copy `copy`), computed
// from a full decode of the image.
std::vector<std::uint8_t> reference_example(const Dataset& ds, const ReaderOptions& o, std::uint64_t epoch,
                                            std::uint64_t record, std::uint32_t copy = 0) {
  ImageInfo info;
  const auto px = decode(ds.record(record).payload, &info);
  xf::Rng rng = xf::example_rng(o.seed, epoch, record, copy);
  const ExamplePlan plan = plan_example(o.transform, info.width, info.height, rng);
  TransformScratch scratch;
  std::vector<std::uint8_t> hwc(std::size_t{o.transform.width} * o.transform.height * o.transform.channels);
  crop_resize(ImageView{px.data(), info.width, info.height, info.channels, 0}, 0, 0, plan, o.transform, scratch,
              hwc.data());
  std::vector<std::uint8_t> out(example_bytes(o.transform));
  assemble(hwc.data(), o.transform, out.data());
  return out;
}

std::uint64_t payload_bytes(const Dataset& ds) {
  std::uint64_t total = 0;
  for (std::uint64_t i = 0; i < ds.size(); ++i) total += ds.record(i).payload.size();
  return total;
}

}  // namespace

TEST_CASE("batches equal a reference built from full decodes (random resized crop, centre crop)") {
  auto ds = open_synth("reference");
  for (int variant = 0; variant < 3; ++variant) {
    ReaderOptions o = small_options();
    if (variant == 1) {
      o.transform.dtype = DType::float32;
      o.transform.layout = Layout::chw;
      o.transform.scale_min = 0.05;
      o.transform.scale_max = 0.3;  // small crops: decode_region touches few tiles
    } else if (variant == 2) {
      o.transform.crop = CropMode::center;
      o.transform.center_fraction = 0;  // exact crop through decode_region
      o.transform.dtype = DType::float16;
    }
    CAPTURE(variant);
    Reader r(ds, o);
    CHECK(r.batches_in_epoch() == 10);
    const Collected c = collect(r);
    REQUIRE(c.records.size() == 40);
    std::set<std::uint64_t> seen(c.records.begin(), c.records.end());
    CHECK(seen.size() == 40);
    for (std::size_t i = 0; i < c.records.size(); ++i) {
      CHECK(c.labels[i] == static_cast<std::int64_t>(c.records[i] % 5));
      CHECK(c.examples[i] == reference_example(*ds, o, 0, c.records[i]));
    }
    const Metrics m = r.metrics();
    CHECK(m.batches == 10);
    CHECK(m.examples == 40);
    CHECK(m.fresh == 40);
    CHECK(m.echoed == 0);
    CHECK(m.bytes_read == payload_bytes(*ds));
    CHECK(m.busy.decode > 0);
    CHECK(m.summary().find("bound by:") != std::string::npos);
  }
}

TEST_CASE("order through the reader: deterministic per (seed, epoch), new each epoch, block shuffle") {
  auto ds = open_synth("order");
  ReaderOptions o = small_options();
  Reader a(ds, o), b(ds, o);
  const Collected ca = collect(a), cb = collect(b);
  CHECK(ca.records == cb.records);
  CHECK(ca.examples == cb.examples);
  ReaderOptions unverified = o;
  unverified.verify = Verify::no;  // pages are prefaulted by the read stage instead
  Reader u(ds, unverified);
  const Collected cu = collect(u);
  CHECK(cu.examples == ca.examples);
  CHECK(u.metrics().bytes_read == a.metrics().bytes_read);
  a.set_epoch(1);
  const Collected ca1 = collect(a);
  CHECK(ca1.records.size() == 40);
  CHECK(ca1.records != ca.records);
  CHECK(a.next() == nullptr);

  o.block_size = 8;
  o.shuffle = true;
  Reader blocks(ds, o);
  const Collected cbk = collect(blocks);
  int sequential = 0;
  for (std::size_t i = 1; i < cbk.records.size(); ++i) {
    const bool step = cbk.records[i] == cbk.records[i - 1] + 1;
    sequential += step;
    if (!step) CHECK(cbk.records[i] % 8 == 0);  // a jump lands on a block start
  }
  CHECK(sequential >= 35);  // 5 blocks of 8: 7 steps inside each (more if two blocks happen to follow each other)
}

TEST_CASE("world sizes 1..8 through the reader: disjoint, complete, equal lengths") {
  l3::test::SynthSpec spec;
  spec.records = 37;
  spec.min_side = 20;
  spec.max_side = 30;
  auto ds = open_synth("worlds", spec);
  for (std::uint32_t world = 1; world <= 8; ++world) {
    CAPTURE(world);
    std::map<std::uint64_t, int> count;
    std::uint64_t length = 0;
    for (std::uint32_t rank = 0; rank < world; ++rank) {
      ReaderOptions o = small_options();
      o.batch_size = 3;
      o.workers = 1;
      o.world_size = world;
      o.rank = rank;
      o.transform.width = o.transform.height = 8;
      Reader r(ds, o);
      const Collected c = collect(r);
      if (rank == 0) length = c.records.size();
      CHECK(c.records.size() == length);
      for (auto rec : c.records) ++count[rec];
    }
    CHECK(count.size() == 37);  // complete (pad mode)
    int repeats = 0;
    for (auto& [rec, n] : count) repeats += n - 1;
    CHECK(repeats == static_cast<int>(length * world - 37));  // only the wrap-around pad repeats
    CHECK(repeats < static_cast<int>(3 * world));
  }
}

TEST_CASE("resume: an interrupted epoch continues with exactly the remaining batches") {
  auto ds = open_synth("resume");
  for (std::uint32_t world : {1u, 2u}) {
    ReaderOptions o = small_options();
    o.world_size = world;
    o.epoch = 3;
    Reader full(ds, o);
    const Collected all = collect(full);
    Reader first(ds, o);
    const Collected head = collect(first, 2);
    const std::string json = first.state().to_json();
    const ReaderState st = ReaderState::from_json(json);
    CHECK(st.epoch == 3);
    CHECK(st.consumed == 2 * 4 * world);
    ReaderOptions o2 = o;
    o2.seed = 999;  // the state's seed wins
    Reader second(ds, o2);
    second.restore(st);
    Collected tail = collect(second);
    Collected joined = head;
    append(joined, tail);
    CHECK(joined.records == all.records);
    CHECK(joined.examples == all.examples);
    CHECK(second.state().consumed == 40);
  }
}

TEST_CASE("resume across a world-size change (4 -> 3): the remainder, with the same crops") {
  auto ds = open_synth("resume_world");
  ReaderOptions base = small_options();
  base.remainder = Remainder::drop;
  base.batch_size = 2;
  // Reference crops: one rank, whole epoch, keyed by record.
  ReaderOptions one = base;
  Reader single(ds, one);
  const Collected ref = collect(single);
  std::map<std::uint64_t, std::vector<std::uint8_t>> by_record;
  for (std::size_t i = 0; i < ref.records.size(); ++i) by_record[ref.records[i]] = ref.examples[i];
  REQUIRE(by_record.size() == 40);

  std::set<std::uint64_t> seen;
  ReaderState st;
  for (std::uint32_t rank = 0; rank < 4; ++rank) {
    ReaderOptions o = base;
    o.world_size = 4;
    o.rank = rank;
    Reader r(ds, o);
    const Collected c = collect(r, 2);  // 2 batches of 2 per rank: 16 samples
    for (std::size_t i = 0; i < c.records.size(); ++i) {
      CHECK(seen.insert(c.records[i]).second);
      CHECK(c.examples[i] == by_record[c.records[i]]);
    }
    if (rank == 0) st = r.state();
    CHECK(r.state() == st);  // every rank reports the same global state
  }
  CHECK(st.consumed == 16);
  for (std::uint32_t rank = 0; rank < 3; ++rank) {
    ReaderOptions o = base;
    o.world_size = 3;
    o.rank = rank;
    Reader r(ds, o);
    r.restore(ReaderState::from_json(st.to_json()));
    const Collected c = collect(r);
    CHECK(c.records.size() == 24 / 6 * 2);  // 24 remaining, steps of 3 ranks x 2: 4 each
    for (std::size_t i = 0; i < c.records.size(); ++i) {
      CHECK(seen.insert(c.records[i]).second);  // disjoint from everything before
      CHECK(c.examples[i] == by_record[c.records[i]]);
    }
  }
  CHECK(seen.size() == 40);  // 16 + 24: the epoch, each sample once
}

TEST_CASE("data echoing: exact fresh and echoed counts, shuffled copies, exact resume") {
  auto ds = open_synth("echo");
  ReaderOptions o = small_options();
  o.echo = 2;
  Reader r(ds, o);
  CHECK(r.batches_in_epoch() == 20);
  const Collected c = collect(r);
  CHECK(c.records.size() == 80);
  std::map<std::uint64_t, int> count;
  for (auto rec : c.records) ++count[rec];
  CHECK(count.size() == 40);
  for (auto& [rec, n] : count) CHECK(n == 2);
  const Metrics m = r.metrics();
  CHECK(m.fresh == 40);
  CHECK(m.echoed == 40);
  CHECK(m.examples == 80);
  CHECK(m.bytes_read == payload_bytes(*ds));  // each record read once
  // Copies get their own crops: copy c of record r equals the reference for (r, c).
  std::map<std::uint64_t, int> copies_seen;
  int differing = 0;
  std::map<std::uint64_t, std::vector<std::uint8_t>> first_copy;
  for (std::size_t i = 0; i < c.records.size(); ++i) {
    const auto a = reference_example(*ds, o, 0, c.records[i], 0), b = reference_example(*ds, o, 0, c.records[i], 1);
    CHECK((c.examples[i] == a || c.examples[i] == b));
    if (first_copy.count(c.records[i])) differing += first_copy[c.records[i]] != c.examples[i];
    else first_copy[c.records[i]] = c.examples[i];
  }
  CHECK(differing >= 35);
  // The window shuffle mixes copies: not every copy sits next to its twin.
  int adjacent = 0;
  for (std::size_t i = 1; i < c.records.size(); ++i) adjacent += c.records[i] == c.records[i - 1];
  CHECK(adjacent < 30);

  // Resume mid-window (batch 3 of windows of 2 batches) at the same world size.
  Reader head_reader(ds, o);
  const Collected head = collect(head_reader, 3);
  const ReaderState st = head_reader.state();
  CHECK(st.window_batches == 1);
  Reader tail_reader(ds, o);
  tail_reader.restore(st);
  Collected joined = head;
  append(joined, collect(tail_reader));
  CHECK(joined.records == c.records);
  CHECK(joined.examples == c.examples);
  const Metrics mt = tail_reader.metrics();
  CHECK(mt.fresh + mt.echoed == 80 - 12);
}

TEST_CASE("cache: no-eviction budget, exact hits and misses") {
  auto ds = open_synth("cache");
  ReaderOptions o = small_options();
  o.cache_bytes = 1ull << 30;
  {
    Reader r(ds, o);
    collect(r);
    Metrics m = r.metrics();
    CHECK(m.cache_hits == 0);
    CHECK(m.cache_misses == 40);
    CHECK(m.cache_records == 40);
    CHECK(m.bytes_read == payload_bytes(*ds));
    r.set_epoch(1);
    collect(r);
    m = r.metrics();
    CHECK(m.cache_hits == 40);
    CHECK(m.cache_misses == 40);
    CHECK(m.bytes_read == payload_bytes(*ds));  // nothing read from storage in epoch 1
  }
  // A budget of about a third: the records that fit first stay; a fixed hit count per epoch.
  o.cache_bytes = payload_bytes(*ds) / 3;
  Reader r(ds, o);
  const Collected e0 = collect(r);
  std::uint64_t used = 0, cached = 0;
  for (auto rec : e0.records) {
    const auto size = ds->record(rec).payload.size();
    if (used + size <= o.cache_bytes) {
      used += size;
      ++cached;
    }
  }
  REQUIRE(cached > 5);
  REQUIRE(cached < 35);
  Metrics m = r.metrics();
  CHECK(m.cache_records == cached);
  CHECK(m.cache_bytes == used);
  CHECK(m.cache_hits == 0);
  for (std::uint64_t epoch = 1; epoch <= 2; ++epoch) {
    r.set_epoch(epoch);
    collect(r);
  }
  m = r.metrics();
  CHECK(m.cache_hits == 2 * cached);
  CHECK(m.cache_misses == 40 + 2 * (40 - cached));
  CHECK(m.cache_records == cached);  // no eviction, no new entries after the budget is spent
}

// spec/codec.md §2: a decoder MAY skip the stream's checksum when the same
// bytes were just verified by the record's (spec/format.md). The reader does
// with Verify::yes, and checks the stream's own with Verify::no. Record 13's
// stream has a wrong checksum field under a record checksum that matches it:
// only the stream's check can tell.
TEST_CASE("one checksum pass per record: the record's with Verify::yes, the stream's with Verify::no") {
  l3::test::SynthSpec spec;
  spec.bad_stream_checksum = 13;
  const auto dir = l3::test::fresh_dir("stream-checksum");
  l3::test::write_synth_dataset(dir, spec);
  auto ds = std::make_shared<const Dataset>(Dataset::open(dir));
  ReaderOptions o = small_options();
  o.on_error = ErrorPolicy::raise;
  // The records of the epoch's batches that arrived, and the error of the one that raised.
  auto read_epoch = [&](Verify verify) {
    o.verify = verify;
    Reader r(ds, o);
    std::set<std::uint64_t> seen;
    errc code = errc::ok;
    for (;;) {
      try {
        const Batch* b = r.next();
        if (!b) break;
        seen.insert(b->records.begin(), b->records.end());
      } catch (const Error& e) {
        code = e.code();
      }
    }
    return std::pair{seen, code};
  };
  SUBCASE("Verify::yes: the record checksum matches, so record 13 decodes (its pixels are intact)") {
    const auto [seen, code] = read_epoch(Verify::yes);
    CHECK(code == errc::ok);
    CHECK(seen.size() == spec.records);
    CHECK(seen.count(13) == 1);
  }
  SUBCASE("Verify::no: the stream's own checksum rejects record 13") {
    const auto [seen, code] = read_epoch(Verify::no);
    CHECK(code == errc::checksum_mismatch);
    CHECK(seen.count(13) == 0);
    CHECK(seen.size() == spec.records - o.batch_size);  // the one batch with record 13 raised
  }
}

TEST_CASE("corrupt records: raise or skip-and-fill") {
  const auto dir = l3::test::fresh_dir("corrupt");
  l3::test::write_synth_dataset(dir);
  l3::test::corrupt_record(dir, 13);
  auto ds = std::make_shared<const Dataset>(Dataset::open(dir));
  ReaderOptions o = small_options();

  SUBCASE("raise: the batch with the bad record throws; the others arrive") {
    o.on_error = ErrorPolicy::raise;
    Reader r(ds, o);
    int raised = 0, good = 0;
    errc code = errc::ok;
    std::string message;
    for (;;) {
      try {
        const Batch* b = r.next();
        if (!b) break;
        ++good;
        for (auto rec : b->records) CHECK(rec != 13);
      } catch (const Error& e) {
        ++raised;
        code = e.code();
        message = e.what();
      }
    }
    CHECK(raised == 1);
    CHECK(good == 9);
    CHECK(code == errc::checksum_mismatch);
    // the message names the record, its shard file (7 records a shard: shard-1, index 6) and its key
    const std::string where = "record 13 (shard " + (dir / "shard-1.l3s").string() + ", index 6, key 'img13')";
    CHECK_MESSAGE(message.rfind("checksum mismatch: " + where + ": ", 0) == 0, message);
    const Metrics m = r.metrics();
    CHECK(m.raised == 1);
    CHECK(m.batches == 9);
    CHECK(m.corrupt == 0);  // counted as raised, not replaced
  }
  SUBCASE("skip: full batches, the next record fills the slot") {
    o.on_error = ErrorPolicy::skip;
    Reader clean_order(std::make_shared<const Dataset>(Dataset::open(dir)), o);
    Reader r(ds, o);
    const Collected c = collect(r);
    CHECK(c.batches == 10);
    CHECK(c.records.size() == 40);
    std::map<std::uint64_t, int> count;
    for (auto rec : c.records) ++count[rec];
    CHECK(count.count(13) == 0);
    CHECK(count.size() == 39);
    // Which record follows 13 in this epoch's order? It appears twice.
    EpochOrder order(40, OrderOptions{o.seed, true, 0}, 0);
    std::uint64_t pos13 = 0;
    for (std::uint64_t p = 0; p < 40; ++p)
      if (order[p] == 13) pos13 = p;
    const std::uint64_t next = order[(pos13 + 1) % 40];
    CHECK(count[next] == 2);
    const Metrics m = r.metrics();
    CHECK(m.corrupt == 1);
    CHECK(m.replaced == 1);
    CHECK(m.raised == 0);
  }
}

TEST_CASE("a record that is not an image fails in the decode stage; skip replaces it") {
  const auto dir = l3::test::fresh_dir("garbage");
  {
    l3::test::write_synth_dataset(dir);
    // One more shard holding a record with a valid checksum and invalid bytes.
    Manifest manifest = read_manifest(dir);
    ShardWriter w(dir / "extra.l3s");
    const std::vector<std::uint8_t> junk(100, 0x42);
    w.append(junk, 0, "junk");
    manifest.shards.push_back(manifest_entry(w.finalize()));
    write_manifest_atomic(dir, manifest);
  }
  auto ds = std::make_shared<const Dataset>(Dataset::open(dir));
  REQUIRE(ds->size() == 41);
  ReaderOptions o = small_options();
  o.remainder = Remainder::drop;  // 40 of 41
  o.on_error = ErrorPolicy::skip;
  o.seed = 5;
  Reader r(ds, o);
  const Collected c = collect(r);
  CHECK(c.records.size() == 40);
  for (auto rec : c.records) CHECK(rec != 40);
  const Metrics m = r.metrics();
  EpochOrder order(41, OrderOptions{5, true, 0}, 0);
  bool junk_in_epoch = false;
  for (std::uint64_t p = 0; p < 40; ++p) junk_in_epoch = junk_in_epoch || order[p] == 40;
  CHECK(m.corrupt == (junk_in_epoch ? 1u : 0u));
  CHECK(m.replaced == m.corrupt);
  o.on_error = ErrorPolicy::raise;
  Reader raising(ds, o);
  int raised = 0;
  for (;;) {
    try {
      if (!raising.next()) break;
    } catch (const Error& e) {
      CHECK(e.code() == errc::bad_magic);
      // a decode-stage error names the shard file and the key too
      CHECK_MESSAGE(std::string(e.what()).find("(shard " + (dir / "extra.l3s").string() + ", index 0, key 'junk')") !=
                        std::string::npos,
                    e.what());
      ++raised;
    }
  }
  CHECK(raised == (junk_in_epoch ? 1 : 0));
}

namespace {
class CountingAllocator final : public BatchAllocator {
public:
  const char* name() const noexcept override { return "counting"; }
  void* allocate(std::size_t bytes, std::size_t alignment) override {
    ++allocations;
    return inner->allocate(bytes, alignment);
  }
  void deallocate(void* p, std::size_t bytes, std::size_t alignment) noexcept override {
    ++deallocations;
    inner->deallocate(p, bytes, alignment);
  }
  std::shared_ptr<BatchAllocator> inner = make_cpu_batch_allocator();
  int allocations = 0, deallocations = 0;
};
}  // namespace

TEST_CASE("batch buffers: a ring allocated once through the allocator hook") {
  auto ds = open_synth("alloc");
  auto alloc = std::make_shared<CountingAllocator>();
  {
    ReaderOptions o = small_options();
    o.allocator = alloc;
    o.prefetch = 3;
    Reader r(ds, o);
    std::set<const void*> buffers;
    for (std::uint64_t e = 0; e < 3; ++e) {
      r.set_epoch(e);
      while (const Batch* b = r.next()) buffers.insert(b->data);
    }
    CHECK(alloc->allocations == 4);  // prefetch 3 + 1 window batch
    CHECK(buffers.size() == 4);
  }
  CHECK(alloc->deallocations == 4);
}

TEST_CASE("detach: batches handed over without a copy stay intact; the ring goes on in new buffers") {
  auto ds = open_synth("detach");
  auto alloc = std::make_shared<CountingAllocator>();
  ReaderOptions o = small_options();
  o.allocator = alloc;
  o.prefetch = 3;
  std::vector<std::vector<std::uint8_t>> expected;  // the same epoch, read without detach
  {
    Reader plain(ds, o);
    while (const Batch* b = plain.next()) {
      const auto* p = static_cast<const std::uint8_t*>(b->data);
      expected.emplace_back(p, p + b->bytes);
    }
  }
  alloc->allocations = alloc->deallocations = 0;
  std::vector<void*> kept;
  std::size_t bytes = 0;
  {
    Reader r(ds, o);
    CHECK(l3::test::error_of([&] { r.detach(); }) == errc::invalid_argument);  // nothing handed out yet
    while (const Batch* b = r.next()) {
      void* before = b->data;
      bytes = b->bytes;
      kept.push_back(r.detach());
      CHECK(kept.back() == before);
      CHECK(b->data != before);  // the slot's new buffer
    }
    CHECK(l3::test::error_of([&] { r.detach(); }) == errc::invalid_argument);  // end of epoch: none held
  }
  // Every batch kept its bytes although the ring went on filling (no buffer reused).
  REQUIRE(kept.size() == expected.size());
  for (std::size_t i = 0; i < kept.size(); ++i) {
    const auto* p = static_cast<const std::uint8_t*>(kept[i]);
    CHECK(std::vector<std::uint8_t>(p, p + bytes) == expected[i]);
  }
  CHECK(std::set<void*>(kept.begin(), kept.end()).size() == kept.size());
  CHECK(alloc->allocations == 4 + static_cast<int>(kept.size()));  // the ring, then one per detach
  CHECK(alloc->deallocations == 4);                                 // the ring's buffers at destruction
  for (void* p : kept) alloc->deallocate(p, bytes, kBatchAlignment);
}

TEST_CASE("state JSON round trip and rejection") {
  ReaderState s;
  s.seed = 1;
  s.epoch = 2;
  s.consumed = 30;
  s.dataset_size = 40;
  s.world_size = 4;
  s.window_batches = 1;
  CHECK(ReaderState::from_json(s.to_json()) == s);
  CHECK(l3::test::error_of([] { ReaderState::from_json("{"); }) == errc::corrupt_header);
  CHECK(l3::test::error_of([] { ReaderState::from_json(R"({"version":1})"); }) == errc::corrupt_header);
  CHECK(l3::test::error_of([&] {
          auto t = s;
          t.consumed = 41;
          ReaderState::from_json(t.to_json());
        }) == errc::corrupt_header);
}

TEST_CASE("restore and destruction in the middle of an epoch, many times (TSan target)") {
  auto ds = open_synth("stress");
  ReaderOptions o = small_options();
  o.workers = 3;
  o.prefetch = 1;
  o.read_ahead = 2;
  o.echo = 2;
  Reader r(ds, o);
  for (int i = 0; i < 20; ++i) {
    collect(r, static_cast<std::uint64_t>(i % 4));
    const ReaderState st = r.state();
    if (i % 3 == 0) r.set_epoch(static_cast<std::uint64_t>(i));
    else r.restore(st);
    (void)r.metrics();
  }
  for (int i = 0; i < 5; ++i) {
    Reader quick(ds, o);
    collect(quick, 1);
  }
  CHECK(r.metrics().batches > 0);
}

TEST_CASE("what-if (DS-Analyzer): workers and read time needed to feed a step time") {
  Metrics m;
  m.examples = 1000;
  m.workers = 2;
  m.busy.decode = 1.2;    // 1.2 ms per example
  m.busy.transform = 0.8;  // + 0.8 ms: 2 ms of worker time per example
  m.busy.read = 0.1;       // 0.1 ms per example on the read thread
  // A batch of 64 every 100 ms: 128 ms of worker time per batch = 1.28 threads.
  FeedPlan f = m.feed_plan(0.1, 64);
  CHECK(f.worker_seconds_per_batch == doctest::Approx(0.128));
  CHECK(f.read_seconds_per_batch == doctest::Approx(0.0064));
  CHECK(f.workers_needed == doctest::Approx(1.28));
  CHECK(f.images_per_second_needed == doctest::Approx(640));
  CHECK(f.max_images_per_second == doctest::Approx(1000));  // 2 workers / 2 ms
  CHECK(f.limit == "none");
  // 40 ms: 3.2 threads, more than the 2 it has.
  f = m.feed_plan(0.04, 64);
  CHECK(f.workers_needed == doctest::Approx(3.2));
  CHECK(f.limit == "workers");
  CHECK(m.feed_summary(0.04, 64).find("give it 4 workers") != std::string::npos);
  // The read thread: 10 ms per example can never feed 64 per 100 ms.
  m.busy.read = 10.0;
  f = m.feed_plan(0.1, 64);
  CHECK(f.limit == "read");
  CHECK(f.max_images_per_second == doctest::Approx(100));
  CHECK(m.feed_summary(0.1, 64).find("STALLS on the read thread") != std::string::npos);
  CHECK(Metrics{}.feed_plan(0.1, 64).limit == "unknown");
  const std::string j = m.to_json(0.1, 64);
  CHECK(j.find("\"what_if\":{\"step_seconds\":0.1,\"batch_size\":64") != std::string::npos);
  CHECK(j.find("\"limit\":\"read\"") != std::string::npos);
}
