# Writes OUTPUT (a header with the commit the binary is built from) at every build, but only
# touches it when the text changes, so a new commit recompiles one file and nothing else.
# Run as: cmake -DSOURCE_DIR=... -DOUTPUT=... -P build_info.cmake
set(commit "unknown (not built from a git checkout)")
find_package(Git QUIET)
if(GIT_FOUND)
  execute_process(COMMAND ${GIT_EXECUTABLE} describe --always --dirty --abbrev=12
                  WORKING_DIRECTORY ${SOURCE_DIR}
                  OUTPUT_VARIABLE described OUTPUT_STRIP_TRAILING_WHITESPACE
                  RESULT_VARIABLE git_status ERROR_QUIET)
  if(git_status EQUAL 0 AND described)
    set(commit "${described}")
  endif()
endif()
set(text "#pragma once\n// Generated at build time by cmake/build_info.cmake.\nnamespace prefetchlab {\ninline constexpr const char* kCommit = \"${commit}\";\n}\n")
if(EXISTS ${OUTPUT})
  file(READ ${OUTPUT} old)
endif()
if(NOT "${old}" STREQUAL "${text}")
  file(WRITE ${OUTPUT} "${text}")
endif()
