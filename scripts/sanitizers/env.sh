# Sourced by scripts/test.sh --sanitize=... and scripts/fuzz.sh: `source env.sh SANITIZERS`.
# Sets the build (Clang, its own folder) and the runtime options of the sanitizers, whose
# suppressions name only libtorch's own code (it is not built with the sanitizers).
san_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
case "$1" in
  address,undefined | undefined,address)
    # One sanitized tree serves the suite and the fuzz targets (BERTLAB_FUZZ implies ASan+UBSan).
    export BUILD_DIR=${BUILD_DIR:-build-asan}
    export CMAKE_ARGS="-DCMAKE_CXX_COMPILER=clang++-14 -DBERTLAB_FUZZ=ON"
    ;;
  thread)
    export BUILD_DIR=${BUILD_DIR:-build-tsan}
    export CMAKE_ARGS="-DCMAKE_CXX_COMPILER=clang++-14 -DBERTLAB_SANITIZE=thread"
    ;;
  *)
    echo "unknown sanitizers '$1': use address,undefined or thread" >&2
    return 2
    ;;
esac
export BUILD_TYPE=RelWithDebInfo
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:detect_odr_violation=0:strict_string_checks=1:check_initialization_order=1"
export LSAN_OPTIONS="suppressions=$san_dir/lsan.supp:print_suppressions=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:suppressions=$san_dir/ubsan.supp"
export TSAN_OPTIONS="suppressions=$san_dir/tsan.supp:halt_on_error=1:second_deadlock_stack=1:report_signal_unsafe=0"
