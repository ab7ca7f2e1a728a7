# Runs PROGRAM --out OUT --quick and prints what it said and its exit status, for a test that
# expects a benchmark on a machine without a GPU to say so and exit with status 2 (CTest's
# PASS_REGULAR_EXPRESSION sees only the output, not the status).
execute_process(COMMAND ${PROGRAM} --out ${OUT} --quick RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err)
message("${out}${err}; exit status ${status}")
