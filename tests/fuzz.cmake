# Fuzzing (tests/fuzz/, spec of the targets in tests/fuzz/README.md).
#
# Always: each target's LLVMFuzzerTestOneInput is linked with a plain main()
# (tests/fuzz/replay_main.cpp) into fuzz_replay_<target>, and ctest runs it on
# the target's seed corpus (tests/fuzz/corpus/<target>/) and its crashers
# (tests/crashers/<target>/, each input with an optional .expect outcome).
#
# With L3_FUZZ=ON and clang: the libFuzzer executables fuzz_<target>
# (-fsanitize=fuzzer; configure with -DL3_SANITIZE=address,undefined for
# ASan+UBSan). tests/fuzz/run_fuzzers.sh SECONDS builds and runs them.
option(L3_FUZZ "Build the libFuzzer targets (clang only)" OFF)

set(L3_FUZZ_TARGETS decode roundtrip region wavefront shard manifest image_io)
if(TARGET l3_convert)
  list(APPEND L3_FUZZ_TARGETS list_file)  # the list-file parser of l3pack convert
endif()
set(L3_FUZZ_DIR ${CMAKE_CURRENT_SOURCE_DIR}/fuzz)

function(l3_fuzz_libs target out)
  if(target STREQUAL "shard" OR target STREQUAL "manifest")
    set(${out} l3_format PARENT_SCOPE)
  elseif(target STREQUAL "list_file")
    set(${out} l3_convert PARENT_SCOPE)
  elseif(target STREQUAL "image_io")
    set(${out} l3_imageio PARENT_SCOPE)
  elseif(target STREQUAL "wavefront")
    set(${out} l3_cuda_emu l3_codec PARENT_SCOPE)  # the CUDA decoder's CPU emulation
  else()
    set(${out} l3_codec PARENT_SCOPE)
  endif()
endfunction()

function(l3_fuzz_setup exe target)
  l3_fuzz_libs(${target} libs)
  target_link_libraries(${exe} PRIVATE ${libs} l3_warnings)
  if(target STREQUAL "shard")
    # The shard byte layout (format/src/layout.hpp) repairs checksums.
    target_include_directories(${exe} PRIVATE ${PROJECT_SOURCE_DIR}/format/src)
  endif()
endfunction()

foreach(t IN LISTS L3_FUZZ_TARGETS)
  add_executable(fuzz_replay_${t} ${L3_FUZZ_DIR}/fuzz_${t}.cpp ${L3_FUZZ_DIR}/replay_main.cpp)
  l3_fuzz_setup(fuzz_replay_${t} ${t})
  set(extra)
  if(t STREQUAL "decode")
    set(extra ${PROJECT_SOURCE_DIR}/spec/vectors/codec)  # must not crash (their errors: codec tests)
  endif()
  add_test(NAME fuzz_replay_${t}
           COMMAND fuzz_replay_${t} ${L3_FUZZ_DIR}/corpus/${t} ${CMAKE_CURRENT_SOURCE_DIR}/crashers/${t} ${extra})
  set_tests_properties(fuzz_replay_${t} PROPERTIES LABELS "fuzz")
endforeach()

# Seed generator (tests/fuzz/README.md): encodes small images of every channel
# count and tile size, writes shards, manifests and small PNG/PNM images.
find_package(JPEG REQUIRED)
add_executable(l3_fuzz_make_seeds ${L3_FUZZ_DIR}/make_seeds.cpp)
target_link_libraries(l3_fuzz_make_seeds PRIVATE l3_codec l3_format l3_imageio JPEG::JPEG l3_warnings)

if(L3_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "L3_FUZZ=ON needs clang (libFuzzer); the compiler is ${CMAKE_CXX_COMPILER_ID}")
  endif()
  # Coverage instrumentation for the code under test.
  foreach(lib l3_common l3_codec l3_cuda_emu l3_format l3_imageio l3_convert)
    if(TARGET ${lib})
      target_compile_options(${lib} PRIVATE -fsanitize=fuzzer-no-link)
    endif()
  endforeach()
  foreach(t IN LISTS L3_FUZZ_TARGETS)
    add_executable(fuzz_${t} ${L3_FUZZ_DIR}/fuzz_${t}.cpp)
    l3_fuzz_setup(fuzz_${t} ${t})
    target_compile_options(fuzz_${t} PRIVATE -fsanitize=fuzzer)
    target_link_options(fuzz_${t} PRIVATE -fsanitize=fuzzer)
  endforeach()
endif()

# Limits and fault tests (spec/limits.md).
find_package(zstd REQUIRED CONFIG)
l3_add_test(test_limits test_limits.cpp LIBS l3_codec l3_format l3_imageio zstd::libzstd_shared LABELS limits)
target_include_directories(test_limits PRIVATE ${PROJECT_SOURCE_DIR}/format/src)
l3_add_test(test_fault test_fault.cpp LIBS l3_codec l3_format l3_imageio LABELS fault)
if(TARGET l3_convert)
  l3_add_test(test_fault_convert test_fault_convert.cpp LIBS l3_convert l3_format l3_imageio LABELS fault)
endif()
