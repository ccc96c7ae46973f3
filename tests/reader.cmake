# reader: order, transforms, pipeline. test_reader_pipeline is also the TSan
# target: the lead's CI runs `ctest -L tsan` in a -DL3_SANITIZE=thread build.
l3_add_test(test_reader_order test_reader_order.cpp LIBS l3_reader LABELS reader)
l3_add_test(test_reader_transforms test_reader_transforms.cpp LIBS l3_reader LABELS reader)
# Again with the transforms' AVX2 pass off (reader/src/transforms.cpp): both
# paths run in CI wherever the machine has AVX2.
add_test(NAME test_reader_transforms_scalar COMMAND test_reader_transforms --no-intro=true)
set_tests_properties(test_reader_transforms_scalar PROPERTIES ENVIRONMENT L3_FORCE_SCALAR=1 LABELS reader)
l3_add_test(test_reader_pipeline test_reader_pipeline.cpp LIBS l3_reader LABELS "reader;tsan")
# test_reader_pipeline writes its datasets under test_tmp/ (rewriting
# them each run); the CLI tests below run it to make theirs and read them:
# one at a time (RESOURCE_LOCK), never while another rewrites them.
set_tests_properties(test_reader_pipeline PROPERTIES RESOURCE_LOCK test_reader_pipeline_datasets)
# The peer cache against memcached servers it starts on 127.0.0.1 (Debian's
# memcached; the client, libmemcached-dev, also builds the reader's peer cache).
pkg_check_modules(L3_TEST_MEMCACHED IMPORTED_TARGET libmemcached)
if(L3_TEST_MEMCACHED_FOUND)
  pkg_check_modules(L3_TEST_PEER_XXHASH REQUIRED IMPORTED_TARGET libxxhash)
  l3_add_test(test_reader_peer test_reader_peer.cpp
    LIBS l3_reader PkgConfig::L3_TEST_MEMCACHED PkgConfig::L3_TEST_PEER_XXHASH LABELS reader)
  set_tests_properties(test_reader_peer PROPERTIES TIMEOUT 120)
  if(TARGET l3pack)
    add_test(NAME test_reader_peer_cli COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/test_reader_peer_cli.sh
             $<TARGET_FILE:l3pack> $<TARGET_FILE:test_reader_pipeline> ${PROJECT_BINARY_DIR})
    set_tests_properties(test_reader_peer_cli PROPERTIES LABELS reader TIMEOUT 120
                         RESOURCE_LOCK test_reader_pipeline_datasets)
  endif()
endif()
# Replaces global operator new to count allocations: its own executable.
l3_add_test(test_reader_alloc test_reader_alloc.cpp LIBS l3_reader LABELS reader)
if(TARGET l3pack)
  add_test(NAME test_reader_cli COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/test_reader_cli.sh
           $<TARGET_FILE:l3pack> $<TARGET_FILE:test_reader_pipeline> ${PROJECT_BINARY_DIR}
           $<IF:$<TARGET_EXISTS:l3_reader_cuda>,cuda,cpu>)
  set_tests_properties(test_reader_cli PROPERTIES LABELS reader RESOURCE_LOCK test_reader_pipeline_datasets)
endif()
# Batch mode with the emulated GPU batch backend (decode + transform kernels on
# the CPU): in the Release and ASan+UBSan runs, and a second executable of the
# same source for the TSan run (which builds and runs only tsan-labelled tests).
l3_add_test(test_reader_batch_emu test_reader_batch_emu.cpp LIBS l3_reader_emu LABELS reader)
l3_add_test(test_reader_batch_emu_tsan test_reader_batch_emu.cpp LIBS l3_reader_emu LABELS "reader;tsan")
if(L3_HAVE_CUDA AND TARGET l3_reader_cuda)
  # Batch mode with the CUDA batch backend (decode and transforms on the GPU)
  # against the CPU pipeline and the emulation; xxhash re-checksums damaged
  # streams so that only the device's tile decode finds the damage.
  pkg_check_modules(L3_GPU_TEST_XXHASH REQUIRED IMPORTED_TARGET libxxhash)
  l3_add_test(test_reader_gpu_batch test_reader_gpu_batch.cpp
    LIBS l3_reader_cuda PkgConfig::L3_GPU_TEST_XXHASH LABELS gpu)
  set_tests_properties(test_reader_gpu_batch PROPERTIES SKIP_REGULAR_EXPRESSION "L3_GPU_SKIPPED")
endif()

# The batch transform kernels keep their per-thread state in registers on
# sm_90 (no stack frame, no spills): a static check with nvcc, no GPU needed.
if(L3_HAVE_CUDA)
  add_test(NAME reader_kernel_resources
    COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/cuda_kernel_resources.sh ${CMAKE_CUDA_COMPILER} ${PROJECT_SOURCE_DIR}
            reader/src/batch_backend_cuda.cu weights_kernel,resample_kernel --fmad=false -DL3_HAVE_CUDA=1)
  set_tests_properties(reader_kernel_resources PROPERTIES LABELS "reader")
endif()
