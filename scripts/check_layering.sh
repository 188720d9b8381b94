#!/usr/bin/env bash
# Checks the layering of q3c: a layer's sources include only the layers to its
# left in the data flow, and runtime/ (which ships without MLIR or LLVM)
# includes no compiler layer and no MLIR/LLVM header.
#   frontend -> ir -> passes -> backends ; runtime stands alone
set -u
root=${1:-$(dirname "$0")/..}
status=0

# forbid LAYER PATTERN...: no source file of LAYER may include a path matching PATTERN.
forbid() {
  local layer=$1
  shift
  for pattern in "$@"; do
    if hits=$(grep -rnE "^\s*#\s*include\s*[<\"]($pattern)" "$root/$layer" --include='*.h' --include='*.cpp' 2>/dev/null); then
      echo "layering violation: $layer/ includes $pattern"
      echo "$hits"
      status=1
    fi
  done
}

forbid runtime 'frontend/' 'ir/' 'passes/' 'backends/' 'mlir/' 'llvm/' 'llvm-c/'
forbid frontend 'ir/' 'passes/' 'backends/' 'runtime/' 'mlir/' 'llvm/'
forbid ir 'passes/' 'backends/' 'runtime/'
forbid passes 'backends/' 'runtime/'
[ $status -eq 0 ] && echo "layering: ok"
exit $status
