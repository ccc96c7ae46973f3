# converters: l3_imageio suites, and l3pack's CLI checks when the codec exists.
find_package(PNG REQUIRED)
find_package(JPEG REQUIRED)

l3_add_test(test_converters
  test_converters_png.cpp
  test_converters_jpeg.cpp
  test_converters_pnm.cpp
  LIBS l3_imageio PNG::PNG JPEG::JPEG)

if(TARGET l3pack)
  find_package(nlohmann_json REQUIRED)
  l3_add_test(test_converters_cli test_converters_cli.cpp
    LIBS l3_imageio PNG::PNG JPEG::JPEG nlohmann_json::nlohmann_json)
  target_compile_definitions(test_converters_cli PRIVATE L3PACK_PATH="$<TARGET_FILE:l3pack>")
  add_dependencies(test_converters_cli l3pack)
endif()

# l3pack's dataset commands (convert, verify, info, ls, extract, merge), end to end.
if(TARGET l3_convert)
  pkg_check_modules(L3_TEST_XXHASH REQUIRED IMPORTED_TARGET libxxhash)
  l3_add_test(test_dataset_cli test_dataset_cli.cpp test_dataset_cli_resume.cpp test_dataset_cli_ls_extract.cpp
    test_dataset_cli_sources.cpp
    LIBS l3_convert l3_format l3_imageio PNG::PNG JPEG::JPEG PkgConfig::L3_TEST_XXHASH
    LABELS converters)
  target_compile_definitions(test_dataset_cli PRIVATE L3PACK_PATH="$<TARGET_FILE:l3pack>")
  add_dependencies(test_dataset_cli l3pack)
endif()

# The issue-15 bar at CI size: 700 mixed images in class folders, 1% bad (one of
# each kind); the skip list is exactly the bad ones, verify --source passes, and
# labels equal ImageFolder's (bench/messy_folder.py; 10000 images when run by hand).
# The system python3 has python3-pil (scripts/install-deps.sh --test).
find_program(L3_SYSTEM_PYTHON python3 PATHS /usr/bin NO_DEFAULT_PATH)
find_program(L3_SYSTEM_PYTHON python3)
if(TARGET l3pack AND L3_SYSTEM_PYTHON)
  add_test(NAME test_messy_folder
    COMMAND ${L3_SYSTEM_PYTHON} ${PROJECT_SOURCE_DIR}/bench/messy_folder.py $<TARGET_FILE:l3pack>
            ${PROJECT_BINARY_DIR}/messy-folder-test 700)
  set_tests_properties(test_messy_folder PROPERTIES LABELS converters)
endif()

# WebP, TIFF and BMP inputs against PIL, mode by mode (tests/pil_parity.py).
if(TARGET l3pack AND L3_SYSTEM_PYTHON)
  add_test(NAME test_pil_parity
    COMMAND ${L3_SYSTEM_PYTHON} ${CMAKE_CURRENT_SOURCE_DIR}/pil_parity.py $<TARGET_FILE:l3pack>
            ${PROJECT_BINARY_DIR}/pil-parity-test)
  set_tests_properties(test_pil_parity PROPERTIES LABELS converters)
endif()
