# GoogleTest and GoogleMock from gpu_backend/prepare-offline.sh's folder: static libraries and
# headers, found relative to this file. CMake's FindGTest module looks for this config first.
get_filename_component(_prefetchlab_offline "${CMAKE_CURRENT_LIST_DIR}/../../.." ABSOLUTE)
include("${_prefetchlab_offline}/lib/cmake/prefetchlab-offline-check.cmake")
prefetchlab_offline_require(GTest lib/libgtest.a lib/libgtest_main.a include/gtest/gtest.h)
if(GTest_FOUND AND NOT TARGET GTest::gtest)
  # GoogleTest runs its own threads (death tests, the thread-safe registry).
  set(THREADS_PREFER_PTHREAD_FLAG ON)
  include(CMakeFindDependencyMacro)
  find_dependency(Threads)
  add_library(GTest::gtest STATIC IMPORTED)
  set_target_properties(GTest::gtest PROPERTIES
    IMPORTED_LOCATION "${_prefetchlab_offline}/lib/libgtest.a"
    INTERFACE_INCLUDE_DIRECTORIES "${_prefetchlab_offline}/include"
    INTERFACE_LINK_LIBRARIES Threads::Threads)
  add_library(GTest::gtest_main STATIC IMPORTED)
  set_target_properties(GTest::gtest_main PROPERTIES
    IMPORTED_LOCATION "${_prefetchlab_offline}/lib/libgtest_main.a"
    INTERFACE_LINK_LIBRARIES GTest::gtest)
  foreach(_lib gmock gmock_main)
    if(EXISTS "${_prefetchlab_offline}/lib/lib${_lib}.a")
      add_library(GTest::${_lib} STATIC IMPORTED)
      set_target_properties(GTest::${_lib} PROPERTIES
        IMPORTED_LOCATION "${_prefetchlab_offline}/lib/lib${_lib}.a"
        INTERFACE_LINK_LIBRARIES GTest::gtest)
    endif()
  endforeach()
endif()
