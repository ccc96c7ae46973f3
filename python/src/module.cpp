// l3._l3: the nanobind extension behind the `l3` Python package (ext.hpp lists
// its translation units). Thin bindings over the C++ libraries; the Python
// layer (python/l3/__init__.py, python/l3/loader.py) adds argument checking and the Loader class.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>

#include <exception>
#include <filesystem>
#include <string>

#include "ext.hpp"
#include "l3/common/error.hpp"
#include "l3/reader/reader_backend_cuda.hpp"
#include "l3/common/version.hpp"

namespace l3py {
namespace {

PyObject* g_data_error = nullptr;  // l3.DataError (a ValueError)

// l3::Error -> the Python exception its errc names.
void set_python_error(const l3::Error& e) {
  const l3::errc c = e.code();
  PyObject* type = PyExc_RuntimeError;
  if (c == l3::errc::out_of_range) {
    type = PyExc_IndexError;
  } else if (l3::is_caller_error(c)) {
    type = PyExc_ValueError;
  } else if (l3::is_data_error(c)) {
    type = g_data_error ? g_data_error : PyExc_ValueError;
  } else if (c == l3::errc::io_error) {
    type = PyExc_OSError;
  } else if (c == l3::errc::out_of_memory) {
    type = PyExc_MemoryError;
  }
  PyErr_SetString(type, e.what());
}

void bind_errors(nb::module_& m) {
  g_data_error = PyErr_NewExceptionWithDoc(
      "l3.DataError", "The bytes are not a valid l3 stream, shard or manifest (a ValueError).", PyExc_ValueError,
      nullptr);
  m.attr("DataError") = nb::handle(g_data_error);
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const l3::Error& e) {
      set_python_error(e);
    } catch (const std::filesystem::filesystem_error& e) {
      PyErr_SetString(PyExc_OSError, e.what());
    }
  });
}

bool cuda_available() {
#ifdef L3_HAVE_CUDA
  return true;
#else
  return false;
#endif
}

}  // namespace
}  // namespace l3py

NB_MODULE(_l3, m) {
  namespace nb = nanobind;
  m.doc() = "l3: lossless tile-parallel image codec, sharded datasets and a streaming reader (C++ bindings)";
  l3py::bind_errors(m);

  m.attr("built_with_cuda") = l3py::cuda_available();
  m.def("version", [] { return std::string(l3::version()); }, "The l3 libraries' version (l3::version()).");
  m.def("cuda_device_count", [] {
#ifdef L3_HAVE_CUDA
    return l3::cuda_device_count();
#else
    return 0;
#endif
  }, "CUDA devices usable by the loader (0 when built without CUDA)");

  l3py::bind_codec(m);
  l3py::bind_dataset(m);
  l3py::bind_options(m);
  l3py::bind_batch(m);
  l3py::bind_reader(m);
}
