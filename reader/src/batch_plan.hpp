// Host side of the batch transform kernels, shared by the CUDA batch backend
// and its CPU emulation: the launch's OutputSpec and the checked per-example
// descriptors (l3/reader/batch_transform_core.hpp). Everything a kernel thread reads
// is validated here, once.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "l3/reader/batch_transform_core.hpp"
#include "l3/cuda/batch_types.hpp"
#include "l3/common/error.hpp"
#include "l3/reader/reader_backend.hpp"

namespace l3::detail {

inline xf::OutputSpec output_spec(const TransformOptions& o) {
  validate(o);
  xf::OutputSpec s;
  s.width = static_cast<std::int32_t>(o.width);
  s.height = static_cast<std::int32_t>(o.height);
  s.channels = static_cast<std::int32_t>(o.channels);
  s.layout = o.layout;
  s.dtype = o.dtype == DType::uint8 ? 0 : o.dtype == DType::float32 ? 1 : 2;
  s.antialias = o.antialias ? 1 : 0;
  for (std::uint32_t c = 0; c < 3; ++c)
    s.norm[c] = o.normalize ? xf::normaliser(o.mean[c], o.std[c]) : xf::Affine{1.f / 255.f, 0.f};
  return s;
}

// Why example `x` cannot be cut from the decoded slot `s` of its record
// `r`; ok when it can.
inline errc check_example(const ExampleJob& x, const RecordJob& r, const cuda::ImageSlot& s, const xf::OutputSpec& o) {
  const xf::Box& b = x.plan.box;
  if (!x.dst) throw_error(errc::invalid_argument, "batch backend: example without output buffer");
  if (b.w <= 0 || b.h <= 0 || b.x < 0 || b.y < 0 || std::int64_t{b.x} < r.region.x || std::int64_t{b.y} < r.region.y ||
      std::int64_t{b.x} + b.w > std::int64_t{r.region.x} + s.width ||
      std::int64_t{b.y} + b.h > std::int64_t{r.region.y} + s.height)
    throw_error(errc::out_of_range, "batch backend: crop box outside its record's region");
  if (o.channels == 1 && s.channels > 2) return errc::unsupported;  // as the CPU pipeline: gray sources only
  return errc::ok;
}

// Appends the descriptor of every example whose record's status is ok, in
// example order; desc_record[i] is the record of descs[i]. A record whose
// example cannot be served gets that example's status (and none of its
// examples is described). Throws for caller errors (record index, box).
inline void build_descriptors(std::span<const RecordJob> records, std::span<const ExampleJob> examples,
                              std::span<const cuda::ImageSlot> slots, const xf::OutputSpec& o,
                              std::span<errc> status, std::vector<xf::ExampleDesc>& descs,
                              std::vector<std::uint32_t>& desc_record) {
  descs.clear();
  desc_record.clear();
  for (const ExampleJob& x : examples) {
    if (x.record >= records.size()) throw_error(errc::invalid_argument, "batch backend: example of no record");
    if (status[x.record] != errc::ok) continue;
    const errc e = check_example(x, records[x.record], slots[x.record], o);
    if (e != errc::ok) status[x.record] = e;
  }
  for (const ExampleJob& x : examples) {
    if (status[x.record] != errc::ok) continue;
    const cuda::ImageSlot& s = slots[x.record];
    const RecordJob& r = records[x.record];
    xf::ExampleDesc d;
    d.src_offset = s.offset;
    d.src_stride = s.width * s.channels;
    d.src_channels = static_cast<std::int32_t>(s.channels);
    d.box_x = x.plan.box.x - static_cast<std::int32_t>(r.region.x);
    d.box_y = x.plan.box.y - static_cast<std::int32_t>(r.region.y);
    d.box_w = x.plan.box.w;
    d.box_h = x.plan.box.h;
    d.flip = x.plan.flip ? 1 : 0;
    d.xcap = xf::max_taps(d.box_w, o.width, o.antialias != 0);
    d.ycap = xf::max_taps(d.box_h, o.height, o.antialias != 0);
    d.dst = static_cast<std::uint8_t*>(x.dst);
    descs.push_back(d);
    desc_record.push_back(x.record);
  }
}

}  // namespace l3::detail
