# storage: s3:// URLs, configuration, the shard cache (spec/format.md §8.5). The
# tests against a real S3 server (moto) are tests/s3/ (pytest, below).
l3_add_test(test_storage
  test_storage.cpp
  LIBS l3_storage
  LABELS storage)

# Against a real S3 server: moto (PyPI moto[server]) started by the tests on
# 127.0.0.1 with signature checks on, plus a fault-injecting proxy (tests/s3/).
# scripts/install-deps.sh --test makes this Python; without it the suite is not
# registered (and configure says so).
set(L3_S3_TEST_PYTHON "$ENV{HOME}/.cache/l3/venv-s3/bin/python" CACHE FILEPATH "Python with moto[server] and pytest")
if(EXISTS "${L3_S3_TEST_PYTHON}" AND TARGET l3pack)
  add_test(NAME test_s3
    COMMAND ${L3_S3_TEST_PYTHON} -m pytest -q -p no:cacheprovider ${PROJECT_SOURCE_DIR}/tests/s3)
  set_tests_properties(test_s3 PROPERTIES LABELS storage TIMEOUT 300
    ENVIRONMENT "L3PACK=$<TARGET_FILE:l3pack>")
else()
  message(STATUS "l3: test_s3 not registered: no ${L3_S3_TEST_PYTHON} (scripts/install-deps.sh --test makes it)")
endif()

# Against Ceph's radosgw: a one-OSD memory-backed cluster the test starts on
# 127.0.0.1 (bench/radosgw_local.sh; Debian ceph-mon ceph-osd radosgw
# ceph-common, which scripts/install-deps.sh --test installs). ~40 s.
find_program(L3_RADOSGW radosgw)
find_program(L3_CEPH_MON ceph-mon)
if(L3_RADOSGW AND L3_CEPH_MON AND EXISTS "${L3_S3_TEST_PYTHON}" AND TARGET l3pack)
  add_test(NAME test_s3_radosgw
    COMMAND ${L3_S3_TEST_PYTHON} -m pytest -q -p no:cacheprovider ${PROJECT_SOURCE_DIR}/tests/s3/radosgw_check.py)
  set_tests_properties(test_s3_radosgw PROPERTIES LABELS storage TIMEOUT 300 RUN_SERIAL TRUE
    ENVIRONMENT "L3PACK=$<TARGET_FILE:l3pack>")
else()
  message(STATUS "l3: test_s3_radosgw not registered: radosgw/ceph-mon or ${L3_S3_TEST_PYTHON} missing (scripts/install-deps.sh --test installs them)")
endif()
