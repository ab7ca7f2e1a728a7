# How a lab enters the build. A lab is graded by two programs (see grader/isolation/):
#   grade_labN        the trusted grader: its checks, the reference, the bands, and a proxy of the
#                     lab's API that sends every call to a lab process. It never links lab code,
#                     so it is built once, whatever is being graded.
#   labN_worker_*     a lab process: one implementation of the lab (a solution, a planted bug, a
#                     correct variant, the repository's skeleton, a student's code) linked with
#                     the lab's server (serve.cpp) and nothing else of the grader.
#
# Each grader/labN_*/CMakeLists.txt calls
#
#   course_add_lab(NUMBER 1 DIR lab1_softmax SOURCES softmax.cpp GRADER grade_lab1.cpp
#                  PROXY proxy.cpp SERVE serve.cpp [CUDA] [TIMEOUT 60]
#                  [GRADER_LINK targets...] [WORKER_LINK targets...])
#     builds grade_labN and labN_worker_solution (solutions/), and adds the tests: the solution
#     earns full marks at COURSE_FULL_MARKS_SEEDS (1-8); the lab README lists every check. In a student build
#     (COURSE_STUDENT_BUILD, see ./course grade) it builds only labN_worker from the student's
#     tree, from the objects labN_worker_impl that ./course vets first (grader/isolation/vet-lab).
#
#   course_planted_bug(LAB 1 NAME no_max_shift FILE softmax.cpp
#                      FIND "<text in the solution>" REPLACE "<the bug>"
#                      CHECK "<the check that must fail>" MESSAGE "<text its message must hold>")
#     builds labN_worker_planted_<name> from a copy of the solution with FIND replaced by
#     REPLACE, and a test that CHECK fails for that reason. If the solution changes so that FIND
#     no longer occurs, configuring stops and says so: planted bugs cannot go stale. A bug that
#     needs more than one substitution is a PATCH (as for a variant, below). The test grades
#     CHECK and its parent only, in a fresh lab process; ALL_CHECKS grades the whole lab (a bug
#     that shows only after other checks' calls), as does a bug in GPU code.
#
#   course_correct_variant(LAB 1 NAME exp2 FILE softmax.cpp FIND "..." REPLACE "...")
#   course_correct_variant(LAB 3 NAME kv_outer PATCH variants/kv_outer.patch)
#     builds labN_worker_variant_<name> from another correct implementation (a substitution in
#     the solution, or a unified diff against it beside the grader: the diff is the idea, and
#     like FIND it stops the configure step when it no longer applies) and a test that it earns
#     full marks at COURSE_VARIANT_SEEDS (1-4). CHECKS "gpu:*" grades only the checks whose
#     names match (a variant of a lab's GPU part, whose CPU part is the solution's, unchanged).
#
#   course_partial_submission(LAB 9 NAME step_1_only FILE kernel.cuh FIND "..." REPLACE "..."
#                             EARNS "<a check of the steps it has>")
#     builds labN_worker_partial_<name> from the solution with a later step of a staircase lab
#     left as the skeleton has it (FIND/REPLACE or PATCH, as above), and a test that, graded in
#     full (speed checks left out), it earns EARNS's points: a student who stops at an earlier
#     step keeps that step's points, however the unwritten one fails (a kernel stopped at a
#     bounded wait leaves its process's CUDA context broken, and the next call fails too).
#     FAILS_IF_PROCESS_KEPT adds the counterpart test: graded with COURSE_LAB_RESTART_AFTER_ERROR=0
#     (the grader keeps a lab process after an error), EARNS must fail. It shows that the
#     submission's error really breaks its process, so that the test above cannot pass for
#     want of a broken one.
#     TIMEOUT and CALL_TIMEOUT (seconds) grade it under a shorter time limit per lab (course_runner's
#     --timeout; the lab's TIMEOUT otherwise) and per call (COURSE_CALL_TIMEOUT): a submission
#     that hangs, tested in seconds rather than minutes.

# A keyword given twice to the functions below stops the configure step (CourseArguments.cmake).
include(${CMAKE_CURRENT_LIST_DIR}/CourseArguments.cmake)

# Two tiers of seeds. The project's test suite (./course test, CI) grades each solution at seeds
# 1-8 and each correct variant at seeds 1-4: twenty seeds of lab 3 and lab 7 and their variants
# were a third of CI's CPU time on 2 cores, and a variant changes one idea of the solution whose
# bands the solution's seeds explore already. `./course test --full` grades both at seeds 1-20,
# and tools/gpu-check grades the GPU labs' solutions and variants at seeds 1-20 on the device.
set(COURSE_FULL_MARKS_SEEDS "1-8" CACHE STRING "Seeds at which the solutions must earn full marks")
set(COURSE_VARIANT_SEEDS "1-4" CACHE STRING "Seeds at which the correct variants must earn full marks")

