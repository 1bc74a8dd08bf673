#!/usr/bin/env bash
# clang-format (Google base, 100 columns) and clang-tidy over the project's own sources.
# Usage: scripts/lint.sh [--fix]    (needs a configured build for clang-tidy's compile database)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
build_dir=${BUILD_DIR:-build}
mapfile -t sources < <(git ls-files '*.cpp' '*.h')

if [[ "${1:-}" == "--fix" ]]; then
  clang-format -i "${sources[@]}"
else
  clang-format --dry-run --Werror "${sources[@]}"
  echo "[lint] clang-format: ${#sources[@]} files formatted"
fi

# The CUDA-only sources, which this CPU build does not compile, for syntax.
if [[ "${1:-}" != "--fix" ]]; then bash scripts/check-cuda.sh; fi

if [[ "${BERTLAB_SKIP_TIDY:-0}" == 1 ]]; then exit 0; fi
if [[ ! -f "$build_dir/compile_commands.json" ]]; then
  echo "[lint] no $build_dir/compile_commands.json; run scripts/build.sh first" >&2
  exit 1
fi
# examples/ builds against the installed SDK (scripts/test-install.sh), outside this database.
mapfile -t units < <(git ls-files '*.cpp' | grep -v -e '^tests/plugins/' -e '^examples/')
printf '%s\n' "${units[@]}" |
  xargs -P "${JOBS:-$(nproc)}" -n 4 clang-tidy -p "$build_dir" --quiet 2> >(grep -v "warnings generated" >&2)
echo "[lint] clang-tidy: ${#units[@]} translation units clean"
