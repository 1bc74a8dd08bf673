#!/usr/bin/env python3
"""bertlab's outputs read back by the Python tools they are meant for (issue 29).

Run by scripts/gpu-check.sh on the device machine; each subcommand prints one JSON line
("stage", "ok" and its figures) and exits 1 when the check fails or cannot run:

  logits     a `bertlab export --hf` folder opened by transformers: its logits on MRPC dev
             pairs against the run's own eval_logits.tsv
  tokenize   `bertlab tokenize --ids` against tokenizers' BertWordPieceTokenizer
  events     a variant's events.out.tfevents.* read by TensorBoard's EventAccumulator
  gradcheck  a gradcheck.json summarized as one line (stdlib only)

torch, transformers, tokenizers and tensorboard are imported inside the subcommand that needs
them, so a missing package fails that stage only, with one line saying which.
"""

import argparse
import csv
import json
import math
import os
import subprocess
import sys
import tempfile
import traceback


class Missing(Exception):
    """A Python package the stage needs is not installed."""


class CheckError(Exception):
    """The inputs are not what the stage expects (a missing file, a malformed line)."""


def need(module):
    """Imports `module`, or raises Missing naming it."""
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise Missing(
            f"the Python package '{module.split('.')[0]}' is not installed here ({e}); "
            f"install it or skip this stage"
        ) from None


# The JSON line's stream; main() sends whatever else the libraries print to stderr, so that
# stdout holds the one line.
_result_stream = sys.stdout


def emit(stage, ok, **figures):
    print(json.dumps({"stage": stage, "ok": bool(ok), **figures}), file=_result_stream, flush=True)
    return 0 if ok else 1


def read_glue_tsv(path):
    """Google's DataProcessor._read_tsv: tab-separated, no quoting (quotechar=None)."""
    if not os.path.isfile(path):
        raise CheckError(f"{path}: no such file")
    with open(path, encoding="utf-8", newline="") as f:
        return list(csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE))


def mrpc_pairs(path):
    """MrpcProcessor's examples: a header line, then Quality, #1 ID, #2 ID, #1 String,
    #2 String."""
    rows = read_glue_tsv(path)
    pairs = []
    for number, row in enumerate(rows[1:], start=2):
        if len(row) < 5:
            raise CheckError(f"{path}:{number}: {len(row)} columns, MRPC has 5")
        pairs.append((row[3], row[4]))
    return pairs


def read_logits(path):
    """eval_logits.tsv: a line per evaluation example, its logits tab-separated."""
    if not os.path.isfile(path):
        raise CheckError(f"{path}: no such file")
    out = []
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, start=1):
            line = line.rstrip("\n")
            try:
                out.append([float(v) for v in line.split("\t")])
            except ValueError:
                raise CheckError(f"{path}:{number}: not tab-separated numbers: {line!r}") from None
    widths = {len(row) for row in out}
    if len(widths) > 1:
        raise CheckError(f"{path}: lines of different widths {sorted(widths)}")
    return out