# "1-20" or "1,3,5-7" (as course_runner's --seeds) -> the list of seeds.
function(_course_seed_list spec out_var)
  set(seeds "")
  string(REPLACE "," ";" parts "${spec}")
  foreach(part IN LISTS parts)
    if(part MATCHES "^([0-9]+)-([0-9]+)$")
      if(CMAKE_MATCH_1 GREATER CMAKE_MATCH_2)
        message(FATAL_ERROR "COURSE_FULL_MARKS_SEEDS: '${part}' is an empty range")
      endif()
      foreach(seed RANGE ${CMAKE_MATCH_1} ${CMAKE_MATCH_2})
        list(APPEND seeds ${seed})
      endforeach()
    elseif(part MATCHES "^[0-9]+$")
      list(APPEND seeds ${part})
    else()
      message(FATAL_ERROR "COURSE_FULL_MARKS_SEEDS: '${part}' is not a seed or a range A-B")
    endif()
  endforeach()
  set(${out_var} "${seeds}" PARENT_SCOPE)
endfunction()

# A lab process: the lab's server, the isolation layer's worker side, and one implementation.
function(_course_worker target lab_dir sources serve cuda worker_link include_target)
  # ARGN: object libraries compiled once and shared (the solution's files that a planted bug or
  # a correct variant leaves unchanged; see _course_lab_process_from).
  set(files "")
  foreach(s IN LISTS sources)
    list(APPEND files "${lab_dir}/${s}")
  endforeach()
  set(objects "")
  if(files)
    add_library(${target}_impl OBJECT ${files})
    _course_lab_object_settings(${target}_impl "${cuda}" ${include_target})
    list(APPEND objects $<TARGET_OBJECTS:${target}_impl>)
  endif()
  foreach(shared IN LISTS ARGN)
    list(APPEND objects $<TARGET_OBJECTS:${shared}>)
  endforeach()
  set(worker_objects isolation_worker_cpu)
  if(cuda)
    set(worker_objects isolation_worker_gpu)
  endif()
  add_executable(${target} ${serve} ${objects} $<TARGET_OBJECTS:${worker_objects}>)
  target_link_libraries(${target} PRIVATE isolation_wire course_api ${worker_link})
  target_include_directories(${target} PRIVATE ${CMAKE_SOURCE_DIR}/grader/isolation ${CMAKE_CURRENT_SOURCE_DIR})
  if(cuda)
    target_link_libraries(${target} PRIVATE CUDA::cudart)
  endif()
endfunction()

# How a lab's own source files are compiled, whoever's they are.
function(_course_lab_object_settings target cuda include_target)
  target_link_libraries(${target} PUBLIC ${include_target})
  if(cuda)
    target_link_libraries(${target} PUBLIC CUDA::cudart)
    target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:-lineinfo>)
  endif()
endfunction()

# The object library of one compiled file (.c/.cc/.cpp/.cu) of a lab's solution, made once per lab
# and shared by the solution's lab process, the solution library, and every planted bug and
# variant that leaves the file unchanged. Sets ${out_var} to its name.
function(_course_solution_object n s out_var)
  get_property(dir GLOBAL PROPERTY COURSE_LAB_${n}_DIR)
  get_property(cuda GLOBAL PROPERTY COURSE_LAB_${n}_CUDA)
  string(MAKE_C_IDENTIFIER "lab${n}_solution_object_${s}" object)
  if(NOT TARGET ${object})
    add_library(${object} OBJECT "${CMAKE_SOURCE_DIR}/solutions/${dir}/${s}")
    _course_lab_object_settings(${object} "${cuda}" course_api)
    # A GPU solution file's compile also saves ptxas's report of its kernels (registers, spills),
    # which gpu.resource_usage judges instead of compiling the file again (CMakeLists.txt).
    if(COURSE_PTXAS_REPORTS AND s MATCHES "\\.cu$")
      set_target_properties(${object} PROPERTIES CUDA_COMPILER_LAUNCHER
        "${CMAKE_SOURCE_DIR}/tools/ptxas-report;${COURSE_PTXAS_REPORTS}/solutions/${dir}/${s}.txt")
    endif()
  endif()
  set(${out_var} ${object} PARENT_SCOPE)
endfunction()

