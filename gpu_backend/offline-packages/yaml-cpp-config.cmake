# yaml-cpp from gpu_backend/prepare-offline.sh's folder: the static library and headers it
# copied, found relative to this file, so the folder works wherever it is copied to.
get_filename_component(_prefetchlab_offline "${CMAKE_CURRENT_LIST_DIR}/../../.." ABSOLUTE)
include("${_prefetchlab_offline}/lib/cmake/prefetchlab-offline-check.cmake")
prefetchlab_offline_require(yaml-cpp lib/libyaml-cpp.a include/yaml-cpp/yaml.h)
if(yaml-cpp_FOUND AND NOT TARGET yaml-cpp)
  add_library(yaml-cpp STATIC IMPORTED)
  set_target_properties(yaml-cpp PROPERTIES
    IMPORTED_LOCATION "${_prefetchlab_offline}/lib/libyaml-cpp.a"
    INTERFACE_INCLUDE_DIRECTORIES "${_prefetchlab_offline}/include")
  add_library(yaml-cpp::yaml-cpp ALIAS yaml-cpp)  # yaml-cpp 0.8's name
endif()
