# libFuzzer targets are built with clang-16 (-fsanitize=fuzzer,address,undefined),
# independently of the compiler that builds the rest of the project, so the main
# build can stay on the default toolchain.
#
#   q3_add_fuzzer(NAME name SOURCES a.cpp b.cpp CORPUS dir [DICT file.dict] [SECONDS 20])
#
# builds ${name} in the build tree and registers two ctest tests:
#   fuzz.<name>.corpus : replays every seed file once (regressions; fast)
#   fuzz.<name>.run    : bounded coverage-guided fuzzing for SECONDS seconds,
#                        with the libFuzzer dictionary DICT (JSON keys, magics)
#
# With Q3_BUILD_FUZZERS on (the default, and what CI runs), a missing clang-16
# is a configure error: dropping the fuzzers silently would leave CI green
# without them. Configure with -DQ3_BUILD_FUZZERS=OFF to build without.
find_program(Q3_FUZZ_CLANG clang++-16)
if(Q3_BUILD_FUZZERS AND NOT Q3_FUZZ_CLANG)
  message(FATAL_ERROR "Q3_BUILD_FUZZERS is ON but clang++-16 was not found: install clang-16 "
                      "and libclang-rt-16-dev (scripts/setup.sh does), or configure with "
                      "-DQ3_BUILD_FUZZERS=OFF")
endif()

# Builds `OUTPUT` from SOURCES with clang-16 (-std=c++17 -g -O1, the project's
# root on the include path) and FLAGS, linked with LIBS; target NAME, built by
# default.
function(q3_add_clang_program)
  cmake_parse_arguments(P "" "NAME;OUTPUT;COMMENT" "SOURCES;FLAGS;LIBS" ${ARGN})
  set(abs_sources)
  foreach(src ${P_SOURCES})
    get_filename_component(abs ${src} ABSOLUTE)
    list(APPEND abs_sources ${abs})
  endforeach()
  get_filename_component(dir ${P_OUTPUT} DIRECTORY)
  add_custom_command(
    OUTPUT ${P_OUTPUT}
    COMMAND ${CMAKE_COMMAND} -E make_directory ${dir}
    COMMAND ${Q3_FUZZ_CLANG} -std=c++17 -g -O1 -fno-omit-frame-pointer ${P_FLAGS}
            -I${PROJECT_SOURCE_DIR} -o ${P_OUTPUT} ${abs_sources} ${P_LIBS}
    DEPENDS ${abs_sources}
    COMMENT "${P_COMMENT}"
    VERBATIM)
  add_custom_target(${P_NAME} ALL DEPENDS ${P_OUTPUT})
endfunction()

function(q3_add_fuzzer)
  cmake_parse_arguments(F "" "NAME;CORPUS;SECONDS;DICT" "SOURCES" ${ARGN})
  if(NOT Q3_BUILD_FUZZERS)
    message(STATUS "fuzzer ${F_NAME}: skipped (Q3_BUILD_FUZZERS is OFF)")
    return()
  endif()
  set(dict_flag)
  if(F_DICT)
    get_filename_component(dict ${F_DICT} ABSOLUTE)
    set(dict_flag "-dict=${dict}")
  endif()
  if(NOT F_SECONDS)
    set(F_SECONDS 20)
  endif()
  set(out ${CMAKE_BINARY_DIR}/fuzz/${F_NAME})
  q3_add_clang_program(NAME ${F_NAME} OUTPUT ${out} SOURCES ${F_SOURCES}
    FLAGS -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
    LIBS -lfmt -lsodium -lxxhash
    COMMENT "Building fuzzer ${F_NAME} with clang-16 (ASan+UBSan)")
  get_filename_component(corpus ${F_CORPUS} ABSOLUTE)
  add_test(NAME fuzz.${F_NAME}.corpus
           COMMAND ${out} -runs=0 ${dict_flag} ${corpus})
  # New inputs go to the first corpus directory: a scratch one in the build tree,
  # never the committed seeds.
  set(scratch ${CMAKE_BINARY_DIR}/fuzz/${F_NAME}.corpus)
  add_test(NAME fuzz.${F_NAME}.run
           COMMAND sh -c "mkdir -p '${scratch}' && exec '${out}' ${dict_flag} -max_total_time=${F_SECONDS} -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 '${scratch}' '${corpus}'")
  set_tests_properties(fuzz.${F_NAME}.corpus fuzz.${F_NAME}.run PROPERTIES LABELS fuzz)
endfunction()
