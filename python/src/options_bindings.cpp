// The reader's options bound as they are in C++ (l3/reader/reader.hpp, l3/reader/transforms.hpp):
// l3.ReaderOptions, l3.TransformOptions, l3.PeerCacheOptions and their enums
// (l3.CropMode, l3.Layout, l3.DType, l3.ErrorPolicy, l3.Remainder, l3.Verify).
// One spelling everywhere: an enum value's name is the string l3.Loader takes
// (crop="random_resized", layout="chw", dtype="float32", on_error="skip") and
// l3pack bench-read's --mode takes. The defaults are the C++ ones: l3.Loader's
// signature takes its defaults from a default ReaderOptions.
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <string>
#include <vector>

#include "ext.hpp"
#include "l3/common/error.hpp"
#include "l3/reader/reader.hpp"

namespace l3py {
namespace {

using namespace nb::literals;

void bind_enums(nb::module_& m) {
  nb::enum_<l3::CropMode>(m, "CropMode", "How an example's crop box is drawn (l3::CropMode).")
      .value(l3::crop_mode_name(l3::CropMode::random_resized), l3::CropMode::random_resized,
             "torchvision's RandomResizedCrop(scale, ratio), resized to the output size")
      .value(l3::crop_mode_name(l3::CropMode::center), l3::CropMode::center,
             "the centred box (center_fraction), resized to the output size")
      .value(l3::crop_mode_name(l3::CropMode::full), l3::CropMode::full,
             "the whole image, resized to the output size (aspect not kept)");
  nb::enum_<l3::Layout>(m, "Layout", "Axis order of a batch tensor (l3::Layout).")
      .value(l3::layout_name(l3::Layout::chw), l3::Layout::chw, "N x C x H x W")
      .value(l3::layout_name(l3::Layout::hwc), l3::Layout::hwc, "N x H x W x C");
  nb::enum_<l3::DType>(m, "DType", "Element type of a batch tensor (l3::DType).")
      .value(l3::dtype_name(l3::DType::float32), l3::DType::float32)
      .value(l3::dtype_name(l3::DType::float16), l3::DType::float16)
      .value(l3::dtype_name(l3::DType::uint8), l3::DType::uint8);
  nb::enum_<l3::ErrorPolicy>(m, "ErrorPolicy", "What a corrupt record does (l3::ErrorPolicy); ErrorPolicy['raise'].")
      .value("raise", l3::ErrorPolicy::raise, "next() raises the record's l3.DataError for that batch")
      .value("skip", l3::ErrorPolicy::skip, "the next valid record of this rank takes its place");
  nb::enum_<l3::Remainder>(m, "Remainder", "Equal batches per rank (l3::Remainder).")
      .value("pad", l3::Remainder::pad, "pad by wrapping around the epoch's order")
      .value("drop", l3::Remainder::drop, "drop the remainder (drop_last=True)");
  nb::enum_<l3::Verify>(m, "Verify", "Check each record's checksum when read from storage (l3::Verify).")
      .value("no", l3::Verify::no)
      .value("yes", l3::Verify::yes);
}

// mean / std: three floats (float[3] in C++).
std::vector<float> triple(const float (&v)[3]) { return {v[0], v[1], v[2]}; }
void set_triple(float (&v)[3], const std::vector<float>& x, const char* name) {
  if (x.size() != 3) l3::throw_error(l3::errc::invalid_argument, std::string(name) + " must have 3 values");
  for (std::size_t k = 0; k < 3; ++k) v[k] = x[k];
}

void bind_transform_options(nb::module_& m) {
  using T = l3::TransformOptions;
  nb::class_<T>(m, "TransformOptions", "Crop, resize, flip and output of each example (l3::TransformOptions).")
      .def(nb::init<>())
      .def_rw("width", &T::width, "output width")
      .def_rw("height", &T::height, "output height")
      .def_rw("channels", &T::channels, "3: gray replicated, alpha dropped; 1: gray sources only")
      .def_rw("crop", &T::crop, "l3.CropMode (Loader: crop=)")
      .def_rw("scale_min", &T::scale_min, "random_resized: area fraction range")
      .def_rw("scale_max", &T::scale_max)
      .def_rw("ratio_min", &T::ratio_min, "random_resized: aspect (w/h) range")
      .def_rw("ratio_max", &T::ratio_max)
      .def_rw("center_fraction", &T::center_fraction, "center: fraction of the largest centred box; 0: exact crop")
      .def_rw("antialias", &T::antialias, "widen the bilinear filter by the scale when shrinking")
      .def_rw("flip_probability", &T::flip_probability, "horizontal flip")
      .def_rw("layout", &T::layout, "l3.Layout of the batch tensor")
      .def_rw("dtype", &T::dtype, "l3.DType of the batch tensor")
      .def_rw("normalize", &T::normalize, "float outputs: (v/255 - mean) / std; otherwise v/255")
      .def_prop_rw(
          "mean", [](const T& t) { return triple(t.mean); },
          [](T& t, const std::vector<float>& v) { set_triple(t.mean, v, "mean"); }, "per channel (3 values)")
      .def_prop_rw(
          "std", [](const T& t) { return triple(t.std); },
          [](T& t, const std::vector<float>& v) { set_triple(t.std, v, "std"); }, "per channel (3 values)");
}

void bind_reader_options(nb::module_& m) {
  using P = l3::PeerCacheOptions;
  nb::class_<P>(m, "PeerCacheOptions", "The nodes' memcached (l3::PeerCacheOptions, spec/format.md §8.6).")
      .def(nb::init<>())
      .def_rw("servers", &P::servers, "'host:port' of every node's memcached, the same list on every node")
      .def_rw("timeout_ms", &P::timeout_ms, "bound on connecting, sending and each wait for a reply")
      .def_rw("retry_ms", &P::retry_ms, "a server that failed is not asked again for this long");

  using O = l3::ReaderOptions;
  nb::class_<O>(m, "ReaderOptions", "The streaming reader's options (l3::ReaderOptions; l3.Loader builds one).")
      .def(nb::init<>())
      .def_rw("batch_size", &O::batch_size, "examples per batch")
      .def_rw("workers", &O::workers, "decode/transform threads")
      .def_rw("prefetch", &O::prefetch, "batches prepared ahead of the consumer (>= 1)")
      .def_rw("read_ahead", &O::read_ahead, "records queued between read and decode; 0: 2 * batch_size")
      .def_rw("seed", &O::seed, "order and random transforms are pure functions of (seed, epoch)")
      .def_rw("shuffle", &O::shuffle, "False: the dataset's order")
      .def_rw("block_size", &O::block_size, "> 0: shuffle blocks of this many consecutive records")
      .def_rw("world_size", &O::world_size, "ranks sharing the epoch")
      .def_rw("rank", &O::rank, "this reader's rank (< world_size)")
      .def_rw("remainder", &O::remainder, "equal samples per rank: pad by wrapping, or drop")
      .def_rw("epoch", &O::epoch, "the first epoch")
      .def_rw("echo", &O::echo, "data echoing: examples per fresh record (>= 1)")
      .def_rw("echo_window", &O::echo_window, "batches per echo shuffle window; 0: echo")
      .def_rw("cache_bytes", &O::cache_bytes, "RAM cache budget of compressed records; 0: no cache")
      .def_rw("peer_cache", &O::peer_cache, "l3.PeerCacheOptions: servers set: the nodes' memcached")
      .def_rw("on_error", &O::on_error, "l3.ErrorPolicy for a corrupt record")
      .def_rw("max_replacements", &O::max_replacements, "skip: records tried before giving up and raising")
      .def_rw("verify", &O::verify, "l3.Verify: check each record's checksum when read from storage")
      .def_rw("transform", &O::transform, "l3.TransformOptions of every example");
}

}  // namespace

void bind_options(nb::module_& m) {
  bind_enums(m);
  bind_transform_options(m);
  bind_reader_options(m);
}

}  // namespace l3py
