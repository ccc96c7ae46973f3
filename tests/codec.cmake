# Codec tests (spec/codec.md). The vector generator is a tool, not a test: it
# rewrites spec/vectors/codec/; test_codec checks every committed vector.
add_executable(gen_codec_vectors ${CMAKE_CURRENT_SOURCE_DIR}/gen_codec_vectors.cpp)
target_link_libraries(gen_codec_vectors PRIVATE l3_codec l3_warnings)

l3_add_test(test_codec
  ${CMAKE_CURRENT_SOURCE_DIR}/test_codec.cpp
  LIBS l3_codec l3_imageio)
# Again with the CPU decoder's lanes off (codec/src/decode_lanes.hpp): the
# lanes and the scalar loops both run in CI wherever the machine has AVX2;
# the lane-path check once more capped at AVX2 (test_cuda_emu_avx2 runs the
# AVX2 lanes' tests).
# The scalar run leaves out pixel copies (their tiles never reach the lanes:
# the first run decodes them by the scalar loops too), symbols (their patches
# do not depend on the lanes; their tiles' kinds are in the other cases) and
# the encoder's own cases (effort 2, the entropy threshold and mode, tile
# heights, palette order), which decode nothing new: 40% of the suite's time.
add_test(NAME test_codec_scalar COMMAND test_codec --no-intro=true
  "--test-case-exclude=pixel copies*,symbols*,effort 2*,entropy_min_saving_percent*,tile height*,set_entropy_mode*,palette order*")
set_tests_properties(test_codec_scalar PROPERTIES ENVIRONMENT L3_FORCE_SCALAR=1)
add_test(NAME test_codec_decode_path_avx2 COMMAND test_codec --no-intro=true --test-case=cpu_decode_path*)
set_tests_properties(test_codec_decode_path_avx2 PROPERTIES ENVIRONMENT L3_MAX_ISA=avx2)

# The committed vectors must be exactly what the generator writes.
add_test(NAME codec_vectors_up_to_date
  COMMAND bash -c "rm -rf \"$1\" && \"$0\" \"$1\" >/dev/null && diff -r \"$1\" \"$2\""
          $<TARGET_FILE:gen_codec_vectors> ${CMAKE_CURRENT_BINARY_DIR}/codec_vectors ${PROJECT_SOURCE_DIR}/spec/vectors/codec)
