#!/usr/bin/env bash
# Set-up, build, and run the default experiment on the bundled MRPC subset:
# `scripts/quickstart.sh`. Results go to runs/quickstart/.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
# Only what the experiment needs: bertlab and its plugins (scripts/test.sh adds the tests and
# their packages).
bash scripts/setup-deps.sh --run
BERTLAB_BUILD_TESTS=OFF bash scripts/build.sh
build_dir=${BUILD_DIR:-build}
"$build_dir/bin/bertlab" run experiments/quickstart.toml --output-dir runs "$@"
echo
echo "The comparison table is in $root/runs/quickstart/comparison.md (and comparison.csv; plots and"
echo "everything together in $root/runs/quickstart/report.html):"
echo
cat runs/quickstart/comparison.md