def cmd_logits(a):
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    torch = need("torch")
    transformers = need("transformers")
    config_path = os.path.join(a.hf_dir, "config.json")
    if not os.path.isfile(config_path):
        raise CheckError(f"{config_path}: no such file (is {a.hf_dir} an export?)")
    with open(config_path, encoding="utf-8") as f:
        config = json.load(f)
    pairs = mrpc_pairs(os.path.join(a.data_dir, "dev.tsv"))
    expected = read_logits(a.logits)

    try:  # eager attention: the plain softmax(QK^T)V that bertlab computes
        model = transformers.BertForSequenceClassification.from_pretrained(
            a.hf_dir, attn_implementation="eager"
        )
    except (TypeError, ValueError):
        model = transformers.BertForSequenceClassification.from_pretrained(a.hf_dir)
    model = model.float().eval().to(a.device)
    tokenizer_class = getattr(transformers, "BertTokenizerFast", None) or transformers.BertTokenizer
    tokenizer = tokenizer_class.from_pretrained(a.hf_dir)

    # Pairs that fit in max_seq_length with [CLS] and two [SEP] as they are: no truncation,
    # whose tie rule differs between Google's _truncate_seq_pair and tokenizers' longest_first.
    chosen, too_long = [], []
    for i, (text_a, text_b) in enumerate(pairs):
        if len(chosen) == a.count:
            break
        length = len(tokenizer.tokenize(text_a)) + len(tokenizer.tokenize(text_b)) + 3
        (chosen if length <= a.max_seq_length else too_long).append(i)
    figures = {
        "hf_dir": a.hf_dir,
        "transformers": transformers.__version__,
        "tokenizer": type(tokenizer).__name__,
        "do_lower_case": getattr(tokenizer, "do_lower_case", None),
        "dev_examples": len(pairs),
        "logits_lines": len(expected),
        "compared": len(chosen),
        "skipped_too_long": too_long,
    }
    if len(expected) != len(pairs):
        return emit(a.stage, False, error="eval_logits.tsv: not a line per dev example", **figures)
    if not chosen:
        return emit(a.stage, False, error="no dev pair fits max_seq_length", **figures)

    encoded = tokenizer(
        [pairs[i][0] for i in chosen],
        [pairs[i][1] for i in chosen],
        padding="max_length",
        max_length=a.max_seq_length,
        truncation="longest_first",
        return_tensors="pt",
    ).to(a.device)
    with torch.no_grad():
        got = model(**encoded).logits.float().cpu()
    width = len(expected[0]) if expected else 0
    labels = len(config.get("id2label") or {})
    want = torch.tensor([expected[i] for i in chosen], dtype=torch.float32)
    figures.update(
        {
            "architectures": config.get("architectures"),
            "problem_type": config.get("problem_type"),
            "id2label_size": labels,
            "logits_width": width,
            "hf_logits_width": int(got.shape[1]),
        }
    )
    shapes_ok = got.shape == want.shape and labels == width
    if not shapes_ok:
        return emit(a.stage, False, error="the widths differ", **figures)
    diff = (got - want).abs().max().item()
    agree = int((got.argmax(-1) == want.argmax(-1)).sum().item())
    # How much the logits differ between the pairs: a comparison only discriminates when it is
    # well above the tolerance.
    spread = (want - want.mean(0)).abs().max().item()
    figures.update(
        {
            "max_abs_diff": diff,
            "spread_between_pairs": spread,
            "tolerance": a.tolerance,
            "argmax_agree": agree,
            "first_hf": [round(v, 6) for v in got[0].tolist()],
            "first_bertlab": [round(v, 6) for v in want[0].tolist()],
        }
    )
    if spread < 100 * a.tolerance:
        return emit(a.stage, False, error="the logits barely differ between the pairs: the "
                    "comparison would not discriminate; draw the weights wider", **figures)
    ok = len(chosen) == a.count and math.isfinite(diff) and diff <= a.tolerance
    return emit(a.stage, ok, **figures)


def text_lines(path, limit):
    """The first `limit` lines to tokenize: a GLUE .tsv's sentence columns (#1 and #2 String,
    after the header), else the file's lines split on \\n only (no \\r, \\x85 or U+2028 split,
    as `bertlab tokenize` reads them)."""
    if path.endswith(".tsv"):
        lines = []
        for row in read_glue_tsv(path)[1:]:
            lines.extend(row[3:5])
    else:
        with open(path, "rb") as f:
            data = f.read().decode("utf-8")
        lines = data.split("\n")
        if lines and lines[-1] == "":
            lines.pop()
    return lines[:limit] if limit > 0 else lines