function(course_add_lab)
  cmake_parse_arguments(L "CUDA;TIMES_GPU" "NUMBER;DIR;TIMEOUT" "SOURCES;GRADER;PROXY;SERVE;GRADER_LINK;WORKER_LINK" ${ARGN})
  if(NOT L_TIMEOUT)
    set(L_TIMEOUT 120)
  endif()
  set(n ${L_NUMBER})
  set(kind cpu)
  if(L_CUDA)
    set(kind gpu)
  endif()
  set(serve "")
  foreach(s IN LISTS L_SERVE)
    list(APPEND serve "${CMAKE_CURRENT_SOURCE_DIR}/${s}")
  endforeach()
  set_property(GLOBAL PROPERTY COURSE_LAB_${n}_SOURCES "${L_SOURCES}")
  set_property(GLOBAL PROPERTY COURSE_LAB_${n}_DIR "${L_DIR}")
  set_property(GLOBAL PROPERTY COURSE_LAB_${n}_CUDA "${L_CUDA}")
  set_property(GLOBAL PROPERTY COURSE_LAB_${n}_SERVE "${serve}")
  set_property(GLOBAL PROPERTY COURSE_LAB_${n}_WORKER_LINK "${L_WORKER_LINK}")
  set_property(GLOBAL PROPERTY COURSE_LAB_${n}_TIMEOUT "${L_TIMEOUT}")
  # TIMES_GPU: the grader has speed checks, which time the GPU; a test that runs them runs alone
  # (RUN_SERIAL), or another test's kernels would share the GPU with the timed one.
  set_property(GLOBAL PROPERTY COURSE_LAB_${n}_TIMES_GPU "${L_TIMES_GPU}")
  if(L_CUDA AND NOT COURSE_HAVE_CUDA)
    set_property(GLOBAL APPEND PROPERTY COURSE_MANIFEST
      "${n}\t${L_DIR}\t${kind}\t-\t-\tnot built: no CUDA compiler was found (install the CUDA toolkit and reconfigure)")
    return()
  endif()

  if(COURSE_STUDENT_BUILD)
    # A submission may hold only some labs, or a lab without one of its files: that lab is left
    # out of the build (missing/labN.txt names what is missing, for ./course to report), and every
    # other lab still builds.
    set(missing "")
    foreach(s IN LISTS L_SOURCES)
      if(NOT EXISTS "${COURSE_LABS_DIR}/${L_DIR}/${s}" OR IS_DIRECTORY "${COURSE_LABS_DIR}/${L_DIR}/${s}")
        list(APPEND missing "${L_DIR}/${s}")
      endif()
    endforeach()
    file(REMOVE "${CMAKE_BINARY_DIR}/missing/lab${n}.txt")
    if(missing)
      list(JOIN missing ", " missing)
      file(WRITE "${CMAKE_BINARY_DIR}/missing/lab${n}.txt" "${missing}\n")
      return()
    endif()
    # The student's code: objects first (./course vets their includes and symbols), then the
    # lab process. Student sources see only the staged API headers and their own folder. The
    # lab's server is the trusted build's object where it was compiled the same way (the same
    # files and links: lab 7's differs with and without CUDA), else compiled here.
    if(DEFINED COURSE_TRUSTED_SERVE_${n} AND COURSE_TRUSTED_SERVE_${n}_KEY STREQUAL "${serve}|${L_WORKER_LINK}")
      add_library(lab${n}_serve OBJECT IMPORTED)
      set_target_properties(lab${n}_serve PROPERTIES IMPORTED_OBJECTS "${COURSE_TRUSTED_SERVE_${n}}")
      _course_worker(lab${n}_worker "${COURSE_LABS_DIR}/${L_DIR}" "${L_SOURCES}" "" "${L_CUDA}"
                     "${L_WORKER_LINK}" course_api_student lab${n}_serve)
    else()
      _course_worker(lab${n}_worker "${COURSE_LABS_DIR}/${L_DIR}" "${L_SOURCES}" "${serve}" "${L_CUDA}"
                     "${L_WORKER_LINK}" course_api_student)
    endif()
    set_target_properties(lab${n}_worker PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/workers)
    return()
  endif()

  add_executable(grade_lab${n} ${L_GRADER} ${L_PROXY})
  target_link_libraries(grade_lab${n} PRIVATE grader_main isolation_client ${L_GRADER_LINK})
  target_include_directories(grade_lab${n} PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
  # The lab process's server (serve.cpp), compiled once and linked into every lab process of this
  # lab that the build makes (solution, skeleton, planted bugs, variants).
  add_library(lab${n}_serve OBJECT ${serve})
  set_property(GLOBAL APPEND PROPERTY COURSE_TRUSTED_SERVES
    "set(COURSE_TRUSTED_SERVE_${n} \"$<TARGET_OBJECTS:lab${n}_serve>\")\nset(COURSE_TRUSTED_SERVE_${n}_KEY \"${serve}|${L_WORKER_LINK}\")")
  target_link_libraries(lab${n}_serve PRIVATE isolation_wire course_api ${L_WORKER_LINK})
  target_include_directories(lab${n}_serve PRIVATE ${CMAKE_SOURCE_DIR}/grader/isolation ${CMAKE_CURRENT_SOURCE_DIR})
  if(L_CUDA)
    target_link_libraries(lab${n}_serve PRIVATE CUDA::cudart)
  endif()
  set(solution_objects "")
  foreach(s IN LISTS L_SOURCES)
    if(s MATCHES "\\.(c|cc|cpp|cu)$")
      _course_solution_object(${n} "${s}" object)
      list(APPEND solution_objects ${object})
    endif()
  endforeach()
  _course_worker(lab${n}_worker_solution "${CMAKE_SOURCE_DIR}/solutions/${L_DIR}" "" "" "${L_CUDA}"
                 "${L_WORKER_LINK}" course_api lab${n}_serve ${solution_objects})
  # The solution as a library, for the precision report and the benchmarks.
  set(files "")
  foreach(object IN LISTS solution_objects)
    list(APPEND files $<TARGET_OBJECTS:${object}>)
  endforeach()
  add_library(lab${n}_solution STATIC ${files})
  target_link_libraries(lab${n}_solution PUBLIC course_api)
  if(L_CUDA)
    target_link_libraries(lab${n}_solution PUBLIC CUDA::cudart)
  endif()

  set_property(GLOBAL APPEND PROPERTY COURSE_MANIFEST
    "${n}\t${L_DIR}\t${kind}\t$<TARGET_FILE:grade_lab${n}>\t$<TARGET_FILE:lab${n}_worker_solution>\t-")

  # In the sanitizer build each seed is a test of its own (lab3.solution_full_marks.seed1, ...):
  # a grading there takes seven times as long (lab 3: 35 s of CPU), and lab 3's two seeds one
  # after the other were that pass's longest test and its tail.
  set(seed_groups "${COURSE_FULL_MARKS_SEEDS}")
  if(COURSE_SANITIZE)
    _course_seed_list("${COURSE_FULL_MARKS_SEEDS}" seed_groups)
  endif()
  foreach(seeds IN LISTS seed_groups)
    set(name lab${n}.solution_full_marks)
    if(COURSE_SANITIZE)
      set(name ${name}.seed${seeds})
    endif()
    add_test(NAME ${name}
             COMMAND course_runner expect --binary $<TARGET_FILE:grade_lab${n}>
                     --worker $<TARGET_FILE:lab${n}_worker_solution> --full-marks
                     --seeds ${seeds} --timeout ${L_TIMEOUT})
    # COST: ctest starts the costliest tests first (on a fresh clone it has no timings of its
    # own), and a full-marks test, 20 gradings, is among the longest (lab 3's: 80 s of CI's 2
    # cores), so it must not start last. Among tests of one COST, the order is the labs' order.
    set_tests_properties(${name} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 1200
                         RUN_SERIAL "${L_TIMES_GPU}" COST 100)
  endforeach()

  # The handout's table of checks must match the grader's.
  add_test(NAME lab${n}.readme_lists_every_check
           COMMAND ${CMAKE_SOURCE_DIR}/grader/tests/test_readme_lists_checks.sh
                   $<TARGET_FILE:course_runner> $<TARGET_FILE:grade_lab${n}>
                   ${CMAKE_SOURCE_DIR}/labs/${L_DIR}/README.md)
endfunction()

# The repository's skeleton must fail the lab's first check with the message that tells a
# student what to edit. Called by a lab after course_add_lab, naming one check and function.
function(course_expect_skeleton_message)
  cmake_parse_arguments(PARSE_ARGV 0 S "" "LAB;CHECK;FUNCTION;FILE" "")
  # Not in the sanitizer build: a skeleton throws at its first call, and compiling lab 3's and
  # lab 7's there costs more than the sanitizers could find in a function that only throws.
  if(COURSE_STUDENT_BUILD OR COURSE_SANITIZE OR NOT TARGET grade_lab${S_LAB})
    return()
  endif()
  set(n ${S_LAB})
  get_property(sources GLOBAL PROPERTY COURSE_LAB_${n}_SOURCES)
  get_property(dir GLOBAL PROPERTY COURSE_LAB_${n}_DIR)
  get_property(cuda GLOBAL PROPERTY COURSE_LAB_${n}_CUDA)
  get_property(link GLOBAL PROPERTY COURSE_LAB_${n}_WORKER_LINK)
  _course_worker(lab${n}_worker_skeleton "${CMAKE_SOURCE_DIR}/labs/${dir}" "${sources}" ""
                 "${cuda}" "${link}" course_api lab${n}_serve)
  add_test(NAME lab${n}.skeleton_says_not_implemented
           COMMAND course_runner expect --binary $<TARGET_FILE:grade_lab${n}>
                   --worker $<TARGET_FILE:lab${n}_worker_skeleton>
                   --fail "${S_CHECK}" --message "not implemented: ${S_FUNCTION} in ${S_FILE}")
  set_tests_properties(lab${n}.skeleton_says_not_implemented PROPERTIES SKIP_RETURN_CODE 77)
endfunction()

# A copy of the solution's files with one substitution (or whole files from a folder), as the
# sources of a lab process. Sets ${out_var} to the folder holding the lab's sources.
function(_course_derived_sources n name kind file find replace patch out_var)
  get_property(sources GLOBAL PROPERTY COURSE_LAB_${n}_SOURCES)
  get_property(dir GLOBAL PROPERTY COURSE_LAB_${n}_DIR)
  set(out_dir "${CMAKE_BINARY_DIR}/${kind}/lab${n}/${name}")
  set(origin "solutions/${dir}/${file}")
  if(patch)
    set(patched "${CMAKE_BINARY_DIR}/${kind}/lab${n}/${name}.patched")
    set(origin "solutions/${dir} + ${patch}")
    _course_apply_patch("${kind} lab${n}/${name}" "${CMAKE_SOURCE_DIR}/solutions/${dir}" "${sources}"
                        "${CMAKE_CURRENT_SOURCE_DIR}/${patch}" "${patched}")
  endif()
  set(changed FALSE)
  set(changed_files "")
  foreach(s IN LISTS sources)
    set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${CMAKE_SOURCE_DIR}/solutions/${dir}/${s}")
    file(READ "${CMAKE_SOURCE_DIR}/solutions/${dir}/${s}" solution_text)
    set(text "${solution_text}")
    if(patch)
      file(READ "${patched}/${s}" text)
    elseif(s STREQUAL file)
      string(FIND "${text}" "${find}" at)
      if(at EQUAL -1)
        message(FATAL_ERROR "${kind} lab${n}/${name}: the text to replace no longer occurs "
                            "in solutions/${dir}/${s}; update ${CMAKE_CURRENT_LIST_FILE}:\n${find}")
      endif()
      string(REPLACE "${find}" "${replace}" text "${text}")
    endif()
    if(NOT text STREQUAL solution_text)
      set(changed TRUE)
      list(APPEND changed_files "${s}")
      set(text "// ${kind} ${name}: generated from ${origin}; do not edit.\n${text}")
    endif()
    file(CONFIGURE OUTPUT "${out_dir}/${s}" CONTENT "${text}" @ONLY)
  endforeach()
  if(NOT changed)
    message(FATAL_ERROR "${kind} lab${n}/${name}: it changes none of the lab's sources")
  endif()
  set(${out_var} "${out_dir}" PARENT_SCOPE)
  set(${out_var}_changed "${changed_files}" PARENT_SCOPE)
endfunction()

# Copies the lab's solution files into `stage` and applies `patch_file` there (paths a/FILE,
# b/FILE), exactly: no fuzz, so that a patch that no longer fits the solution stops the
# configure step instead of changing the wrong lines.
function(_course_apply_patch what solution_dir sources patch_file stage)
  if(NOT EXISTS "${patch_file}")
    message(FATAL_ERROR "${what}: no patch ${patch_file}")
  endif()
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${patch_file}")
  file(REMOVE_RECURSE "${stage}")
  file(MAKE_DIRECTORY "${stage}")
  foreach(s IN LISTS sources)
    file(COPY "${solution_dir}/${s}" DESTINATION "${stage}")
  endforeach()
  find_program(COURSE_PATCH_PROGRAM patch)
  find_program(COURSE_GIT_PROGRAM git)
  if(COURSE_PATCH_PROGRAM)
    set(cmd ${COURSE_PATCH_PROGRAM} -p1 --fuzz=0 --batch --no-backup-if-mismatch --quiet -i "${patch_file}")
  elseif(COURSE_GIT_PROGRAM)
    # Outside any repository (the ceiling stops git looking above the stage), git apply is patch.
    set(cmd ${CMAKE_COMMAND} -E env GIT_CEILING_DIRECTORIES=${stage} ${COURSE_GIT_PROGRAM} apply -p1 "${patch_file}")
  else()
    message(FATAL_ERROR "${what}: applying its patch needs `patch` or `git` (apt-get install patch)")
  endif()
  execute_process(COMMAND ${cmd} WORKING_DIRECTORY "${stage}" RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${what}: ${patch_file} no longer applies to ${solution_dir}; update the patch "
                        "(diff -u against the solution, paths a/FILE and b/FILE):\n${out}")
  endif()
endfunction()

# A lab process from derived sources: the files that differ from the solution are compiled from
# `derived_dir`; the others are the solution's own, compiled once per lab and shared by every
# planted bug and variant (a GPU lab's .cu need not be rebuilt for a bug in its .cpp).
function(_course_lab_process_from n target derived_dir changed)
  get_property(sources GLOBAL PROPERTY COURSE_LAB_${n}_SOURCES)
  get_property(cuda GLOBAL PROPERTY COURSE_LAB_${n}_CUDA)
  get_property(link GLOBAL PROPERTY COURSE_LAB_${n}_WORKER_LINK)
  # A changed header can change any file that includes it: then nothing is shared.
  set(header_changed FALSE)
  foreach(s IN LISTS changed)
    if(NOT s MATCHES "\\.(c|cc|cpp|cu)$")
      set(header_changed TRUE)
    endif()
  endforeach()
  set(own "")
  set(shared "")
  foreach(s IN LISTS sources)
    if(header_changed OR s IN_LIST changed OR NOT s MATCHES "\\.(c|cc|cpp|cu)$")
      list(APPEND own "${s}")
      continue()
    endif()
    _course_solution_object(${n} "${s}" object)
    list(APPEND shared ${object})
  endforeach()
  _course_worker(${target} "${derived_dir}" "${own}" "" "${cuda}" "${link}" course_api lab${n}_serve ${shared})
endfunction()

# Planted bugs and correct variants compile their changed C++ files with course/cpu.hpp
# precompiled (Eigen/Core and the standard headers every CPU lab includes): parsing those headers
# was more than half of each file's compile (lab 3: 1.9 of 3.6 s of CPU), and CI compiles about a
# hundred such files. One precompiled header per set of flags (`flavour`: planted bugs add -O1,
# variants keep the students' flags), as GCC uses a precompiled header only under the -O level it
# was made with. Files of other languages (CUDA) and targets of mixed languages are left as they
# are. A student's build never gets here: its lab is compiled as the student wrote it.
function(_course_share_cpu_pch target flavour)
  if(NOT TARGET ${target})
    return()
  endif()
  get_target_property(sources ${target} SOURCES)
  foreach(s IN LISTS sources)
    if(NOT s MATCHES "\\.(cc|cpp)$")
      return()
    endif()
  endforeach()
  set(pch course_cpu_pch_${flavour})
  if(NOT TARGET ${pch})
    set(stub ${CMAKE_BINARY_DIR}/pch/${flavour}.cpp)
    file(WRITE ${stub} "// The object that course/cpu.hpp is precompiled for (see _course_share_cpu_pch).\n")
    add_library(${pch} OBJECT ${stub})
    target_link_libraries(${pch} PUBLIC course_api)
    target_precompile_headers(${pch} PRIVATE <course/cpu.hpp>)
    if(flavour STREQUAL "planted")
      target_compile_options(${pch} PRIVATE -O1)  # as course_planted_bug compiles them
    endif()
  endif()
  target_precompile_headers(${target} REUSE_FROM ${pch})
endfunction()

# Sets ${out_var} TRUE when a planted bug or correct variant is not built here: it changes GPU code
# (a .cu or .cuh file: `changed`) on a machine without a GPU (COURSE_GPU_DERIVED in CMakeLists.txt).
# Its test then says so and skips (77); the caller returns after the configure-time check that its
# FIND or patch applies. One that changes only host code (lab 7's CPU part) is built and runs.
function(_course_skip_unbuilt_derived changed test_name out_var)
  set(gpu_code FALSE)
  foreach(s IN LISTS changed)
    if(s MATCHES "\\.(cu|cuh)$")
      set(gpu_code TRUE)
    endif()
  endforeach()
  if(gpu_code AND NOT COURSE_BUILD_GPU_DERIVED)
    add_test(NAME ${test_name}
             COMMAND sh -c "echo 'SKIPPED: not built on a machine without a GPU (it applies; -DCOURSE_GPU_DERIVED=ON builds it, tools/gpu-check runs it)'; exit 77")
    set_tests_properties(${test_name} PROPERTIES SKIP_RETURN_CODE 77)
    set(${out_var} TRUE PARENT_SCOPE)
  else()
    set(${out_var} FALSE PARENT_SCOPE)
  endif()
endfunction()

# The lab process of a planted bug, correct variant or partial submission (`kind`: planted, variant,
# partial): the solution's sources with FIND replaced (or PATCH applied), built as
# lab<n>_worker_<kind>_<name>. Sets ${out_var} to that target, and ${out_var}_changed to the files
# it changes; ${out_var} is empty where it is not built here, and the caller adds nothing more: a
# student build, a build without planted bugs, a lab whose grader is not built (a GPU lab without
# a CUDA compiler), or GPU code on a machine without a GPU (its test lab<n>.<kind>.<name> is then
# added as a skip).
function(_course_derived_lab_process n kind name file find replace patch out_var)
  set(${out_var} "" PARENT_SCOPE)
  if(COURSE_STUDENT_BUILD OR NOT COURSE_PLANTED_BUGS OR NOT TARGET grade_lab${n})
    return()
  endif()
  _course_derived_sources(${n} ${name} ${kind} "${file}" "${find}" "${replace}" "${patch}" derived)
  _course_skip_unbuilt_derived("${derived_changed}" lab${n}.${kind}.${name} not_built)
  set(${out_var}_changed "${derived_changed}" PARENT_SCOPE)
  if(not_built)
    set(${out_var} "" PARENT_SCOPE)
    return()
  endif()
  _course_lab_process_from(${n} lab${n}_worker_${kind}_${name} "${derived}" "${derived_changed}")
  set(${out_var} lab${n}_worker_${kind}_${name} PARENT_SCOPE)
endfunction()

# sh -c SCRIPT _ RUNNER GRADER CHECK ARGS...: `RUNNER expect --binary GRADER ARGS...` on CHECK and its
# parent alone (--only). The grader lists its checks and their parents on descriptor 3 when
# COURSE_RESULTS_FD says so, as course_runner reads them; doctest's filter splits on commas, so
# they (and backslashes) are escaped. A CHECK the grader does not list leaves the filter empty:
# the lab is graded in full and the runner says that it has no such check.
set(_course_expect_with_parent [=[
runner=$1 grader=$2 check=$3
shift 3
only=$(COURSE_RESULTS_FD=3 "$grader" --list-test-cases --no-version 3>&1 >/dev/null 2>&1 |
  check=$check awk -F '\t' '$1 == "check" && $2 == ENVIRON["check"] {
    print $2; n = split($3, kv, ";"); for (i = 1; i <= n; i++) if (kv[i] ~ /^parent=/) print substr(kv[i], 8) }' |
  sed 's/[\\,]/\\&/g' | paste -sd, -)
exec "$runner" expect --binary "$grader" --only "$only" "$@"
]=])

