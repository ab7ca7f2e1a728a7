# cmake -DCASE=twice|once -P tools/tests/test-repeated-keywords.cmake
# course_refuse_repeated_keywords (cmake/CourseArguments.cmake) on a planted bug's arguments: with
# REPLACE given twice (the mistake it exists for) the script stops, naming it; with each keyword
# once, and a FIND text holding ';', it passes and prints "ok".
cmake_minimum_required(VERSION 3.24)
include(${CMAKE_CURRENT_LIST_DIR}/../../cmake/CourseArguments.cmake)
set(keywords "LAB;NAME;FILE;FIND;REPLACE;PATCH;CHECK;MESSAGE")
if(CASE STREQUAL "twice")
  course_refuse_repeated_keywords("planted bug" "${keywords}" LAB 9 NAME turn FILE k.cuh
    FIND "  wait(t);" REPLACE "  (void)0;" REPLACE "" CHECK "hopper: deterministic" MESSAGE "differ")
elseif(CASE STREQUAL "once")
  course_refuse_repeated_keywords("planted bug" "${keywords}" LAB 9 NAME turn FILE k.cuh
    FIND "  a = 1; b = 2;" REPLACE "  a = 2; b = 1;" CHECK "hopper: deterministic" MESSAGE "differ")
else()
  message(FATAL_ERROR "CASE must be twice or once")
endif()
message("ok")
