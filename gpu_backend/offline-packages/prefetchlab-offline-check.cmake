# Shared by the package files of gpu_backend/prepare-offline.sh's folder: a package whose copied
# files are missing is "not found" with a message naming them, never a half-working target.
include_guard(GLOBAL)
function(prefetchlab_offline_require package)
  set(missing "")
  foreach(relative IN LISTS ARGN)
    if(NOT EXISTS "${_prefetchlab_offline}/${relative}")
      list(APPEND missing "${_prefetchlab_offline}/${relative}")
    endif()
  endforeach()
  if(missing)
    set(${package}_FOUND FALSE PARENT_SCOPE)
    set(${package}_NOT_FOUND_MESSAGE
        "the offline folder lacks ${missing}; run gpu_backend/prepare-offline.sh again on a machine with setup.sh's packages"
        PARENT_SCOPE)
  else()
    set(${package}_FOUND TRUE PARENT_SCOPE)
  endif()
endfunction()
