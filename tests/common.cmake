# common: file I/O (replaces fsync(2) to observe it: its own executable).
l3_add_test(test_common_file_io test_common_file_io.cpp LIBS l3_common LABELS common)
l3_add_test(test_common_parallel test_common_parallel.cpp LIBS l3_common LABELS common)
l3_add_test(test_common_xxh3 test_common_xxh3.cpp LIBS l3_common LABELS common)
