# GoogleTest programs built by clang-16 under a sanitizer, for code whose
# failures the main build cannot see: the runtime's threaded code
# (ThreadSanitizer) and the thread pool's stack switches (AddressSanitizer,
# which must be told of them). Like the fuzzers they are compiled directly
# by clang-16 from the listed sources, beside the main build's toolchain, and
# need Q3_BUILD_FUZZERS (which makes clang-16 a requirement:
# ClangPrograms.cmake).
#
#   q3_add_sanitized_test(NAME name SANITIZE address,undefined|thread
#                         SOURCES a.cpp b.cpp [FILTER gtest-filter])
#
# registers the ctest test sanitize.<name>. A sanitizer's report fails it even
# where the sanitizer lets the program go on (warnings, UBSan's runtime
# errors, ASan's "false positive error reports may follow").
#
#   q3_add_sanitized_program(NAME name SANITIZE ... SOURCES ... LIBS ...)
#
# builds any program so (${CMAKE_BINARY_DIR}/sanitize/<name>), for tests that
# run it as a user would; q3_sanitized_test_properties(TEST) gives such a
# test the same failure rules.
include(${CMAKE_CURRENT_LIST_DIR}/ClangPrograms.cmake)

function(q3_add_sanitized_program)
  cmake_parse_arguments(S "" "NAME;SANITIZE" "SOURCES;LIBS" ${ARGN})
  q3_add_clang_program(NAME ${S_NAME} OUTPUT ${CMAKE_BINARY_DIR}/sanitize/${S_NAME}
    SOURCES ${S_SOURCES}
    FLAGS -fsanitize=${S_SANITIZE} -fno-sanitize-recover=all
    LIBS ${S_LIBS}
    COMMENT "Building ${S_NAME} with clang-16 (-fsanitize=${S_SANITIZE})")
endfunction()

function(q3_sanitized_test_properties test)
  set_tests_properties(${test} PROPERTIES
    LABELS sanitize
    ENVIRONMENT "TSAN_OPTIONS=halt_on_error=1"
    FAIL_REGULAR_EXPRESSION "ERROR: AddressSanitizer;ERROR: LeakSanitizer;WARNING: ThreadSanitizer;ERROR: ThreadSanitizer;runtime error:;False positive error reports may follow")
endfunction()

function(q3_add_sanitized_test)
  cmake_parse_arguments(S "" "NAME;SANITIZE;FILTER" "SOURCES" ${ARGN})
  if(NOT Q3_BUILD_FUZZERS)
    message(STATUS "sanitized test ${S_NAME}: skipped (Q3_BUILD_FUZZERS is OFF)")
    return()
  endif()
  q3_add_sanitized_program(NAME ${S_NAME} SANITIZE ${S_SANITIZE} SOURCES ${S_SOURCES}
    LIBS -lgtest -lgtest_main -lfmt -pthread)
  set(filter_flag)
  if(S_FILTER)
    set(filter_flag "--gtest_filter=${S_FILTER}")
  endif()
  add_test(NAME sanitize.${S_NAME} COMMAND ${CMAKE_BINARY_DIR}/sanitize/${S_NAME} ${filter_flag})
  q3_sanitized_test_properties(sanitize.${S_NAME})
endfunction()
