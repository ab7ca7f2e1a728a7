# course_refuse_repeated_keywords(<what> "<KW1;KW2;...>" <the caller's arguments>...)
# cmake_parse_arguments keeps the last of a one-value keyword given twice, silently: a planted
# bug declared with two REPLACE lines would plant only the second. This stops the configure step
# instead, naming <what> and the keyword. (A FIND or REPLACE text holding ';' reaches here cut at
# each ';'; a piece of C++ that is a keyword's bare name would be counted, and none is.)
function(course_refuse_repeated_keywords what keywords)
  set(seen "")
  foreach(arg IN LISTS ARGN)
    if(arg IN_LIST keywords)
      if(arg IN_LIST seen)
        message(FATAL_ERROR "${what}: ${arg} is given twice (cmake_parse_arguments would keep the last only)")
      endif()
      list(APPEND seen "${arg}")
    endif()
  endforeach()
endfunction()
