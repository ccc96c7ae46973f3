# cuda: the CPU emulation of the GPU decomposition (always built and run), and
# the GPU suite (label gpu). Without a CUDA device the GPU suite prints
# L3_GPU_SKIPPED and ctest reports it as skipped.
l3_add_test(test_cuda_emu test_cuda_emu.cpp LIBS l3_cuda_emu l3_codec l3_imageio LABELS cuda)

if(L3_HAVE_CUDA AND TARGET l3_cuda)
  l3_add_test(test_cuda_gpu test_cuda_gpu.cpp LIBS l3_cuda l3_codec l3_imageio LABELS gpu)
  set_tests_properties(test_cuda_gpu PROPERTIES SKIP_REGULAR_EXPRESSION "L3_GPU_SKIPPED")
endif()
