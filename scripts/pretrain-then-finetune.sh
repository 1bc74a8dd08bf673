#!/usr/bin/env bash
# A study in two stages (experiments/pretrain-then-finetune.toml): the masked-LM instances of
# TREC's unlabelled training questions, then `bertlab run` of the study, two runs at a time.
# Results go to runs/pretrain-then-finetune/ (comparison.md: the paired table of `pretrained`
# against `scratch`). Arguments are passed to `bertlab run` (e.g. --rerun).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
build_dir=${BUILD_DIR:-build}
# bertlab and every plugin (the quickstart builds three); nothing when they are up to date. A
# build folder with the tests keeps them.
tests=OFF
if grep -qx "BERTLAB_BUILD_TESTS:BOOL=ON" "$build_dir/CMakeCache.txt" 2>/dev/null; then tests=ON; fi
BERTLAB_BUILD_TESTS=$tests bash scripts/build.sh --target bertlab_launcher bertlab_cli bertlab_plugins \
  >/dev/null
mkdir -p runs/data
# Stage 1's data: 10 passes over the questions, each with other masks (--dupe_factor), packed
# into 32-token instances without next-sentence pairs; the same instances every time.
"$build_dir/bin/bertlab" pretrain create-data \
  --input_file experiments/data/pretrain/trec_train_questions.txt \
  --vocab_file experiments/data/vocab.txt --next_sentence=false --max_seq_length 32 \
  --max_predictions_per_seq 5 --dupe_factor 10 --output_file runs/data/trec-mlm.jsonl
"$build_dir/bin/bertlab" run experiments/pretrain-then-finetune.toml --output-dir runs --jobs 2 "$@"