function(course_planted_bug)
  # SHORT_OF_FULL: the check need only fall short of its full points (partial credit counts as
  # rejected), for a check graded on a sliding scale where partial is the honest grade.
  # ALL_CHECKS: every check is graded, not CHECK and its parent alone (see the top of this file).
  course_refuse_repeated_keywords("planted bug" "LAB;NAME;FILE;FIND;REPLACE;PATCH;CHECK;MESSAGE" ${ARGV})
  cmake_parse_arguments(PARSE_ARGV 0 P "SHORT_OF_FULL;ALL_CHECKS" "LAB;NAME;FILE;FIND;REPLACE;PATCH;CHECK;MESSAGE" "")
  set(n ${P_LAB})
  set(expectation --fail)
  if(P_SHORT_OF_FULL)
    set(expectation --short-of-full)
  endif()
  get_property(timeout GLOBAL PROPERTY COURSE_LAB_${n}_TIMEOUT)
  _course_derived_lab_process(${n} planted ${P_NAME} "${P_FILE}" "${P_FIND}" "${P_REPLACE}" "${P_PATCH}" worker)
  if(NOT worker)
    return()
  endif()
  # Its changed C++ at -O1: a planted bug is graded on one check (and its parent), where speed
  # does not matter, and the 63 of them compiled at -O3 (Eigen's templates, every dtype) were a
  # third of CI's build; -O1 takes about 30% less. (GPU code and the variants, which must keep
  # full marks everywhere, stay as the students' build compiles them.)
  if(TARGET lab${n}_worker_planted_${P_NAME}_impl)
    target_compile_options(lab${n}_worker_planted_${P_NAME}_impl PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-O1>)
  endif()
  _course_share_cpu_pch(lab${n}_worker_planted_${P_NAME}_impl planted)
  set(gpu_code FALSE)
  foreach(s IN LISTS worker_changed)
    if(s MATCHES "\\.(cu|cuh)$")
      set(gpu_code TRUE)
    endif()
  endforeach()
  if(gpu_code OR P_ALL_CHECKS)
    # A bug in GPU code is graded in full, as tools/gpu-check has always run it (CI builds none).
    add_test(NAME lab${n}.planted.${P_NAME}
             COMMAND course_runner expect --binary $<TARGET_FILE:grade_lab${n}>
                     --worker $<TARGET_FILE:lab${n}_worker_planted_${P_NAME}>
                     --solution-worker $<TARGET_FILE:lab${n}_worker_solution>
                     ${expectation} "${P_CHECK}" --message "${P_MESSAGE}" --timeout ${timeout})
  else()
    # Only CHECK is graded, with its parent (a check graded without its parent is a configuration
    # error of the runner): what the test asserts is that one check's verdict, and the lab's other
    # checks cost CI seconds each (lab 3: 4 s of CPU a grading, 0.3 s for one check).
    add_test(NAME lab${n}.planted.${P_NAME}
             COMMAND sh -c "${_course_expect_with_parent}" expect_with_parent
                     $<TARGET_FILE:course_runner> $<TARGET_FILE:grade_lab${n}> "${P_CHECK}"
                     --worker $<TARGET_FILE:lab${n}_worker_planted_${P_NAME}>
                     --solution-worker $<TARGET_FILE:lab${n}_worker_solution>
                     ${expectation} "${P_CHECK}" --message "${P_MESSAGE}" --timeout ${timeout})
  endif()
  get_property(times_gpu GLOBAL PROPERTY COURSE_LAB_${n}_TIMES_GPU)
  set(serial FALSE)
  if(times_gpu AND P_CHECK MATCHES "^speed:")
    set(serial TRUE)  # it times the GPU (course_add_lab's TIMES_GPU)
  endif()
  set_tests_properties(lab${n}.planted.${P_NAME} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600 RUN_SERIAL ${serial})
