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
# Q3_BUILD_FUZZERS off builds none (ClangPrograms.cmake).
include(${CMAKE_CURRENT_LIST_DIR}/ClangPrograms.cmake)

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
