#!/usr/bin/env bash
# Set-up, build, and the default experiment: a tiny BERT learns TREC-6 question classification
# from scratch in two variants (dense and sparse word-embedding gradients), then `bertlab
# gradcheck` proves the two give the same update. `scripts/quickstart.sh`; results go to
# runs/quickstart/ and runs/gradcheck/quickstart/.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
# Only what the experiment needs: bertlab and the three plugins it names (scripts/build.sh
# builds the others; scripts/test.sh adds the tests and their packages).
bash scripts/setup-deps.sh --run
build_dir=${BUILD_DIR:-build}
# A build folder with the tests keeps them.
tests=OFF
if grep -qx "BERTLAB_BUILD_TESTS:BOOL=ON" "$build_dir/CMakeCache.txt" 2>/dev/null; then tests=ON; fi
BERTLAB_BUILD_TESTS=$tests bash scripts/build.sh --target bertlab_launcher bertlab_cli classifier single \
  adam_weight_decay
# The two variants at the same time, a process and a core each (one thread each is fastest).
"$build_dir/bin/bertlab" run experiments/quickstart.toml --output-dir runs --jobs 2 "$@"
# Their first 3 steps side by side: gradients and parameters against the dense reference.
"$build_dir/bin/bertlab" gradcheck experiments/quickstart.toml --steps 3 --output-dir runs/gradcheck \
  >runs/gradcheck.log 2>&1 || {
  cat runs/gradcheck.log >&2
  exit 1
}
echo
echo "What the two variants learned, against the floor of always answering the most frequent"
echo "training label ($root/runs/quickstart/comparison.md; plots and all in report.html):"
echo
sed -n '/^| variant/,/^$/p' runs/quickstart/comparison.md
echo "Their updates are the same: the sparse gradient's first 3 steps against the dense one's"
echo "($root/runs/gradcheck/quickstart/gradcheck.md; docs/strategy-contracts.md):"
echo
sed -n '/^| variant/,/^$/p' runs/gradcheck/quickstart/gradcheck.md