endfunction()

function(course_correct_variant)
  course_refuse_repeated_keywords("correct variant" "LAB;NAME;FILE;FIND;REPLACE;PATCH;CHECKS" ${ARGV})
  cmake_parse_arguments(PARSE_ARGV 0 V "" "LAB;NAME;FILE;FIND;REPLACE;PATCH;CHECKS" "")
  set(n ${V_LAB})
  get_property(timeout GLOBAL PROPERTY COURSE_LAB_${n}_TIMEOUT)
  _course_derived_lab_process(${n} variant ${V_NAME} "${V_FILE}" "${V_FIND}" "${V_REPLACE}" "${V_PATCH}" worker)
  if(NOT worker)
    return()
  endif()
  _course_share_cpu_pch(lab${n}_worker_variant_${V_NAME}_impl variant)
  set(only "")
  if(V_CHECKS)
    set(only --only "${V_CHECKS}")
  endif()
  # variants.tsv: which checks each correct variant claims (tools/gpu-check grades it on those).
  set(claimed "${V_CHECKS}")
  if(NOT claimed)
    set(claimed "*")
  endif()
  set_property(GLOBAL APPEND PROPERTY COURSE_VARIANTS "lab${n}_worker_variant_${V_NAME}\t${claimed}")
  add_test(NAME lab${n}.variant.${V_NAME}
           COMMAND course_runner expect --binary $<TARGET_FILE:grade_lab${n}>
                   --worker $<TARGET_FILE:lab${n}_worker_variant_${V_NAME}>
                   --solution-worker $<TARGET_FILE:lab${n}_worker_solution>
                   --full-marks --seeds ${COURSE_VARIANT_SEEDS} --timeout ${timeout} ${only})
  get_property(times_gpu GLOBAL PROPERTY COURSE_LAB_${n}_TIMES_GPU)
  set(serial FALSE)
  if(times_gpu AND claimed STREQUAL "*")
    set(serial TRUE)  # its checks include the speed checks (course_add_lab's TIMES_GPU)
  endif()
  set_tests_properties(lab${n}.variant.${V_NAME} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 1200 RUN_SERIAL ${serial}
                       COST 100)  # as the solution's (course_add_lab)
