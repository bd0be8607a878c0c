# Eigen3 (header only) from gpu_backend/prepare-offline.sh's folder, found relative to this file.
# Debian keeps its headers under include/eigen3/, and so does the copy.
get_filename_component(_prefetchlab_offline "${CMAKE_CURRENT_LIST_DIR}/../../.." ABSOLUTE)
include("${_prefetchlab_offline}/lib/cmake/prefetchlab-offline-check.cmake")
prefetchlab_offline_require(Eigen3 include/eigen3/Eigen/Core)
if(Eigen3_FOUND AND NOT TARGET Eigen3::Eigen)
  add_library(Eigen3::Eigen INTERFACE IMPORTED)
  set_target_properties(Eigen3::Eigen PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${_prefetchlab_offline}/include/eigen3")
endif()
