# How a lab enters the build. Each grader/labN_*/CMakeLists.txt calls:
#
#   course_add_lab(NUMBER 1 DIR lab1_softmax SOURCES softmax.cpp GRADER grade_lab1.cpp
#                  [CUDA] [TIMEOUT 60] [LINK extra_targets...])
#     builds, from the same grader sources,
#       grade_lab1           against ${COURSE_LABS_DIR}/lab1_softmax/<SOURCES>  (the student's)
#       grade_lab1_solution  against solutions/lab1_softmax/<SOURCES>
#     and adds the tests: the solution earns full marks; the unedited skeleton fails with a
#     "not implemented" message naming the file (only when grading this repository's labs/).
#
#   course_planted_bug(LAB 1 NAME no_max_shift FILE softmax.cpp
#                      FIND "<text in the solution>" REPLACE "<the bug>"
#                      CHECK "<the check that must fail>" MESSAGE "<text its message must hold>")
#     builds grade_lab1_planted_no_max_shift against a copy of the solution with FIND replaced
#     by REPLACE, and adds a test that CHECK fails for that reason. If the solution changes so
#     that FIND no longer occurs, configuring stops and says so: planted bugs cannot go stale.
#
#   course_correct_variant(LAB 3 NAME fa1_normalise_every_tile FILE attention.cpp
#                          FIND "<text in the solution>" REPLACE "<the alternative>")
#   course_correct_variant(LAB 3 NAME kv_outer_loop SOURCE_DIR variants/kv_outer_loop)
#     a correct alternative implementation (another form FA1/FA2 or a textbook takes): the first
#     form substitutes text like course_planted_bug, the second takes whole files from a folder
#     under the lab's grader folder (files it lacks come from the solution). Builds
#     grade_lab3_variant_<NAME> and adds the test lab3.variant.<NAME>: it must earn full marks.
#     A grader that rejects correct code fails that test.

set(COURSE_MANIFEST_LINES "" CACHE INTERNAL "")

function(_course_lab_library target lab_dir sources cuda)
  set(files "")
  foreach(s IN LISTS sources)
    list(APPEND files "${lab_dir}/${s}")
  endforeach()
  add_library(${target} STATIC ${files})
  target_link_libraries(${target} PUBLIC course_api)
  if(cuda)
    target_link_libraries(${target} PUBLIC CUDA::cudart)
    target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:-lineinfo>)
  endif()
endfunction()

function(_course_grader target objects lab_lib extra_libs)
  add_executable(${target} $<TARGET_OBJECTS:${objects}>)
  target_link_libraries(${target} PRIVATE ${lab_lib} grader_common ${extra_libs})
endfunction()

function(course_add_lab)
  cmake_parse_arguments(L "CUDA" "NUMBER;DIR;TIMEOUT" "SOURCES;GRADER;LINK" ${ARGN})
  if(NOT L_TIMEOUT)
    set(L_TIMEOUT 120)
  endif()
  set(n ${L_NUMBER})
  set(kind cpu)
  if(L_CUDA)
    set(kind gpu)
  endif()
  set_property(GLOBAL PROPERTY COURSE_LAB_${n}_SOURCES "${L_SOURCES}")
  set_property(GLOBAL PROPERTY COURSE_LAB_${n}_DIR "${L_DIR}")
  set_property(GLOBAL PROPERTY COURSE_LAB_${n}_CUDA "${L_CUDA}")
  set_property(GLOBAL PROPERTY COURSE_LAB_${n}_LINK "${L_LINK}")
  set_property(GLOBAL PROPERTY COURSE_LAB_${n}_TIMEOUT "${L_TIMEOUT}")
  if(L_CUDA AND NOT COURSE_HAVE_CUDA)
    set_property(GLOBAL APPEND PROPERTY COURSE_MANIFEST
      "${n}\t${L_DIR}\t${kind}\t-\t-\tnot built: no CUDA compiler was found (install the CUDA toolkit and reconfigure)")
    return()
  endif()

  # The grader's checks, compiled once and linked against each implementation.
  add_library(grade_lab${n}_checks OBJECT ${L_GRADER})
  target_link_libraries(grade_lab${n}_checks PUBLIC grader_common ${L_LINK})

  _course_lab_library(lab${n}_student "${COURSE_LABS_DIR}/${L_DIR}" "${L_SOURCES}" "${L_CUDA}")
  _course_lab_library(lab${n}_solution "${CMAKE_SOURCE_DIR}/solutions/${L_DIR}" "${L_SOURCES}" "${L_CUDA}")
  _course_grader(grade_lab${n} grade_lab${n}_checks lab${n}_student "${L_LINK}")
  _course_grader(grade_lab${n}_solution grade_lab${n}_checks lab${n}_solution "${L_LINK}")

  set_property(GLOBAL APPEND PROPERTY COURSE_MANIFEST
    "${n}\t${L_DIR}\t${kind}\t$<TARGET_FILE:grade_lab${n}>\t$<TARGET_FILE:grade_lab${n}_solution>\t-")

  add_test(NAME lab${n}.solution_full_marks
           COMMAND course_runner expect --binary $<TARGET_FILE:grade_lab${n}_solution> --full-marks
                   --timeout ${L_TIMEOUT})
  set_tests_properties(lab${n}.solution_full_marks PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600)

  # The handout's table of checks must match the grader's.
  add_test(NAME lab${n}.readme_lists_every_check
           COMMAND ${CMAKE_SOURCE_DIR}/grader/tests/test_readme_lists_checks.sh
                   $<TARGET_FILE:course_runner> $<TARGET_FILE:grade_lab${n}_solution>
                   ${CMAKE_SOURCE_DIR}/labs/${L_DIR}/README.md)
