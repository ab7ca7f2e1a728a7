# Sourced by the tests that run a copy of ./course on this repository: another version's (git show
# COMMIT:course > FILE), or one with a planted bug.
#   course_copy SOURCE ROOT DEST   DEST: a copy of SOURCE that works on the repository at ROOT
#   course_plant FILE FROM TO      one substitution in FILE, which must apply (else the test fails:
#                                  a plant that no longer applies would test the unplanted copy)

course_plant() {
  grep -qF "$2" "$1" || { echo "FAILED: '$2' does not occur in $1"; exit 1; }
  python3 -c 'import sys; p, a, b = sys.argv[1:]; t = open(p).read(); open(p, "w").write(t.replace(a, b, 1))' \
    "$1" "$2" "$3"
}

course_copy() {
  cp "$1" "$3" && chmod 755 "$3" || { echo "FAILED: cannot copy $1 to $3"; exit 1; }
  course_plant "$3" 'root=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)' "root=$(printf '%q' "$2")"
}
