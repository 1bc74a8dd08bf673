#!/usr/bin/env bash
# Runs bertlab's benchmarks side by side with the Python implementations on this machine and
# writes bench/results.md (raw JSON lines in bench/out/). Figures are ratios taken in this run.
#
#   bench/run.sh                 everything (about 10 minutes on 2 cores)
#   REPEATS=5 bench/run.sh       more repetitions of each step configuration (median kept)
#   GOOGLE_BERT=DIR bench/run.sh Google's tokenization.py / run_squad.py /
#                                create_pretraining_data.py (with its TensorFlow stub) in DIR;
#                                default ../shared/reference/google-bert; without it the
#                                figures quoted in bench/reference.json are used
#   bench/run.sh --only ROW[,ROW]  rerun only these rows: gemm, tiny, base, bytes, tokenize,
#                                squad, create-data, data, pipeline, dropout, adversarial,
#                                time-to-accuracy; the other rows of
#                                bench/results.md are kept, marked with the date of their run
#
# Rows say whether they time a whole command (a process started, files written: what a user
# waits for) or a core loop in-process. The `data` row times the data tools end to end with
# /usr/bin/time next to Google's core loop on the same input (about 2 minutes).
set -euo pipefail
only=""
while [[ $# -gt 0 ]]; do
  case $1 in
    --only) only=${2:?--only needs a comma-separated list of rows}; shift 2 ;;
    --only=*) only=${1#--only=}; shift ;;
    *) echo "bench/run.sh: unknown argument '$1'; use --only ROW[,ROW]" >&2; exit 2 ;;
  esac