endfunction()

function(course_partial_submission)
  course_refuse_repeated_keywords("partial submission" "LAB;NAME;FILE;FIND;REPLACE;PATCH;EARNS;TIMEOUT;CALL_TIMEOUT" ${ARGV})
  cmake_parse_arguments(PARSE_ARGV 0 P "FAILS_IF_PROCESS_KEPT" "LAB;NAME;FILE;FIND;REPLACE;PATCH;EARNS;TIMEOUT;CALL_TIMEOUT" "")
  set(n ${P_LAB})
  get_property(timeout GLOBAL PROPERTY COURSE_LAB_${n}_TIMEOUT)
  if(P_TIMEOUT)
    set(timeout ${P_TIMEOUT})
  endif()
  set(environment "")
  if(P_CALL_TIMEOUT)
    set(environment "COURSE_CALL_TIMEOUT=${P_CALL_TIMEOUT}")
  endif()
  _course_derived_lab_process(${n} partial ${P_NAME} "${P_FILE}" "${P_FIND}" "${P_REPLACE}" "${P_PATCH}" worker)
  if(NOT worker)
    return()
  endif()
  set(expect $<TARGET_FILE:course_runner> expect --binary $<TARGET_FILE:grade_lab${n}>
             --worker $<TARGET_FILE:lab${n}_worker_partial_${P_NAME}>
             --earns "${P_EARNS}" --exclude "speed:*" --timeout ${timeout})
  add_test(NAME lab${n}.partial.${P_NAME} COMMAND ${expect})
  set_tests_properties(lab${n}.partial.${P_NAME} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 900
                       ENVIRONMENT "${environment}")
  if(P_FAILS_IF_PROCESS_KEPT)
    add_test(NAME lab${n}.partial.${P_NAME}.fails_when_the_process_is_kept
             COMMAND ${CMAKE_COMMAND} -E env COURSE_LAB_RESTART_AFTER_ERROR=0 ${expect})
    set_tests_properties(lab${n}.partial.${P_NAME}.fails_when_the_process_is_kept PROPERTIES
                         SKIP_RETURN_CODE 77 TIMEOUT 900 ENVIRONMENT "${environment}"
                         PASS_REGULAR_EXPRESSION "to earn its full points, but it failed")
  endif()
