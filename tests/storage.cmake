# storage: s3:// URLs, configuration, the shard cache (spec/format.md §9). The
# tests against a real S3 server (moto) are tests/s3/ (pytest, below).
l3_add_test(test_storage
  test_storage.cpp
  LIBS l3_storage
  LABELS storage)
