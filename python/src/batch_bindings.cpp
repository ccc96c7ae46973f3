// Batches handed to Python: l3.Batch and DLPack arrays over the reader's host
// or device memory. Consumer streams are the reader's (l3::Reader::next).
#include <nanobind/stl/string.h>

#include <new>
#include <string>
#include <utility>

#include "batch.hpp"
#include "l3/common/error.hpp"

namespace l3py {
namespace {

nb::dlpack::dtype dl_dtype(l3::DType d) {
  switch (d) {
    case l3::DType::uint8: return nb::dtype<std::uint8_t>();
    case l3::DType::float16: return nb::dlpack::dtype{static_cast<std::uint8_t>(nb::dlpack::dtype_code::Float), 16, 1};
    case l3::DType::float32: break;
  }
  return nb::dtype<float>();
}

// Owner of a borrowed batch array (copy=False, and every device batch): keeps
// the reader (and so its ring of buffers, host or device memory) alive; the
// bytes are overwritten by a later batch.
struct ReaderRef {
  std::shared_ptr<l3::Reader> reader;
};
void free_reader_ref(void* p) noexcept { delete static_cast<ReaderRef*>(p); }

// A batch in device memory (l3.DeviceArray wraps it): capsule() returns a new
// DLPack capsule (kDLCUDA, the batch's device) on every call; each capsule
// keeps the reader, and so the device buffer, allocated until the consumer's
// tensor is freed. Zero copy: the capsule points at the reader's buffer.
class PyDeviceArray {
public:
  PyDeviceArray(nb::ndarray<> array, const l3::Batch& b, const std::size_t* shape)
      : array_(std::move(array)),
        ptr_(reinterpret_cast<std::uintptr_t>(b.data)),
        device_(b.device),
        dtype_(l3::dtype_name(b.dtype)),
        shape_(nb::make_tuple(shape[0], shape[1], shape[2], shape[3])),
        nbytes_(b.bytes) {}
  nb::ndarray<> capsule() const { return array_; }
  std::uintptr_t ptr() const { return ptr_; }
  int device() const { return device_; }
  std::string dtype() const { return dtype_; }
  nb::tuple shape() const { return shape_; }
  std::size_t nbytes() const { return nbytes_; }

private:
  nb::ndarray<> array_;
  std::uintptr_t ptr_ = 0;
  int device_ = 0;
  std::string dtype_;
  nb::tuple shape_;
  std::size_t nbytes_ = 0;
};

}  // namespace

nb::object batch_array(const std::shared_ptr<l3::Reader>& reader, const l3::Batch& meta, PooledBuffer* owned) {
  std::size_t shape[4] = {meta.size, meta.channels, meta.height, meta.width};
  if (meta.layout == l3::Layout::hwc) {
    shape[1] = meta.height;
    shape[2] = meta.width;
    shape[3] = meta.channels;
  }
  if (meta.device >= 0) {
    nb::capsule owner(new ReaderRef{reader}, free_reader_ref);
    nb::ndarray<> arr(meta.data, 4, shape, owner, nullptr, dl_dtype(meta.dtype), nb::device::cuda::value,
                      meta.device);
    return nb::cast(PyDeviceArray(std::move(arr), meta, shape), nb::rv_policy::move);
  }
  nb::capsule owner;
  void* ptr = meta.data;
  if (owned) {
    owner = nb::capsule(owned, free_pooled_buffer);
    ptr = owned->data;
  } else {
    owner = nb::capsule(new ReaderRef{reader}, free_reader_ref);
  }
  nb::ndarray<nb::numpy> arr(ptr, 4, shape, owner, nullptr, dl_dtype(meta.dtype), nb::device::cpu::value);
  return nb::cast(arr);
}

namespace {

using namespace nb::literals;

constexpr const char* kBatchDoc =
    "One batch: `data` (N x C x H x W or N x H x W x C), `labels` (int64 numpy), `records`\n"
    "(uint64 dataset indices), `epoch`, `index` (batch number in this rank's epoch),\n"
    "`wait_seconds` (how long next() waited for it), `device` (-1: host memory; N: CUDA device N).\n\n"
    "`data` is a numpy array for host batches and an l3.DeviceArray (CUDA memory) for\n"
    "device='cuda'. Supports DLPack: torch.from_dlpack(batch) and np.from_dlpack(batch)\n"
    "(host batches) share `data`'s memory (no copy); on CUDA torch.from_dlpack(batch) gives\n"
    "a CUDA tensor (torch's current stream is recorded: see DeviceArray). Unpacks as\n"
    "`images, labels = batch`.";

void init_batch(PyBatch* b, nb::object data, nb::object labels, nb::object records, std::uint64_t epoch,
                std::uint64_t index, double wait_seconds, int device) {
  new (b) PyBatch{std::move(data), std::move(labels), std::move(records), epoch, index, wait_seconds, device};
}

std::size_t batch_len(const PyBatch& b) { return nb::cast<std::size_t>(b.data.attr("shape")[0]); }

nb::str batch_repr(const PyBatch& b) {
  const nb::object shape = nb::module_::import_("builtins").attr("tuple")(b.data.attr("shape"));
  const std::string where = b.device >= 0 ? ", device='cuda:" + std::to_string(b.device) + "'" : "";
  return nb::str("l3.Batch(shape={}, dtype={}, epoch={}, index={}{})")
      .format(shape, b.data.attr("dtype"), b.epoch, b.index, where);
}

void bind_batch_class(nb::module_& m) {
  nb::class_<PyBatch>(m, "Batch", kBatchDoc)
      .def("__init__", &init_batch, "data"_a, "labels"_a, "records"_a, "epoch"_a, "index"_a, "wait_seconds"_a,
           "device"_a = -1)
      .def_rw("data", &PyBatch::data)
      .def_rw("labels", &PyBatch::labels)
      .def_rw("records", &PyBatch::records)
      .def_rw("epoch", &PyBatch::epoch)
      .def_rw("index", &PyBatch::index)
      .def_rw("wait_seconds", &PyBatch::wait_seconds)
      .def_rw("device", &PyBatch::device)
      .def("__dlpack__", [](const PyBatch& b, nb::args args, nb::kwargs kwargs) {
        return b.data.attr("__dlpack__")(*args, **kwargs);
      })
      .def("__dlpack_device__", [](const PyBatch& b) { return b.data.attr("__dlpack_device__")(); })
      .def("__iter__", [](const PyBatch& b) { return nb::iter(nb::make_tuple(b.data, b.labels)); })
      .def("__len__", &batch_len)
      .def("__repr__", &batch_repr);
}

}  // namespace

void bind_batch(nb::module_& m) {
  bind_batch_class(m);
  nb::class_<PyDeviceArray>(m, "_DeviceArray")
      .def("capsule", &PyDeviceArray::capsule, "A new DLPack capsule of the batch (kDLCUDA; no copy)")
      .def_prop_ro("ptr", &PyDeviceArray::ptr)
      .def_prop_ro("device", &PyDeviceArray::device)
      .def_prop_ro("dtype", &PyDeviceArray::dtype)
      .def_prop_ro("shape", &PyDeviceArray::shape)
      .def_prop_ro("nbytes", &PyDeviceArray::nbytes);
}

}  // namespace l3py
