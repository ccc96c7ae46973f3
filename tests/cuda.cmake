# cuda: the CPU emulation of the GPU decomposition (always built and run), and
# the GPU suite (label gpu). Without a CUDA device the GPU suite prints
# L3_GPU_SKIPPED and ctest reports it as skipped.
l3_add_test(test_cuda_emu test_cuda_emu.cpp LIBS l3_cuda_emu l3_codec l3_imageio LABELS cuda)
# Without pixel copies (their tiles never reach the CPU decoder's lanes: the
# first run's l3::decode is the scalar loops too) and symbols (patches do not
# depend on the lanes; their tiles' kinds are in the other cases).
add_test(NAME test_cuda_emu_scalar COMMAND test_cuda_emu --no-intro=true
  "--test-case-exclude=*on pixel copies*,*on symbols*")
set_tests_properties(test_cuda_emu_scalar PROPERTIES ENVIRONMENT L3_FORCE_SCALAR=1 LABELS cuda)
# And with the lanes capped at AVX2: on an AVX-512 machine the AVX2 lanes
# (codec/src/lanes_ops_avx2.hpp) would otherwise never run; elsewhere this
# repeats part of the first run. The cases whose streams are chosen for the
# lanes (every tile shape and plane count, Rice and rANS), damaged streams'
# statuses and the sample photos: about half the suite's time under ASan+UBSan.
add_test(NAME test_cuda_emu_avx2
  COMMAND test_cuda_emu --no-intro=true "--test-case=tiles up to 256x32*,corrupted streams*,*the sample photos")
set_tests_properties(test_cuda_emu_avx2 PROPERTIES ENVIRONMENT L3_MAX_ISA=avx2 LABELS cuda)
l3_add_test(test_cuda_emu_other_shape test_cuda_emu.cpp LIBS l3_cuda_emu_other_shape l3_codec l3_imageio LABELS cuda)
# With the issue probe's filler (kernel variant filler-64): the same pixels and statuses.
l3_add_test(test_cuda_emu_probe test_cuda_emu.cpp LIBS l3_cuda_emu_probe l3_codec l3_imageio LABELS cuda)
# With the narrow ring (kernel variant narrow-ring-24): the same pixels, but
# for the tiles with pixel copies or bilevel planes it reports unsupported.
# Its streams have none (the suite's enc()) but in the case that checks that
# and in the spec's vectors; the three cases that count such tiles are left out.
l3_add_test(test_cuda_emu_narrow test_cuda_emu.cpp LIBS l3_cuda_emu_narrow l3_codec l3_imageio LABELS cuda
  ARGS "--test-case-exclude=*on bilevel planes*,*on bit planes and templates*,*on pixel copies*")

# The occupancy probes' padding arithmetic (cuda/src/occupancy_probe.hpp).
l3_add_test(test_cuda_probe test_cuda_probe.cpp LABELS cuda)
target_include_directories(test_cuda_probe PRIVATE ${PROJECT_SOURCE_DIR}/cuda/src)

if(L3_HAVE_CUDA AND TARGET l3_cuda)
  l3_add_test(test_cuda_gpu test_cuda_gpu.cpp LIBS l3_cuda l3_codec l3_imageio LABELS gpu)
  set_tests_properties(test_cuda_gpu PROPERTIES SKIP_REGULAR_EXPRESSION "L3_GPU_SKIPPED")
endif()

# The decode and patch kernels' per-lane state stays in registers on sm_90 (no stack
# frame, no spills), and 20 decode warps fit an SM: a static check with nvcc, no GPU needed.
if(L3_HAVE_CUDA AND NOT L3_CUDA_FIXED_PREDICTORS)
  add_test(NAME cuda_kernel_resources
    COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/cuda_kernel_resources.sh ${CMAKE_CUDA_COMPILER} ${PROJECT_SOURCE_DIR}
            cuda/src/batch_decoder.cu decode_kernel:20:128,patch_kernel)
  set_tests_properties(cuda_kernel_resources PROPERTIES LABELS "cuda")
  # The kernel variants that scripts/gpu-kit.sh's `variant` step times
  # (cuda/kernel_variants.txt) compile, and hold the same bars: a variant that
  # failed only on the GPU machine would cost its device time.
  file(STRINGS ${PROJECT_SOURCE_DIR}/cuda/kernel_variants.txt l3_variants REGEX "^[^#].*=")
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/cuda/kernel_variants.txt)
  foreach(variant IN LISTS l3_variants)
    string(FIND "${variant}" "=" eq)
    string(SUBSTRING "${variant}" 0 ${eq} name)
    math(EXPR eq "${eq} + 1")
    string(SUBSTRING "${variant}" ${eq} -1 defines)
    separate_arguments(defines UNIX_COMMAND "${defines}")
    list(TRANSFORM defines PREPEND "-D")
    string(REPLACE "-" "_" name "${name}")
    set(decode_bar decode_kernel:20:128)
    if(defines MATCHES "L3_WAVEFRONT_NARROW_RING")
      # 24 warps, so 80 registers, which spill (none in the CH = 3 step's
      # common path but one reload; spec/cuda.md §2 "Kernel variants").
      set(decode_bar decode_kernel:24:128:128)
    endif()
    add_test(NAME cuda_kernel_resources_${name}
      COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/cuda_kernel_resources.sh ${CMAKE_CUDA_COMPILER} ${PROJECT_SOURCE_DIR}
              cuda/src/batch_decoder.cu ${decode_bar},patch_kernel ${defines})
    set_tests_properties(cuda_kernel_resources_${name} PROPERTIES LABELS "cuda")
  endforeach()
endif()

# The GPU kit's machinery (scripts/gpu-kit.sh, scripts/check_runpath.sh):
# step failures and the RUNPATH check, without a GPU (issue 13).
add_test(NAME gpu_kit_selftest COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/gpu_kit_selftest.sh ${PROJECT_SOURCE_DIR})
set_tests_properties(gpu_kit_selftest PROPERTIES LABELS "cuda")

# bench/cuda_sass_breakdown.py (the decode kernel's SASS per wavefront step,
# bench/results/cuda-static-sm90.md) on a made-up disassembly: no CUDA needed.
find_program(L3_SASS_PYTHON python3 REQUIRED)
add_test(NAME cuda_sass_breakdown
  COMMAND ${L3_SASS_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/cuda_sass_breakdown_test.py ${PROJECT_SOURCE_DIR})
set_tests_properties(cuda_sass_breakdown PROPERTIES LABELS "cuda" PASS_REGULAR_EXPRESSION "^PASS")

# bench/variant_table.py (scripts/gpu-kit.sh step `variant`: kernel variants
# timed against the default) on made-up bench_cuda reports: no GPU needed.
add_test(NAME variant_table
  COMMAND ${L3_SASS_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/variant_table_test.py ${PROJECT_SOURCE_DIR})
set_tests_properties(variant_table PROPERTIES LABELS "cuda" PASS_REGULAR_EXPRESSION "^PASS")
