#!/usr/bin/env bash
# Set-up, build, and run the default experiment on the bundled MRPC subset:
# `scripts/quickstart.sh`. Results go to runs/quickstart/.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
bash scripts/setup-deps.sh
bash scripts/build.sh
build_dir=${BUILD_DIR:-build}
"$build_dir/bin/bertlab" run experiments/quickstart.toml --output-dir runs "$@"
echo
echo "The comparison table is in $root/runs/quickstart/comparison.md (and comparison.csv; plots and"
echo "everything together in $root/runs/quickstart/report.html):"
echo
cat runs/quickstart/comparison.md
