# format: shard files, manifests, test vectors (spec/format.md).
l3_add_test(test_format
  test_format_shard.cpp
  test_format_damage.cpp
  test_format_dataset.cpp
  test_format_vectors.cpp
  LIBS l3_format l3_shard_vectors
  LABELS format)
