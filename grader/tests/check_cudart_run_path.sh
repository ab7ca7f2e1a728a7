#!/usr/bin/env bash
# A program that needs the CUDA runtime finds it where a lab process's sandbox can: one folder of
# its run path is a real path (no symbolic link on the way) and holds the libcudart it needs.
# bubblewrap's view binds /usr but not /etc, and NVIDIA's Debian and Ubuntu packages reach the
# toolkit through /usr/local/cuda -> /etc/alternatives/cuda: a run path through that link, or the
# loader's cache, which names it, leaves the lab unable to start there.
#
# Usage: check_cudart_run_path.sh PROGRAM
set -uo pipefail
program=$1
dynamic=$(readelf -d "$program") || { echo "FAILED: readelf cannot read $program"; exit 1; }
soname=$(sed -n 's/.*(NEEDED).*\[\(libcudart\.so[^]]*\)\].*/\1/p' <<< "$dynamic")
[ -n "$soname" ] || { echo "FAILED: $program does not load libcudart"; exit 1; }
run_path=$(sed -n 's/.*Library \(runpath\|rpath\): \[\(.*\)\]/\2/p' <<< "$dynamic" | paste -sd:)
IFS=: read -ra folders <<< "$run_path"
linked=()  # the folders that hold it through a symbolic link
for folder in "${folders[@]}"; do
  [ -e "$folder/$soname" ] || continue
  if [ "$(realpath "$folder")" = "$folder" ]; then
    echo "ok: $program finds $soname in $folder"
    exit 0
  fi
  linked+=("$folder")
done
if [ ${#linked[@]} -gt 0 ]; then
  echo "FAILED: $program's run path ($run_path) reaches $soname only through a symbolic link: ${linked[*]}"
else
  echo "FAILED: no folder of $program's run path (${run_path:-none}) holds $soname"
fi
exit 1
