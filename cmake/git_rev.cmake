# Run at every build (target detrain_git_rev): writes ${OUT} with the source tree's git
# revision, "+dirty" when tracked files have uncommitted changes, so run.json names the
# code that actually ran even after commits made since CMake was configured. The file is
# only rewritten when the text changes, so an unchanged tree rebuilds nothing.
execute_process(COMMAND git rev-parse --short=12 HEAD WORKING_DIRECTORY ${SRC}
                OUTPUT_VARIABLE rev OUTPUT_STRIP_TRAILING_WHITESPACE
                ERROR_QUIET RESULT_VARIABLE rc)
if(NOT rc EQUAL 0 OR rev STREQUAL "")
  set(rev "unknown")
else()
  execute_process(COMMAND git diff-index --quiet HEAD -- WORKING_DIRECTORY ${SRC}
                  RESULT_VARIABLE dirty ERROR_QUIET)
  if(NOT dirty EQUAL 0)
    set(rev "${rev}+dirty")
  endif()
endif()
set(text "/* Generated at build time by cmake/git_rev.cmake. */\n#define DT_GIT_REV \"${rev}\"\n")
if(EXISTS ${OUT})
  file(READ ${OUT} old)
endif()
if(NOT "${old}" STREQUAL "${text}")
  file(WRITE ${OUT} "${text}")
endif()
