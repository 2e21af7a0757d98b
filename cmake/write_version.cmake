# Runs at every build: stamps the current git commit into version.hpp, rewriting the file
# only when it changed so nothing recompiles needlessly.
execute_process(COMMAND git rev-parse --short=12 HEAD WORKING_DIRECTORY ${SRC_DIR}
                OUTPUT_VARIABLE SUITE_GIT_COMMIT OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
execute_process(COMMAND git status --porcelain --untracked-files=no WORKING_DIRECTORY ${SRC_DIR}
                OUTPUT_VARIABLE dirty OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
if(NOT SUITE_GIT_COMMIT)
  set(SUITE_GIT_COMMIT unknown)
elseif(dirty)
  set(SUITE_GIT_COMMIT "${SUITE_GIT_COMMIT}-dirty")
endif()
configure_file(${IN_FILE} ${OUT_FILE}.tmp @ONLY)
execute_process(COMMAND ${CMAKE_COMMAND} -E copy_if_different ${OUT_FILE}.tmp ${OUT_FILE})
