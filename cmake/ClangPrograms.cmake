# clang-16 beside the project's compiler: the fuzzers (Fuzzing.cmake) and the
# sanitized tests (SanitizedTests.cmake) are built by it from their sources.
#
# With Q3_BUILD_FUZZERS on (the default, and what CI runs), a missing clang-16
# is a configure error: dropping those programs silently would leave CI green
# without them. Configure with -DQ3_BUILD_FUZZERS=OFF to build without.
include_guard(GLOBAL)

find_program(Q3_FUZZ_CLANG clang++-16)
if(Q3_BUILD_FUZZERS AND NOT Q3_FUZZ_CLANG)
  message(FATAL_ERROR "Q3_BUILD_FUZZERS is ON but clang++-16 was not found: install clang-16 "
                      "and libclang-rt-16-dev (scripts/setup.sh does), or configure with "
                      "-DQ3_BUILD_FUZZERS=OFF")
endif()

# Builds `OUTPUT` from SOURCES with clang-16 (-std=c++17 -g -O1, the project's
# root on the include path) and FLAGS, linked with LIBS; target NAME, built by
# default. Each source is its own object (so ninja compiles them in parallel)
# and is rebuilt when a header it includes changes (clang's depfile).
function(q3_add_clang_program)
  cmake_parse_arguments(P "" "NAME;OUTPUT;COMMENT" "SOURCES;FLAGS;LIBS" ${ARGN})
  get_filename_component(dir ${P_OUTPUT} DIRECTORY)
  set(object_dir ${dir}/${P_NAME}.objects)
  set(objects)
  foreach(src ${P_SOURCES})
    get_filename_component(abs ${src} ABSOLUTE)
    file(RELATIVE_PATH rel ${PROJECT_SOURCE_DIR} ${abs})
    set(object ${object_dir}/${rel}.o)
    get_filename_component(object_parent ${object} DIRECTORY)
    # Named in the depfile as ninja names it: relative to the top build
    # directory, as CMP0116 is OLD here (CMakeLists.txt says why).
    file(RELATIVE_PATH object_target ${CMAKE_BINARY_DIR} ${object})
    add_custom_command(
      OUTPUT ${object}
      COMMAND ${CMAKE_COMMAND} -E make_directory ${object_parent}
      COMMAND ${Q3_FUZZ_CLANG} -std=c++17 -g -O1 -fno-omit-frame-pointer ${P_FLAGS}
              -I${PROJECT_SOURCE_DIR} -MD -MF ${object}.d -MT ${object_target} -c ${abs} -o ${object}
      DEPENDS ${abs}
      DEPFILE ${object}.d
      COMMENT "${P_COMMENT}: ${rel}"
      VERBATIM)
    list(APPEND objects ${object})
  endforeach()
  add_custom_command(
    OUTPUT ${P_OUTPUT}
    COMMAND ${Q3_FUZZ_CLANG} ${P_FLAGS} -o ${P_OUTPUT} ${objects} ${P_LIBS}
    DEPENDS ${objects}
    COMMENT "Linking ${P_NAME}"
    VERBATIM)
  add_custom_target(${P_NAME} ALL DEPENDS ${P_OUTPUT})
endfunction()