endfunction()

# The skeleton in this repository must fail every lab's first check with the message that tells
# a student what to edit. Called by a lab after course_add_lab, naming one check and function.
function(course_expect_skeleton_message)
  cmake_parse_arguments(PARSE_ARGV 0 S "" "LAB;CHECK;FUNCTION;FILE" "")
  if(NOT TARGET grade_lab${S_LAB})
    return()
  endif()
  if(NOT COURSE_LABS_DIR STREQUAL "${CMAKE_SOURCE_DIR}/labs")
    return()  # grading someone's tree: their labs are not skeletons
  endif()
  add_test(NAME lab${S_LAB}.skeleton_says_not_implemented
           COMMAND course_runner expect --binary $<TARGET_FILE:grade_lab${S_LAB}>
                   --fail "${S_CHECK}" --message "not implemented: ${S_FUNCTION} in ${S_FILE}")
  set_tests_properties(lab${S_LAB}.skeleton_says_not_implemented PROPERTIES SKIP_RETURN_CODE 77)
endfunction()

function(course_planted_bug)
  cmake_parse_arguments(PARSE_ARGV 0 P "" "LAB;NAME;FILE;FIND;REPLACE;CHECK;MESSAGE" "")
  set(n ${P_LAB})
  if(NOT COURSE_PLANTED_BUGS OR NOT TARGET grade_lab${n}_checks)
    return()  # the lab is not built here (a GPU lab without a CUDA compiler)
  endif()
  get_property(sources GLOBAL PROPERTY COURSE_LAB_${n}_SOURCES)
  get_property(dir GLOBAL PROPERTY COURSE_LAB_${n}_DIR)
  get_property(cuda GLOBAL PROPERTY COURSE_LAB_${n}_CUDA)
  get_property(link GLOBAL PROPERTY COURSE_LAB_${n}_LINK)
  get_property(timeout GLOBAL PROPERTY COURSE_LAB_${n}_TIMEOUT)
  set(out_dir "${CMAKE_BINARY_DIR}/planted/lab${n}/${P_NAME}")
  foreach(s IN LISTS sources)
    set(src "${CMAKE_SOURCE_DIR}/solutions/${dir}/${s}")
    set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${src}")
    file(READ "${src}" text)
    if(s STREQUAL P_FILE)
      string(FIND "${text}" "${P_FIND}" at)
      if(at EQUAL -1)
        message(FATAL_ERROR "planted bug lab${n}/${P_NAME}: the text to replace no longer occurs "
                            "in solutions/${dir}/${s}; update grader/${dir}/CMakeLists.txt:\n${P_FIND}")
      endif()
      string(REPLACE "${P_FIND}" "${P_REPLACE}" text "${text}")
      set(text "// PLANTED BUG ${P_NAME}: generated from solutions/${dir}/${s}; do not edit.\n${text}")
    endif()
    file(CONFIGURE OUTPUT "${out_dir}/${s}" CONTENT "${text}" @ONLY)
  endforeach()
  _course_lab_library(lab${n}_planted_${P_NAME} "${out_dir}" "${sources}" "${cuda}")
  _course_grader(grade_lab${n}_planted_${P_NAME} grade_lab${n}_checks lab${n}_planted_${P_NAME} "${link}")
  add_test(NAME lab${n}.planted.${P_NAME}
           COMMAND course_runner expect --binary $<TARGET_FILE:grade_lab${n}_planted_${P_NAME}>
                   --fail "${P_CHECK}" --message "${P_MESSAGE}" --timeout ${timeout})
  set_tests_properties(lab${n}.planted.${P_NAME} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600)