def cmd_tokenize(a):
    tokenizers = need("tokenizers")
    lower = not a.cased
    lines = text_lines(a.text, a.lines)
    with tempfile.NamedTemporaryFile("wb", suffix=".txt", delete=False) as f:
        f.write("".join(line + "\n" for line in lines).encode("utf-8"))
        text_file = f.name
    try:
        command = [a.bertlab, "tokenize", "--vocab", a.vocab, "--ids"]
        if a.cased:
            command.append("--no-lower-case")
        with open(text_file, "rb") as stdin:
            run = subprocess.run(command, stdin=stdin, capture_output=True, check=False)
    finally:
        os.unlink(text_file)
    if run.returncode != 0:
        raise CheckError(
            f"{' '.join(command)} exited with {run.returncode}: "
            f"{run.stderr.decode('utf-8', 'replace').strip()}"
        )
    ours = [
        [int(t) for t in line.split()] for line in run.stdout.decode("utf-8").split("\n")[:-1]
    ]

    theirs_tokenizer = tokenizers.BertWordPieceTokenizer(a.vocab, lowercase=lower)
    # Google's WordpieceTokenizer makes [UNK] of a word over 200 characters; tokenizers' WordPiece
    # defaults to 100.
    max_chars = 100
    try:
        theirs_tokenizer._tokenizer.model = tokenizers.models.WordPiece.from_file(
            a.vocab, unk_token="[UNK]", max_input_chars_per_word=200
        )
        max_chars = 200
    except Exception as e:  # an older tokenizers: keep its default, and say so
        print(f"[interop] WordPiece max_input_chars_per_word stays 100: {e}", file=sys.stderr)
    theirs = [e.ids for e in theirs_tokenizer.encode_batch(lines, add_special_tokens=False)]

    with open(a.vocab, encoding="utf-8") as f:
        vocab = [line.rstrip("\n") for line in f]

    def tokens(ids):
        return [vocab[i] if 0 <= i < len(vocab) else str(i) for i in ids]

    differing = [i for i in range(min(len(ours), len(theirs))) if ours[i] != theirs[i]]
    figures = {
        "text": a.text,
        "lower_case": lower,
        "tokenizers": tokenizers.__version__,
        "max_input_chars_per_word": max_chars,
        "lines": len(lines),
        "bertlab_lines": len(ours),
        "tokens": sum(len(ids) for ids in ours),
        "lines_differing": len(differing),
    }
    if differing:
        i = differing[0]
        figures["first_difference"] = {
            "line": i + 1,
            "text": lines[i][:200],
            "bertlab": tokens(ours[i])[:60],
            "tokenizers": tokens(theirs[i])[:60],
        }
    return emit(a.stage, len(ours) == len(lines) and not differing, **figures)


TRAIN_TAGS = ("loss", "learning_rate", "grad_norm", "throughput")


def read_metrics(path):
    """metrics.jsonl's loss per step, when the file is there."""
    if not os.path.isfile(path):
        return {}
    out = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            j = json.loads(line)
            if isinstance(j.get("loss"), (int, float)):
                out[int(j["step"])] = float(j["loss"])
    return out


def cmd_events(a):
    event_accumulator = need("tensorboard.backend.event_processing.event_accumulator")
    files = [n for n in os.listdir(a.run_dir) if n.startswith("events.out.tfevents.")]
    if not files:
        raise CheckError(f"{a.run_dir}: no events.out.tfevents.* file")
    acc = event_accumulator.EventAccumulator(
        a.run_dir, size_guidance={event_accumulator.SCALARS: 0}
    )
    acc.Reload()
    tags = sorted(acc.Tags().get("scalars", []))
    steps = {tag: [e.step for e in acc.Scalars(tag)] for tag in tags}
    expected = list(range(1, a.expect_steps + 1))
    wrong = {
        tag: (steps[tag][:5] + ["..."] + steps[tag][-3:] if len(steps[tag]) > 8 else steps[tag])
        for tag in TRAIN_TAGS
        if tag in steps and steps[tag] != expected
    }
    missing = [tag for tag in TRAIN_TAGS if tag not in steps]
    eval_tags = {tag: steps[tag] for tag in tags if tag.startswith("eval/")}
    figures = {
        "files": files,
        "tags": tags,
        "step_counts": {tag: len(s) for tag, s in steps.items()},
        "missing_tags": missing,
        "wrong_steps": wrong,
        "eval_steps": eval_tags,
    }
    # The event file is written from metrics.jsonl: the same losses, as float32.
    logged = read_metrics(os.path.join(a.run_dir, "metrics.jsonl"))
    loss_diff = None
    if logged and "loss" in steps:
        diffs = [
            abs(e.value - logged[e.step]) / max(abs(logged[e.step]), 1e-30)
            for e in acc.Scalars("loss")
            if e.step in logged
        ]
        loss_diff = max(diffs) if diffs else None
        figures["loss_max_rel_diff_vs_metrics_jsonl"] = loss_diff
    ok = (
        not missing
        and not wrong
        and all(s == [a.expect_steps] for s in eval_tags.values())
        and (loss_diff is None or loss_diff <= 1e-6)
    )
    return emit(a.stage, ok, **figures)


