#!/usr/bin/env bash
# Configures and builds bertlab (Release) into ${BUILD_DIR:-build}, with the tests unless
# BERTLAB_BUILD_TESTS=OFF; arguments go to `cmake --build` (e.g. --target NAME).
#   $BUILD_DIR/bin/bertlab                   the executable (the data commands without libtorch)
#   $BUILD_DIR/bin/bertlab-host              every other command; bertlab hands it the line
#   $BUILD_DIR/lib/bertlab/plugins/*.so      the in-tree plugins, found relative to them
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=${BUILD_DIR:-build}
case "$build_dir" in /*) ;; *) build_dir="$root/$build_dir" ;; esac

generator=()
if command -v ninja >/dev/null 2>&1; then generator=(-G Ninja); fi
launcher=()
if command -v ccache >/dev/null 2>&1; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  # Paths under the checkout are hashed relative to it, so a fresh clone elsewhere (CI) hits
  # the cache of an earlier build.
  export CCACHE_BASEDIR="$root"
  export CCACHE_NOHASHDIR=1
fi

# BERTLAB_BUILD_TESTS=OFF builds bertlab and its plugins only (scripts/quickstart.sh); a build
# folder configured that way is configured again, with the tests, by the next build that wants them.
tests=${BERTLAB_BUILD_TESTS:-ON}
cache="$build_dir/CMakeCache.txt"
if [[ ! -f "$cache" ]] || ! grep -qx "BERTLAB_BUILD_TESTS:BOOL=$tests" "$cache"; then
  cmake -S "$root" -B "$build_dir" "${generator[@]}" "${launcher[@]}" \
    -DCMAKE_BUILD_TYPE="${BUILD_TYPE:-Release}" -DBERTLAB_BUILD_TESTS="$tests" ${CMAKE_ARGS:-}
fi
cmake --build "$build_dir" --parallel "${JOBS:-$(nproc)}" "$@"
echo "[build] bertlab built: $build_dir/bin/bertlab"
