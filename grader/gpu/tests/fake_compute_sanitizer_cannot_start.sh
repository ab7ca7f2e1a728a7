#!/bin/sh
# Stands in for a compute-sanitizer that cannot start the program it is to check (as it could not
# on GPU machines where the lab process's user could not reach the trusted build): it prints what
# compute-sanitizer prints then, and exits without running the program.
echo "========= COMPUTE-SANITIZER"
echo "========= Error launching target app."
exit 255