def cmd_gradcheck(a):
    if not os.path.isfile(a.json):
        raise CheckError(f"{a.json}: no such file (did gradcheck run?)")
    with open(a.json, encoding="utf-8") as f:
        report = json.load(f)
    variants = {
        name: {"result": v.get("result"), "match": v.get("match"), "params": v.get("params")}
        for name, v in report.get("variants", {}).items()
    }
    figures = {"experiment": report.get("experiment"), "variants": variants}
    if a.backend:
        figures["backend"] = a.backend
    ok = bool(variants) and all(v["result"] == "PASS" for v in variants.values())
    return emit(a.stage, ok, **figures)


def parser():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)

    s = sub.add_parser("logits", help="transformers on an exported folder against eval_logits.tsv")
    s.add_argument("--hf-dir", required=True, help="a `bertlab export --hf` folder")
    s.add_argument("--data-dir", required=True, help="the run's MRPC folder (its dev.tsv)")
    s.add_argument("--logits", required=True, help="the run's VARIANT/eval_logits.tsv")
    s.add_argument("--max-seq-length", type=int, required=True, help="the run's max_seq_length")
    s.add_argument("--count", type=int, default=8, help="dev pairs compared (default 8)")
    s.add_argument("--tolerance", type=float, default=1e-4, help="max abs difference (1e-4)")
    s.add_argument("--device", default="cpu", help="where transformers runs (default cpu, fp32)")
    s.set_defaults(run=cmd_logits)

    s = sub.add_parser("tokenize", help="`bertlab tokenize --ids` against BertWordPieceTokenizer")
    s.add_argument("--vocab", required=True, help="vocab.txt")
    s.add_argument("--text", required=True,
                   help="lines to tokenize; a .tsv gives its sentence columns (GLUE MRPC)")
    s.add_argument("--bertlab", required=True, help="the bertlab executable")
    case = s.add_mutually_exclusive_group()
    case.add_argument("--lower", action="store_true", help="lower-case, strip accents (default)")
    case.add_argument("--cased", action="store_true", help="keep case and accents")
    s.add_argument("--lines", type=int, default=200, help="lines compared (default 200; 0: all)")
    s.set_defaults(run=cmd_tokenize)

    s = sub.add_parser("events", help="a variant's TensorBoard events through EventAccumulator")
    s.add_argument("--run-dir", required=True, help="RUN_DIR/EXPERIMENT/VARIANT")
    s.add_argument("--expect-steps", type=int, required=True,
                   help="num_train_steps (run with log_every_steps = 1)")
    s.set_defaults(run=cmd_events)

    s = sub.add_parser("gradcheck", help="a gradcheck.json as one line: every variant PASS")
    s.add_argument("--json", required=True, help="OUTPUT_DIR/EXPERIMENT/gradcheck.json")
    s.add_argument("--backend", help="the collectives' backend, for the record")
    s.set_defaults(run=cmd_gradcheck)

    for s in sub.choices.values():
        s.add_argument("--stage", help="the stage's name in the JSON line (default: the command)")
    return p


def main():
    a = parser().parse_args()
    a.stage = a.stage or a.command
    sys.stdout = sys.stderr
    try:
        return a.run(a)
    except (Missing, CheckError) as e:
        return emit(a.stage, False, error=str(e))
    except Exception as e:  # anything else: the traceback to stderr, the line to stdout
        traceback.print_exc()
        return emit(a.stage, False, error=f"{type(e).__name__}: {e}")


if __name__ == "__main__":
    sys.exit(main())
