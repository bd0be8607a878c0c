# nlohmann_json (header only) from gpu_backend/prepare-offline.sh's folder, found relative to
# this file.
get_filename_component(_prefetchlab_offline "${CMAKE_CURRENT_LIST_DIR}/../../.." ABSOLUTE)
include("${_prefetchlab_offline}/lib/cmake/prefetchlab-offline-check.cmake")
prefetchlab_offline_require(nlohmann_json include/nlohmann/json.hpp)
if(nlohmann_json_FOUND AND NOT TARGET nlohmann_json::nlohmann_json)
  add_library(nlohmann_json::nlohmann_json INTERFACE IMPORTED)
  set_target_properties(nlohmann_json::nlohmann_json PROPERTIES
    INTERFACE_INCLUDE_DIRECTORIES "${_prefetchlab_offline}/include")
endif()
