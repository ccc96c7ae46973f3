// The version of the l3 libraries, at run time. One source: project(l3
// VERSION ...) in the top CMakeLists.txt; the Python package's __version__
// and `l3pack --version` print this string.
#pragma once

namespace l3 {

// "MAJOR.MINOR.PATCH".
const char* version() noexcept;

}  // namespace l3
