# cuda: the CPU emulation of the GPU decomposition (always), and the GPU suite
# (label gpu; it reports its cases as skipped when no CUDA device exists).
l3_add_test(test_cuda_emu test_cuda_emu.cpp LIBS l3_cuda_emu l3_codec l3_imageio LABELS cuda)

