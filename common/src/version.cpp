#include "l3/common/version.hpp"

#ifndef L3_VERSION
#error "L3_VERSION is defined by common/CMakeLists.txt"
#endif

namespace l3 {

const char* version() noexcept { return L3_VERSION; }

}  // namespace l3