done
rows="gemm tiny base bytes tokenize squad create-data data pipeline dropout adversarial time-to-accuracy"
for row in ${only//,/ }; do
  if [[ " $rows " != *" $row "* ]]; then
    echo "bench/run.sh: --only: unknown row '$row'; rows are: ${rows// /, }" >&2
    exit 2
  fi
done
# Whether row $1 runs this time.
wanted() { [[ -z $only || ",$only," == *",$1,"* ]]; }
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
bash scripts/build.sh > /dev/null
bin="${BUILD_DIR:-build}/bin/bertlab"
py=/usr/bin/python3  # Debian's, with python3-torch (the libtorch bertlab links)
out=bench/out
rm -rf "$out" && mkdir -p "$out"
echo "${only//,/ }" > "$out/rows"
repeats=${REPEATS:-3}
google=${GOOGLE_BERT:-"$root/../shared/reference/google-bert"}
vocab=tests/data/vocab/bert-base-uncased/vocab.txt

log() { echo "[bench] $*" >&2; }

tiny="--hidden-size 128 --num-hidden-layers 2 --num-attention-heads 2 --intermediate-size 512 --batch 8 --seq 128 --steps 20"
base="--hidden-size 768 --num-hidden-layers 12 --num-attention-heads 12 --intermediate-size 3072 --batch 4 --seq 128 --steps 3"

# One step configuration: "NAME|IMPL|ARGS|THREADS"; each line it prints is tagged with NAME.
step() {
  local name=$1 impl=$2 args=$3 threads=$4
  local line
  if [[ $impl == pytorch ]]; then
    line=$(OPENBLAS_NUM_THREADS=$threads OMP_NUM_THREADS=$threads "$py" bench/python_reference.py $args --threads "$threads")
  else
    line=$("$bin" bench step $args --threads "$threads" 2> /dev/null)
  fi
  echo "{\"config\": \"$name\", \"result\": $line}" >> "$out/steps.jsonl"
}

if wanted gemm; then
  log "gemm peak"
  for t in 1 2; do "$bin" bench gemm --threads $t --size 1024 >> "$out/gemm.jsonl" 2> /dev/null; done
fi

for r in $(seq "$repeats"); do
  wanted tiny || break
  log "tiny BERT steps, round $r of $repeats"
  for t in 1 2; do
    step "tiny" pytorch "$tiny" $t
    step "tiny" bertlab "$tiny" $t
    step "tiny" bertlab "$tiny --sparse-embeddings" $t
  done
  step "tiny" bertlab "$tiny --strategy mirrored --replicas 2" 1
  step "tiny" bertlab "$tiny --strategy sparse_allgather --replicas 2 --sparse-embeddings" 1
done
for r in $(seq $(( (repeats + 1) / 2 ))); do
  wanted base || break
  log "BERT-Base steps, round $r"
  for t in 1 2; do
    step "base" pytorch "$base" $t
    step "base" bertlab "$base" $t
  done
  step "base" bertlab "$base --sparse-embeddings" 1
done

if wanted dropout; then
  log "dropout masks: per_example vs replica, one process each round (tiny BERT, dropout 0.1)"
  for r in $(seq "$repeats"); do
    "$bin" bench step $tiny --threads 1 --dropout-rng both >> "$out/dropout.jsonl" 2> /dev/null
    "$bin" bench step $tiny --threads 1 --strategy mirrored --replicas 2 --dropout-rng both \
      >> "$out/dropout.jsonl" 2> /dev/null
  done
fi

if wanted adversarial; then
  log "adversarial steps: plain, fgm, pgd (3 steps), freelb (3 steps), one process each (tiny BERT)"
  for r in $(seq "$repeats"); do
    "$bin" bench step $tiny --threads 1 >> "$out/adversarial.jsonl" 2> /dev/null
    "$bin" bench step $tiny --threads 1 --adversarial fgm >> "$out/adversarial.jsonl" 2> /dev/null
    "$bin" bench step $tiny --threads 1 --adversarial pgd --adversarial-option steps=3 \
      >> "$out/adversarial.jsonl" 2> /dev/null
    "$bin" bench step $tiny --threads 1 --adversarial freelb --adversarial-option steps=3 \
      >> "$out/adversarial.jsonl" 2> /dev/null
  done
fi

if wanted bytes; then
  log "word-embedding bytes: mirrored vs sparse_allgather (vocab 30522 x 768, batch 32 x 128, 2 replicas)"
  bytes="--hidden-size 768 --num-hidden-layers 1 --num-attention-heads 12 --intermediate-size 3072 --batch 32 --seq 128 --steps 1"
  "$bin" bench step $bytes --strategy mirrored --replicas 2 > "$out/bytes_mirrored.json" 2> /dev/null
  "$bin" bench step $bytes --strategy sparse_allgather --replicas 2 --sparse-embeddings \
    > "$out/bytes_sparse.json" 2> /dev/null
fi

log "tokenization, SQuAD features, create-data"
"$py" - "$out" << 'PY'
import json, sys, zipfile
out = sys.argv[1]
z = zipfile.ZipFile("tests/data/squad/dev-v2.0.json.zip")
name = next(n for n in z.namelist() if n.endswith(".json"))
raw = z.read(name)
open(f"{out}/dev-v2.0.json", "wb").write(raw)
lines = []
for article in json.loads(raw)["data"]:
    for p in article["paragraphs"]:
        lines.append(p["context"])
        lines.extend(q["question"] for q in p["qas"])
open(f"{out}/dev-v2.0.txt", "w", encoding="utf-8").write("\n".join(lines))
PY
have_google=false
if [[ -f "$google/tokenization.py" ]]; then
  log "Google's code from $google"
  have_google=true
else
  log "no Google BERT code at $google: quoting bench/reference.json"
fi
if wanted tokenize; then
  # The fastest of 10 passes: on shared cores most passes lose time to other jobs.
  "$bin" bench tokenize --vocab "$vocab" --input "$out/dev-v2.0.txt" --repeats 10 \
    > "$out/tokenize.json" 2> /dev/null
  if $have_google; then
    "$py" bench/google_reference.py --reference "$google" tokenize --vocab "$vocab" \
      --input "$out/dev-v2.0.txt" > "$out/google_tokenize.json"
  fi
fi
if wanted squad; then
  "$bin" bench squad-features --vocab_file "$vocab" --input tests/data/squad/dev-v2.0.json.zip \
    > "$out/squad_features.json" 2> /dev/null
  if $have_google; then
    "$py" bench/google_reference.py --reference "$google" squad-features --vocab "$vocab" \
      --input "$out/dev-v2.0.json" > "$out/google_squad_features.json"
  fi
fi
if wanted create-data; then
  # The sample text takes about a millisecond: the fastest of 20 runs (Google's: of 3).
  "$bin" bench create-data --input_file experiments/data/pretrain/sample_text.txt \
    --vocab_file "$vocab" --repeat 20 > "$out/create_data.json" 2> /dev/null
  if $have_google; then
    "$py" bench/google_reference.py --reference "$google" create-data --vocab "$vocab" \
      --input experiments/data/pretrain/sample_text.txt > "$out/google_create_data.json"
  fi
fi

if wanted data; then
  # The data tools as a user runs them: the whole process, start-up included, files written.
  # Corpus: the paragraphs of SQuAD v1.1 and v2.0 dev, one document each, five times (12.9 MB);
  # and four times that for how memory and time scale.
  log "data tools end to end (whole process, files written)"
  data=$out/data
  mkdir -p "$data"
  "$py" bench/squad_contexts_text.py --per paragraph --times 5 tests/data/squad/dev-v1.1.json.zip \
    tests/data/squad/dev-v2.0.json.zip "$data/corpus.txt"
  for _ in 1 2 3 4; do cat "$data/corpus.txt"; echo; done > "$data/corpus4.txt"
  # One timed whole process: NAME COMMAND...; a JSON line with its wall time and peak RSS.
  whole() {
    local name=$1
    shift
    rm -f "$data"/out.*
    /usr/bin/time -f '%e %M' -o "$data/time" "$@" > "$data/stdout" 2> "$data/stderr"
    local bytes=0
    for f in "$data"/out.* "$data/stdout"; do
      [[ -f $f ]] && bytes=$((bytes + $(stat -c %s "$f")))
    done
    read -r wall kb < "$data/time"
    echo "{\"name\": \"$name\", \"wall_s\": $wall, \"peak_rss_mb\": $((kb / 1024)), \"output_bytes\": $bytes}" \
      >> "$out/data.jsonl"
  }
  cd_args=(pretrain create-data --vocab_file "$vocab" --dupe_factor 2)
  # Short processes on shared cores: the median of at least 5 runs of each, interleaved.
  for r in $(seq $((repeats > 5 ? repeats : 5))); do
    whole startup "$bin" --version
    whole startup-data "$bin" squad features --help
    whole create-data-tfrecord "$bin" "${cd_args[@]}" --input_file "$data/corpus.txt" \
      --output_file "$data/out.tfrecord"
    whole create-data-jsonl "$bin" "${cd_args[@]}" --input_file "$data/corpus.txt" \
      --output_file "$data/out.jsonl"
    whole squad-features "$bin" squad features --vocab_file "$vocab" --version_2_with_negative \
      --input tests/data/squad/dev-v2.0.json.zip
  done
  whole create-data-tfrecord-4x "$bin" "${cd_args[@]}" --input_file "$data/corpus4.txt" \
    --output_file "$data/out.tfrecord"
  cp "$data/stderr" "$out/create_data_4x.log"  # its instance count and the MB it held
  # The core loops in-process, one thread: reading, instances, and the writers' encoding.
  "$bin" bench create-data --input_file "$data/corpus.txt" --vocab_file "$vocab" --dupe_factor 2 \
    --repeat 2 > "$out/create_data_corpus.json" 2> /dev/null
  if $have_google; then
    # Google's core loop (create_training_instances: reading, tokenizing, instances; writes
    # nothing) once, its whole process's peak RSS beside it.
    /usr/bin/time -f '%M' -o "$data/google_rss" "$py" bench/google_reference.py \
      --reference "$google" create-data --vocab "$vocab" --input "$data/corpus.txt" \
      --dupe-factor 2 --repeat 1 > "$out/google_create_data_corpus.json"
    echo "{\"peak_rss_mb\": $(( $(cat "$data/google_rss") / 1024 ))}" > "$out/google_create_data_rss.json"
    if [[ ! -f $out/google_squad_features.json ]]; then
      "$py" bench/google_reference.py --reference "$google" squad-features --vocab "$vocab" \
        --input "$out/dev-v2.0.json" > "$out/google_squad_features.json"
    fi
  fi
  rm -f "$data"/out.* "$data/stdout" "$data"/corpus*.txt
fi

if wanted time-to-accuracy; then
  # The same tiny BERT, data, hyper-parameters and evaluation schedule (the quickstart's: TREC-6,
  # batch 16, lr 5e-4, 4 epochs, the test set every 100 steps) until the first evaluation at
  # 0.80 accuracy: `bertlab run` with stop_when against bench/time_to_accuracy.py, whole
  # processes (reading and tokenizing included), one thread each, alternating.
  log "time to 0.80 TREC-6 test accuracy: bertlab run vs PyTorch eager (whole processes)"
  tta=$out/tta
  for r in $(seq $(( (repeats + 1) / 2 ))); do
    rm -rf "$tta"
    /usr/bin/time -f '%e' -o "$out/tta_time" "$bin" run experiments/quickstart.toml \
      --variant dense-embeddings --output-dir "$tta" --set train.eval_every_steps=100 \
      --set 'train.stop_when="eval_accuracy >= 0.8"' > /dev/null 2> "$out/tta_bertlab.log"
    "$py" - "$tta/quickstart/dense-embeddings" "$(cat "$out/tta_time")" >> "$out/tta.jsonl" << 'PY'
import json, sys
run, wall = sys.argv[1], float(sys.argv[2])
evals = [l for l in map(json.loads, open(f"{run}/metrics.jsonl")) if "eval_accuracy" in l]
final = json.load(open(f"{run}/eval_results.json"))["eval_accuracy"]
steps = json.load(open(f"{run}/run_summary.json"))["steps"]
print(json.dumps({"impl": "bertlab", "time_to_accuracy_s": wall, "steps": steps,
                  "accuracy": evals[-1]["eval_accuracy"] if evals else final,
                  "reached": any(e["eval_accuracy"] >= 0.8 for e in evals) or final >= 0.8}))
PY
    OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 "$py" bench/time_to_accuracy.py --threads 1 \
      --train_batch_size 16 --eval_every_steps 100 >> "$out/tta.jsonl" 2> "$out/tta_pytorch.log"
  done
fi

wanted pipeline && log "input pipeline: time waiting for batches in metrics.jsonl"
for mode in false true; do
  wanted pipeline || break
  "$bin" run tests/data/experiments/pretrain.toml --variant single --set train.num_train_steps=40 \
    --set train.log_every_steps=10 --set task.streaming=$mode --set train.do_eval=false \
    --output-dir "$out/pipeline-$mode" > /dev/null 2>&1
done

# A partial run keeps the rows it did not rerun from the results it replaces.
"$py" bench/report.py "$out" bench/results.md > "$out/results.md"
mv "$out/results.md" bench/results.md
log "wrote bench/results.md"
cat bench/results.md
