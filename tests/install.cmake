# The installed package (cmake/l3Install.cmake) works for a C++ user:
# tests/test_install.sh installs this build into a temporary prefix and builds
# and runs tests/consumer against it. Needs the whole tree built (it installs
# every library and l3pack). Not in sanitizer builds: their libraries need the
# sanitizer runtime, which the exported targets do not carry.
if(L3_INSTALL AND NOT L3_SANITIZE AND TARGET l3pack)
  set(_l3_cuda_root "")
  if(L3_HAVE_CUDA)
    # The toolkit l3 was built with, for find_dependency(CUDAToolkit).
    get_filename_component(_l3_cuda_root "${CMAKE_CUDA_COMPILER}" DIRECTORY)
    get_filename_component(_l3_cuda_root "${_l3_cuda_root}" DIRECTORY)
  endif()
  add_test(NAME test_install
    COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/test_install.sh ${PROJECT_BINARY_DIR} ${CMAKE_COMMAND}
            ${CMAKE_GENERATOR} ${CMAKE_CXX_COMPILER} ${PROJECT_VERSION} ${_l3_cuda_root})
  set_tests_properties(test_install PROPERTIES LABELS install TIMEOUT 300)
endif()
