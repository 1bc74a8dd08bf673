#!/usr/bin/env bash
# The installable SDK end to end (docs/plugins.md): installs the build into a temporary prefix,
# builds examples/strategy-plugin against the installed package alone (find_package(bertlab)),
# and runs its experiment with the installed `bertlab`, which must find its own plugins, and the
# example's through --plugin-dir. Run by ctest as SdkInstall.OutOfTreePluginAgainstTheInstalledPackage.
#   BUILD_DIR   the built tree to install (default: build); scripts/build.sh first
#   KEEP_TMP=1  keep the temporary folder (printed) for a look at what was installed
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build_dir=${BUILD_DIR:-build}
case "$build_dir" in /*) ;; *) build_dir="$root/$build_dir" ;; esac
if [[ ! -f "$build_dir/CMakeCache.txt" ]]; then
  echo "[test-install] $build_dir is not a configured build; run scripts/build.sh first" >&2
  exit 1
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/bertlab-install.XXXXXX")
if [[ "${KEEP_TMP:-0}" == 1 ]]; then
  echo "[test-install] keeping $tmp"
else
  trap 'rm -rf "$tmp"' EXIT
fi
prefix="$tmp/prefix"
fail() {
  echo "[test-install] FAILED: $*" >&2
  exit 1
}
# Nothing may come from the build tree or the environment: only the installed files.
unset LD_LIBRARY_PATH BERTLAB_PLUGIN_PATH

echo "[test-install] cmake --install $build_dir --prefix $prefix"
cmake --install "$build_dir" --prefix "$prefix" >"$tmp/install.log" || {
  cat "$tmp/install.log" >&2
  fail "cmake --install"
}
for f in bin/bertlab bin/bertlab-host lib/libbertlab.so include/bertlab/plugin.h include/bertlab/api_version.h \
  include/bertlab/strategy.h lib/bertlab/plugins/libbertlab_mirrored.so \
  lib/cmake/bertlab/bertlabConfig.cmake lib/cmake/bertlab/bertlabConfigVersion.cmake \
  lib/cmake/bertlab/bertlabTargets.cmake lib/cmake/bertlab/BertlabPlugin.cmake; do
  [[ -e "$prefix/$f" ]] || fail "the install has no $f"
done
# Tests' deliberately broken plugins stay in the build tree.
if compgen -G "$prefix/lib/bertlab/plugins/libbertlab_test_*" >/dev/null; then
  fail "test plugins were installed: $(ls "$prefix/lib/bertlab/plugins")"
fi

# The installed host runs on its RPATH alone and loads the installed libbertlab and plugins;
# bertlab itself loads no libtorch and runs the data commands on its own.
libbertlab=$(ldd "$prefix/bin/bertlab-host" | awk '$1 == "libbertlab.so" { print $3 }')
[[ -n "$libbertlab" && $(realpath "$libbertlab") == $(realpath "$prefix/lib/libbertlab.so") ]] ||
  fail "installed bertlab-host resolves libbertlab.so to '$libbertlab', not $prefix/lib/libbertlab.so"
if ldd "$prefix/bin/bertlab" | grep -q "libtorch"; then
  fail "installed bertlab links libtorch: $(ldd "$prefix/bin/bertlab" | grep libtorch)"
fi
"$prefix/bin/bertlab" pretrain create-data --input_file "$root/experiments/data/pretrain/sample_text.txt" \
  --vocab_file "$root/tests/data/vocab/bert-base-uncased/vocab.txt" --dupe_factor 1 \
  --output_file "$tmp/sample.tfrecord" 2>"$tmp/create-data.log" ||
  fail "installed bertlab pretrain create-data: $(cat "$tmp/create-data.log")"
"$prefix/bin/bertlab" plugins >"$tmp/plugins.txt" || fail "installed bertlab plugins"
for name in classifier mirrored adam_weight_decay; do
  grep -q "$prefix/lib/bertlab/plugins/libbertlab_$name.so" "$tmp/plugins.txt" ||
    fail "installed bertlab did not load $name from $prefix/lib/bertlab/plugins:
$(cat "$tmp/plugins.txt")"
done

# The example, configured from the installed package only (ccache, as scripts/build.sh uses it).
generator=()
if command -v ninja >/dev/null 2>&1; then generator=(-G Ninja); fi
launcher=()
if command -v ccache >/dev/null 2>&1; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  # The prefix's paths hashed relative to the temporary folder: the next run hits the cache.
  export CCACHE_BASEDIR="$tmp"
  export CCACHE_NOHASHDIR=1
fi
example="$root/examples/strategy-plugin"
echo "[test-install] building $example against $prefix"
cmake -S "$example" -B "$tmp/topk-build" "${generator[@]}" "${launcher[@]}" \
  -DCMAKE_PREFIX_PATH="$prefix" >"$tmp/configure.log" 2>&1 || {
  cat "$tmp/configure.log" >&2
  fail "configuring the example against the installed package"
}
grep -q "bertlab_DIR:PATH=$prefix/lib/cmake/bertlab" "$tmp/topk-build/CMakeCache.txt" ||
  fail "the example found bertlab elsewhere: $(grep bertlab_DIR "$tmp/topk-build/CMakeCache.txt")"
cmake --build "$tmp/topk-build" >"$tmp/build.log" 2>&1 || {
  cat "$tmp/build.log" >&2
  fail "building the example"
}
[[ -f "$tmp/topk-build/libbertlab_topk.so" ]] || fail "the example built no libbertlab_topk.so"

"$prefix/bin/bertlab" plugins --describe topk --plugin-dir "$tmp/topk-build" >"$tmp/describe.txt" ||
  fail "bertlab plugins --describe topk"
grep -q "ratio" "$tmp/describe.txt" || fail "topk's options are not described: $(cat "$tmp/describe.txt")"
grep -q "error_feedback_conserves" "$tmp/describe.txt" ||
  fail "topk's contract is not described: $(cat "$tmp/describe.txt")"

echo "[test-install] bertlab run topk.toml --plugin-dir $tmp/topk-build"
"$prefix/bin/bertlab" run "$example/topk.toml" --plugin-dir "$tmp/topk-build" \
  --output-dir "$tmp/runs" >"$tmp/run.log" 2>&1 || {
  cat "$tmp/run.log" >&2
  fail "bertlab run topk.toml"
}
out="$tmp/runs/topk-vs-mirrored"
variants=$(awk '/^\[\[variant\]\]/ { v = 1; next } v && /^name = / { gsub(/^name = "|".*$/, ""); print; v = 0 }' \
  "$example/topk.toml")
[[ $(wc -w <<<"$variants") -ge 2 ]] || fail "topk.toml names fewer than two variants: $variants"
for v in $variants; do
  [[ -s "$out/$v/metrics.jsonl" && -s "$out/$v/eval_results.json" ]] ||
    fail "variant $v left no metrics.jsonl and eval_results.json in $out/$v"
  grep -q "$v" "$out/comparison.md" || fail "comparison.md has no row for $v"
done
grep -q "topk 0.1.0 from $tmp/topk-build/libbertlab_topk.so" "$tmp/run.log" ||
  fail "the run log does not show the topk plugin loaded from $tmp/topk-build:
$(cat "$tmp/run.log")"
# Sending every entry is mirrored's mean: 2 ranks sum the same two values in either order.
diff=$(awk -F, '$1 == "topk-100pct-2" { print $NF }' "$out/comparison.csv")
awk -v d="$diff" 'BEGIN { exit !(d != "" && d + 0 <= 1e-6) }' ||
  fail "topk with ratio 1 ended $diff from mirrored (max parameter difference), not within 1e-6"
diff=$(awk -F, '$1 == "topk-10pct-2" { print $NF }' "$out/comparison.csv")
awk -v d="$diff" 'BEGIN { exit !(d + 0 > 0) }' || fail "topk with ratio 0.1 ended where mirrored did"
# A sparsified rank sends (index, value) pairs only: 10% of mirrored's entries at 12 bytes each.
last() { tail -n 1 "$out/$1/metrics.jsonl" | sed -n "s/.*\"$2\":\([0-9.e+]*\).*/\1/p"; }
dense=$(last mirrored-2 comm_dense_bytes)
sparse=$(last topk-10pct-2 comm_sparse_bytes)
awk -v d="$dense" -v s="$sparse" 'BEGIN { exit !(d > 0 && s > 0.25 * d && s < 0.35 * d) }' ||
  fail "topk 10% sent $sparse bytes per step against mirrored's $dense, not about 30%"
# gradcheck checks the out-of-tree plugin against the contract it declares: error feedback
# conserved for every top-k row (exact_until(0) + error_feedback_conserves), 2 steps.
"$prefix/bin/bertlab" gradcheck "$example/topk.toml" --plugin-dir "$tmp/topk-build" --steps 2 \
  --output-dir "$tmp/gradcheck" >"$tmp/gradcheck.log" 2>&1 || {
  cat "$tmp/gradcheck.log" >&2
  fail "bertlab gradcheck topk.toml: a variant broke its contract"
}
grep -q '^| topk-10pct-2 | contract | exact_until(step 0) + error_feedback_conserves | error feedback [0-9.e+-]* |.*| PASS |$' \
  "$tmp/gradcheck.log" || fail "gradcheck's row for topk-10pct-2 does not show its contract kept:
$(grep '^|' "$tmp/gradcheck.log")"
echo "[test-install] ok: installed SDK, example plugin built against it, variants ran: ${variants//$'\n'/ }"
