# CLI11 (header only) from gpu_backend/prepare-offline.sh's folder, found relative to this file.
get_filename_component(_prefetchlab_offline "${CMAKE_CURRENT_LIST_DIR}/../../.." ABSOLUTE)
include("${_prefetchlab_offline}/lib/cmake/prefetchlab-offline-check.cmake")
prefetchlab_offline_require(CLI11 include/CLI/CLI.hpp)
if(CLI11_FOUND AND NOT TARGET CLI11::CLI11)
  add_library(CLI11::CLI11 INTERFACE IMPORTED)
  set_target_properties(CLI11::CLI11 PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${_prefetchlab_offline}/include")
endif()
