# Installation and the `l3` CMake package (included by the top CMakeLists.txt
# after every library is defined, when L3_INSTALL is on).
#
#   cmake --install build --prefix PREFIX
# installs the public headers (<folder>/include/, not src/), the static
# libraries, `l3pack`, and PREFIX/lib/cmake/l3/ so that a C++ project does
#   find_package(l3 REQUIRED)
#   target_link_libraries(app PRIVATE l3::reader)
# (tests/consumer/ is such a project; tests/install.cmake builds it in CI).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# Library target -> name in the package (l3::<name>). l3_warnings is listed
# because the static libraries link it privately (CMake then requires it in the
# export); it is empty when installed (top CMakeLists.txt).
set(_l3_exported
  l3_warnings:warnings
  l3_common:common
  l3_codec_core:codec_core
  l3_codec:codec
  l3_storage:storage
  l3_format:format
  l3_imageio:imageio
  l3_convert:convert
  l3_cuda_emu:cuda_emu
  l3_reader:reader
  l3_reader_emu:reader_emu)
if(L3_HAVE_CUDA)
  list(APPEND _l3_exported l3_cuda:cuda l3_reader_cuda:reader_cuda)
endif()

# The libraries name their headers as <folder>/include in the source tree; an
# installed package must not name source paths, so those directories become
# BUILD_INTERFACE and the installed include/ (INCLUDES DESTINATION below)
# replaces them. Done here, for every exported target, so that a library's
# CMakeLists.txt keeps its plain `target_include_directories(x PUBLIC include)`.
function(_l3_build_interface_includes target)
  get_target_property(dirs ${target} INTERFACE_INCLUDE_DIRECTORIES)
  if(dirs)
    list(TRANSFORM dirs REPLACE "^(.+)$" "$<BUILD_INTERFACE:\\1>")
    set_property(TARGET ${target} PROPERTY INTERFACE_INCLUDE_DIRECTORIES "${dirs}")
  endif()
endfunction()

set(_l3_targets "")
foreach(entry IN LISTS _l3_exported)
  string(REPLACE ":" ";" pair "${entry}")
  list(GET pair 0 target)
  list(GET pair 1 name)
  _l3_build_interface_includes(${target})
  set_property(TARGET ${target} PROPERTY EXPORT_NAME ${name})
  list(APPEND _l3_targets ${target})
endforeach()

install(TARGETS ${_l3_targets} EXPORT l3Targets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})

# l3pack, as l3::l3pack too ($<TARGET_FILE:l3::l3pack> in a user's build). Its
# RUNPATH keeps the non-system folders it was linked from (libcudart's).
if(TARGET l3pack)
  set_property(TARGET l3pack PROPERTY INSTALL_RPATH_USE_LINK_PATH ON)
  install(TARGETS l3pack EXPORT l3Targets RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()

# Public headers: each library folder's include/ (internal headers live in
# src/ and are not installed). One header under include/ is not API:
# thrust_arena.hpp is shared by the .cu sources of cuda/ and reader/.
foreach(folder common codec storage format imageio convert cuda reader)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/${folder}/include/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
    FILES_MATCHING PATTERN "*.hpp"
    PATTERN "thrust_arena.hpp" EXCLUDE)
endforeach()

set(_l3_cmake_dir ${CMAKE_INSTALL_LIBDIR}/cmake/l3)
install(EXPORT l3Targets NAMESPACE l3:: DESTINATION ${_l3_cmake_dir})

# l3Config.cmake finds what the static libraries link privately (their users
# link it); which optional parts were built is fixed here.
set(L3_CONFIG_HAVE_CUDA ${L3_HAVE_CUDA})
set(L3_CONFIG_HAVE_MEMCACHED ${L3_HAVE_MEMCACHED})
if(NOT L3_CONFIG_HAVE_MEMCACHED)
  set(L3_CONFIG_HAVE_MEMCACHED OFF)
endif()
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/l3Config.cmake.in
  ${PROJECT_BINARY_DIR}/l3Config.cmake INSTALL_DESTINATION ${_l3_cmake_dir})
# 0.x: minor versions may change the API, so only the same MAJOR.MINOR matches.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/l3ConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/l3Config.cmake ${PROJECT_BINARY_DIR}/l3ConfigVersion.cmake
  DESTINATION ${_l3_cmake_dir})
