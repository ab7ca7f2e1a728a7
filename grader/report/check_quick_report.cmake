# ctest report.quick: run `precision_report --quick` and check what it wrote.
#   cmake -DREPORT=<precision_report> -DOUT=<dir> -P check_quick_report.cmake
file(REMOVE_RECURSE "${OUT}")
execute_process(COMMAND "${REPORT}" --quick --out "${OUT}" RESULT_VARIABLE rc)
# precision_report exits 1 itself when blockwise fp64 is not at rounding noise; the CSV is
# checked all the same (so that this script's own check is exercised), and rc at the end.
foreach(f precision.csv error_hist.csv run_info.csv)
  if(NOT EXISTS "${OUT}/${f}")
    message(FATAL_ERROR "precision_report --quick did not write ${OUT}/${f}")
  endif()
endforeach()

file(STRINGS "${OUT}/precision.csv" lines)
list(LENGTH lines n)
# 14 configurations in quick mode, each with 13 rows per dtype (7 comparisons of O, 6 of LSE)
# and 2 more in bf16 and fp16 (every_op_vs_ref, O and LSE: all quick shapes have N <= 1024):
# 14 x 56 rows + header.
if(NOT n EQUAL 785)
  message(FATAL_ERROR "precision.csv has ${n} lines, expected 785 (header + 14 configs x 56 rows)")
endif()

# Fields: study,varied,dtype,arithmetic,comparison,quantity, then 9 fields (H..seed), max_abs,
# max_rel, p50_abs, p99_abs, bad_count, ...
set(fields9 "[^,]*,[^,]*,[^,]*,[^,]*,[^,]*,[^,]*,[^,]*,[^,]*,[^,]*")
foreach(study main main_causal fa3_outliers sweep_N sweep_block sweep_logit_scale)
  foreach(dtype fp64 fp32 bf16 fp16)
    foreach(q O LSE)
      set(found FALSE)
      foreach(line IN LISTS lines)
        if(line MATCHES "^${study},[^,]*,${dtype},[^,]*,solution_vs_ref,${q},${fields9},([^,]*),([^,]*),([^,]*),([^,]*),([^,]*),")
          set(found TRUE)
          if(NOT CMAKE_MATCH_5 EQUAL 0)
            message(FATAL_ERROR "${study} ${dtype} ${q}: the solution has ${CMAKE_MATCH_5} NaN/Inf:\n${line}")
          endif()
          if(study STREQUAL "main" AND dtype STREQUAL "fp64")
            if(NOT CMAKE_MATCH_1 LESS 1e-12)
              message(FATAL_ERROR "blockwise fp64 vs one-shot fp64: max abs ${CMAKE_MATCH_1} "
                                  "(${q}) is not below 1e-12: the lab 3 solution is broken")
            endif()
            message(STATUS "blockwise fp64 vs one-shot fp64, ${q}: max abs ${CMAKE_MATCH_1}")
          endif()
        endif()
      endforeach()
      if(NOT found)
        message(FATAL_ERROR "precision.csv has no row ${study} / ${dtype} / solution_vs_ref / ${q}")
      endif()
    endforeach()
  endforeach()
endforeach()
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "precision_report --quick exited with ${rc}")
endif()
message(STATUS "precision_report --quick: ${OUT}/precision.csv has every study and dtype")