endfunction()

function(course_correct_variant)
  cmake_parse_arguments(PARSE_ARGV 0 V "" "LAB;NAME;FILE;FIND;REPLACE;SOURCE_DIR" "")
  set(n ${V_LAB})
  if(NOT COURSE_PLANTED_BUGS OR NOT TARGET grade_lab${n}_checks)
    return()  # the lab is not built here (a GPU lab without a CUDA compiler)
  endif()
  get_property(sources GLOBAL PROPERTY COURSE_LAB_${n}_SOURCES)
  get_property(dir GLOBAL PROPERTY COURSE_LAB_${n}_DIR)
  get_property(cuda GLOBAL PROPERTY COURSE_LAB_${n}_CUDA)
  get_property(link GLOBAL PROPERTY COURSE_LAB_${n}_LINK)
  get_property(timeout GLOBAL PROPERTY COURSE_LAB_${n}_TIMEOUT)
  set(out_dir "${CMAKE_BINARY_DIR}/variants/lab${n}/${V_NAME}")
  if(V_SOURCE_DIR)
    set(variant_dir "${CMAKE_CURRENT_SOURCE_DIR}/${V_SOURCE_DIR}")
    if(NOT IS_DIRECTORY "${variant_dir}")
      message(FATAL_ERROR "correct variant lab${n}/${V_NAME}: no folder ${variant_dir}")
    endif()
  endif()
  set(found FALSE)
  foreach(s IN LISTS sources)
    set(src "${CMAKE_SOURCE_DIR}/solutions/${dir}/${s}")
    if(V_SOURCE_DIR AND EXISTS "${variant_dir}/${s}")
      set(src "${variant_dir}/${s}")
      set(found TRUE)
    endif()
    set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${src}")
    file(READ "${src}" text)
    if(NOT V_SOURCE_DIR AND s STREQUAL V_FILE)
      string(FIND "${text}" "${V_FIND}" at)
      if(at EQUAL -1)
        message(FATAL_ERROR "correct variant lab${n}/${V_NAME}: the text to replace no longer "
                            "occurs in solutions/${dir}/${s}; update grader/${dir}/CMakeLists.txt:\n${V_FIND}")
      endif()
      string(REPLACE "${V_FIND}" "${V_REPLACE}" text "${text}")
      set(text "// CORRECT VARIANT ${V_NAME}: generated from solutions/${dir}/${s}; do not edit.\n${text}")
      set(found TRUE)
    endif()
    file(CONFIGURE OUTPUT "${out_dir}/${s}" CONTENT "${text}" @ONLY)
  endforeach()
  if(NOT found)
    message(FATAL_ERROR "correct variant lab${n}/${V_NAME}: it replaces none of the lab's sources")
  endif()
  _course_lab_library(lab${n}_variant_${V_NAME} "${out_dir}" "${sources}" "${cuda}")
  _course_grader(grade_lab${n}_variant_${V_NAME} grade_lab${n}_checks lab${n}_variant_${V_NAME} "${link}")
  add_test(NAME lab${n}.variant.${V_NAME}
           COMMAND course_runner expect --binary $<TARGET_FILE:grade_lab${n}_variant_${V_NAME}>
                   --full-marks --timeout ${timeout})
  set_tests_properties(lab${n}.variant.${V_NAME} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600)
endfunction()

# graders.tsv in the build folder: one line per lab for course_runner (number, folder, cpu|gpu,
# student grader, solution grader, why it is not built or "-").
function(course_write_manifest)
  get_property(lines GLOBAL PROPERTY COURSE_MANIFEST)
  list(JOIN lines "\n" content)
  file(GENERATE OUTPUT "${CMAKE_BINARY_DIR}/graders.tsv" CONTENT "${content}\n")
endfunction()
