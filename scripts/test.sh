#!/usr/bin/env bash
# Set-up, build, then every test: `scripts/test.sh`.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
bash scripts/setup-deps.sh
bash scripts/build.sh
# clang-format always; clang-tidy (minutes per file on 2 cores) with BERTLAB_TIDY=1.
BERTLAB_SKIP_TIDY=$((1 - ${BERTLAB_TIDY:-0})) bash scripts/lint.sh
build_dir=${BUILD_DIR:-build}
ctest --test-dir "$build_dir" --output-on-failure --timeout 900 -j "${TEST_JOBS:-2}"