endfunction()

# graders.tsv in the build folder: one line per lab for course_runner (number, folder, cpu|gpu,
# trusted grader, the solution's lab process, why the lab is not built or "-"); variants.tsv:
# the correct variants' lab processes and the checks each claims (tools/gpu-check reads it).
function(course_write_manifest)
  if(COURSE_STUDENT_BUILD)
    return()
  endif()
  _course_write_trusted_objects()
  get_property(lines GLOBAL PROPERTY COURSE_MANIFEST)
  list(JOIN lines "\n" content)
  file(GENERATE OUTPUT "${CMAKE_BINARY_DIR}/graders.tsv" CONTENT "${content}\n")
  # One line per correct variant: its lab process's name and the checks it claims full marks on.
  get_property(variants GLOBAL PROPERTY COURSE_VARIANTS)
  list(JOIN variants "\n" content)
  file(GENERATE OUTPUT "${CMAKE_BINARY_DIR}/variants.tsv" CONTENT "${content}\n")
endfunction()

# trusted-objects.cmake in the build folder: the trusted parts of a lab process (the isolation
# layer, the heap meter, the GPU harness, each lab's server) as this build compiled them, for a
# student build (-DCOURSE_TRUSTED_BUILD=<this folder>, grader/CMakeLists.txt) to link instead of
# compiling them again for every submission. ./course builds them before any student build.
function(_course_write_trusted_objects)
  if(COURSE_SANITIZE)
    return()  # sanitized objects would not link into a student build
  endif()
  set(src ${CMAKE_SOURCE_DIR}/grader)
  set(text "# Written by the trusted build (cmake/CourseLab.cmake); read by student builds.\n")
  string(APPEND text "add_library(isolation_wire STATIC IMPORTED)\n"
    "set_target_properties(isolation_wire PROPERTIES IMPORTED_LOCATION \"$<TARGET_FILE:isolation_wire>\"\n"
    "  INTERFACE_INCLUDE_DIRECTORIES \"${src}/isolation\")\n")
  foreach(flavour cpu gpu)
    string(APPEND text "add_library(isolation_worker_${flavour} OBJECT IMPORTED)\n"
      "set_target_properties(isolation_worker_${flavour} PROPERTIES IMPORTED_OBJECTS \"$<TARGET_OBJECTS:isolation_worker_${flavour}>\")\n")
  endforeach()
  string(APPEND text "add_library(grader_heap_meter STATIC IMPORTED)\n"
    "set_target_properties(grader_heap_meter PROPERTIES IMPORTED_LOCATION \"$<TARGET_FILE:grader_heap_meter>\"\n"
    "  INTERFACE_INCLUDE_DIRECTORIES \"${src}/common\")\n")
  if(COURSE_HAVE_CUDA)
    string(APPEND text "if(COURSE_HAVE_CUDA)\n  add_library(gpu_lab_runner STATIC IMPORTED)\n"
      "  set_target_properties(gpu_lab_runner PROPERTIES IMPORTED_LOCATION \"$<TARGET_FILE:gpu_lab_runner>\"\n"
      "    INTERFACE_INCLUDE_DIRECTORIES \"${src}/gpu;${src}/isolation\"\n"
      "    INTERFACE_LINK_LIBRARIES \"course_api;isolation_wire;CUDA::cudart\")\nendif()\n")
  endif()
  get_property(serves GLOBAL PROPERTY COURSE_TRUSTED_SERVES)
  list(JOIN serves "\n" serves)
  file(GENERATE OUTPUT "${CMAKE_BINARY_DIR}/trusted-objects.cmake" CONTENT "${text}${serves}\n")
endfunction()
