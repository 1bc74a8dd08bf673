#!/usr/bin/python3
"""Time to accuracy on TREC-6, the reference side, written in plain PyTorch eager.

The whole process is timed: reading the TREC question files, tokenizing them (a BERT uncased
tokenizer written here: basic tokenization, then greedy longest-match-first WordPiece), training
a tiny BERT from random initialization (--bert_config, by default hidden 128, 2 layers, 2 heads)
with Google's run_classifier head (pooler, dropout 0.1, output layer, softmax cross-entropy), and
evaluating on the 500 test questions every --eval_every_steps steps and at the last step. The
process stops as soon as the test accuracy reaches --target_accuracy, or at the end of training.
Prints one JSON line; progress goes to stderr. Run with Debian's python3-torch (the same libtorch
1.13 build bertlab links):

    /usr/bin/python3 bench/time_to_accuracy.py --threads 1

The model and the optimizer are bench/python_reference.py's (Google's architecture, Google's
AdamWeightDecay as PyTorch ops, gradients clipped to global norm 1.0). The rest matches
experiments/trec.toml: the coarse labels in bertlab's (Hugging Face's `trec`) order, [CLS]
question [SEP] truncated to max_seq_length 32, batch 32 from a stream of epochs each shuffled by
a generator seeded with --seed (epochs roll over, as bertlab's batch order), Google's schedule
(linear warmup over warmup_proportion of the steps, linear decay from step 0 to
int(examples / batch * epochs)), eval batch 64. Invalid UTF-8 bytes (line 66 of
train_5500.label) are dropped, as Google's convert_to_unicode does.
"""

import time

START = time.monotonic()  # before importing torch: the whole process is timed

import argparse
import json
import os
import sys
import types
import unicodedata

import torch
from torch import nn

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import python_reference  # noqa: E402

DATA = os.path.join(HERE, "..", "experiments", "data")
LABELS = ["ABBR", "ENTY", "DESC", "HUM", "LOC", "NUM"]  # plugins/tasks/classifier/trec.cpp
CJK_RANGES = [(0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F),
              (0x2B740, 0x2B81F), (0x2B820, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F)]
MAX_WORD_CHARS = 200  # Google's max_input_chars_per_word, and bertlab's


# ---- Tokenizer ---------------------------------------------------------------------------------

def is_whitespace(ch):
    return ch in " \t\n\r" or unicodedata.category(ch) == "Zs"


def is_control(ch):
    if ch in "\t\n\r":
        return False
    return unicodedata.category(ch).startswith("C")


def is_punctuation(ch):
    cp = ord(ch)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(ch).startswith("P")


def is_cjk(ch):
    cp = ord(ch)
    return any(low <= cp <= high for low, high in CJK_RANGES)


def clean_text(text):
    """Drops NUL, U+FFFD and control characters; every whitespace character becomes a space."""
    out = []
    for ch in text:
        if ord(ch) in (0, 0xFFFD) or is_control(ch):
            continue
        out.append(" " if is_whitespace(ch) else ch)
    return "".join(out)


def space_cjk(text):
    """Puts spaces around each CJK character, so that each is a word of its own."""
    return "".join(" " + ch + " " if is_cjk(ch) else ch for ch in text)


def strip_accents(word):
    return "".join(ch for ch in unicodedata.normalize("NFD", word)
                   if unicodedata.category(ch) != "Mn")


def split_punctuation(word):
    """Each punctuation character is a piece of its own; the runs between them are pieces."""
    pieces = []
    current = ""
    for ch in word:
        if is_punctuation(ch):
            if current:
                pieces.append(current)
                current = ""
            pieces.append(ch)
        else:
            current += ch
    if current:
        pieces.append(current)
    return pieces


def basic_tokenize(text):
    """The uncased basic tokenizer: clean, CJK apart, lower case, no accents, punctuation apart."""
    words = []
    for word in space_cjk(clean_text(text)).split():
        words.extend(split_punctuation(strip_accents(word.lower())))
    return words


def wordpiece(word, vocab):
    """Greedy longest-match-first pieces of one word ("##" marks a continuation), or [UNK]."""
    if len(word) > MAX_WORD_CHARS:
        return ["[UNK]"]
    pieces = []
    start = 0
    while start < len(word):
        end = len(word)
        piece = None
        while start < end:
            candidate = word[start:end] if start == 0 else "##" + word[start:end]
            if candidate in vocab:
                piece = candidate
                break
            end -= 1
        if piece is None:
            return ["[UNK]"]
        pieces.append(piece)
        start = end
    return pieces


def load_vocab(path):
    vocab = {}
    with open(path, "rb") as f:
        for index, line in enumerate(f):
            vocab[line.decode("utf-8", errors="ignore").strip()] = index
    return vocab


def tokenize_ids(text, vocab):
    """The WordPiece ids of a text (no [CLS] or [SEP])."""
    pieces = []
    for word in basic_tokenize(text):
        pieces.extend(wordpiece(word, vocab))
    return [vocab[p] for p in pieces]


# ---- Data --------------------------------------------------------------------------------------

def read_trec(path):
    """(question, coarse label index) for each line "COARSE:fine question" of a TREC file."""
    with open(path, "rb") as f:
        text = f.read().decode("utf-8", errors="ignore")
    examples = []
    for line in text.split("\n"):
        if not line:
            continue
        label_part, question = line.split(" ", 1)
        examples.append((question, LABELS.index(label_part.split(":", 1)[0])))
    return examples


def features(examples, vocab, max_seq_length):
    """Tensors input_ids, input_mask, segment_ids [n, max_seq_length] and labels [n]:
    [CLS] tokens [SEP], the tokens truncated to max_seq_length - 2, padded with 0."""
    n = len(examples)
    input_ids = torch.zeros(n, max_seq_length, dtype=torch.long)
    input_mask = torch.zeros(n, max_seq_length, dtype=torch.long)
    labels = torch.zeros(n, dtype=torch.long)
    for i, (question, label) in enumerate(examples):
        ids = tokenize_ids(question, vocab)[:max_seq_length - 2]
        ids = [vocab["[CLS]"]] + ids + [vocab["[SEP]"]]
        input_ids[i, :len(ids)] = torch.tensor(ids)
        input_mask[i, :len(ids)] = 1
        labels[i] = label
    return {"input_ids": input_ids, "input_mask": input_mask,
            "segment_ids": torch.zeros(n, max_seq_length, dtype=torch.long), "labels": labels}


def batch_order(num_examples, batch_size, generator):
    """Endless batches of example indices: epochs each shuffled by `generator`, concatenated,
    cut into consecutive batches (a batch may span two epochs)."""
    pending = torch.empty(0, dtype=torch.long)
    while True:
        while len(pending) < batch_size:
            pending = torch.cat([pending, torch.randperm(num_examples, generator=generator)])
        yield pending[:batch_size]
        pending = pending[batch_size:]


# ---- Model and training ------------------------------------------------------------------------

class BertForClassification(python_reference.Bert):
    """run_classifier.py's create_model: dropout on the pooled output, then the output layer."""

    def __init__(self, a, num_labels):
        super().__init__(a)
        self.head_drop = nn.Dropout(0.1)
        self.classifier = nn.Linear(a.hidden_size, num_labels)
        self.init_weights()  # truncated normal, std 0.02, biases 0 (the output layer's too)

    def forward(self, input_ids, input_mask, segment_ids):
        _, pooled = self.encode(input_ids, input_mask, segment_ids)
        return self.classifier(self.head_drop(pooled))


def model_config(path):
    """The BertConfig as the attributes python_reference.Bert reads. Bert fixes dropout 0.1,
    erf GELU, two token types and initializer_range 0.02: a config asking otherwise is refused."""
    with open(path) as f:
        c = json.load(f)
    fixed = {"hidden_act": "gelu", "hidden_dropout_prob": 0.1,
             "attention_probs_dropout_prob": 0.1, "type_vocab_size": 2, "initializer_range": 0.02}
    for key, value in fixed.items():
        if c.get(key, value) != value:
            raise SystemExit(f"{path}: {key} = {c[key]}, python_reference.Bert has {value}")
    return types.SimpleNamespace(
        hidden_size=c["hidden_size"], num_hidden_layers=c["num_hidden_layers"],
        num_attention_heads=c["num_attention_heads"], intermediate_size=c["intermediate_size"],
        vocab_size=c["vocab_size"], seq=c["max_position_embeddings"])


def learning_rate(a, step, num_train_steps):
    """Google's schedule at 0-based `step`: linear warmup, else linear decay from step 0."""
    warmup_steps = int(num_train_steps * a.warmup_proportion)
    if step < warmup_steps:
        return a.learning_rate * step / warmup_steps
    return a.learning_rate * (1.0 - step / num_train_steps)


def train_step(model, opt, data, indices, lr):
    model.train()
    model.zero_grad(set_to_none=True)
    logits = model(data["input_ids"][indices], data["input_mask"][indices],
                   data["segment_ids"][indices])
    loss = nn.functional.cross_entropy(logits, data["labels"][indices])
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step(lr)
    return loss.item()


@torch.no_grad()
def evaluate(model, data, batch_size):
    """The accuracy on all of `data`, without dropout."""
    model.eval()
    correct = 0
    n = len(data["labels"])
    for begin in range(0, n, batch_size):
        rows = slice(begin, begin + batch_size)
        logits = model(data["input_ids"][rows], data["input_mask"][rows],
                       data["segment_ids"][rows])
        correct += (logits.argmax(dim=-1) == data["labels"][rows]).sum().item()
    return correct / n


def train_until_target(a, model, train, test):
    """Trains until the test accuracy reaches the target or the steps run out; returns the
    counters and timings for the JSON line."""
    opt = python_reference.AdamWeightDecay(model.named_parameters())
    num_examples = len(train["labels"])
    num_train_steps = int(num_examples / a.train_batch_size * a.num_train_epochs)
    order = batch_order(num_examples, a.train_batch_size, torch.Generator().manual_seed(a.seed))
    r = {"num_train_steps": num_train_steps, "steps": 0, "evals": 0, "accuracy": None,
         "reached": False, "train_s": 0.0, "eval_s": 0.0}
    for step in range(num_train_steps):
        t0 = time.monotonic()
        loss = train_step(model, opt, train, next(order), learning_rate(a, step, num_train_steps))
        r["train_s"] += time.monotonic() - t0
        r["steps"] = step + 1
        if r["steps"] % a.log_every_steps == 0:
            print(f"step {r['steps']}: loss {loss:.4f}", file=sys.stderr)
        if r["steps"] % a.eval_every_steps != 0 and r["steps"] != num_train_steps:
            continue
        t0 = time.monotonic()
        r["accuracy"] = evaluate(model, test, a.eval_batch_size)
        r["eval_s"] += time.monotonic() - t0
        r["evals"] += 1
        print(f"step {r['steps']}: eval accuracy {r['accuracy']:.4f}", file=sys.stderr)
        if r["accuracy"] >= a.target_accuracy:
            r["reached"] = True
            break
    return r


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data_dir", default=os.path.join(DATA, "TREC"))
    ap.add_argument("--vocab_file", default=os.path.join(DATA, "vocab.txt"))
    ap.add_argument("--bert_config", default=os.path.join(DATA, "bert_config_tiny.json"))
    ap.add_argument("--max_seq_length", type=int, default=32)
    ap.add_argument("--train_batch_size", type=int, default=32)
    ap.add_argument("--eval_batch_size", type=int, default=64)
    ap.add_argument("--learning_rate", type=float, default=5e-4)
    ap.add_argument("--warmup_proportion", type=float, default=0.1)
    ap.add_argument("--num_train_epochs", type=float, default=4.0)
    ap.add_argument("--eval_every_steps", type=int, default=100)
    ap.add_argument("--log_every_steps", type=int, default=50)
    ap.add_argument("--target_accuracy", type=float, default=0.80)
    ap.add_argument("--seed", type=int, default=12345)
    ap.add_argument("--threads", type=int, default=1)
    return ap.parse_args()


def main():
    a = parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    t0 = time.monotonic()
    vocab = load_vocab(a.vocab_file)
    train = features(read_trec(os.path.join(a.data_dir, "train_5500.label")), vocab,
                     a.max_seq_length)
    test = features(read_trec(os.path.join(a.data_dir, "TREC_10.label")), vocab,
                    a.max_seq_length)
    tokenize_s = time.monotonic() - t0
    print(f"{len(train['labels'])} training and {len(test['labels'])} test questions "
          f"tokenized in {tokenize_s:.2f} s", file=sys.stderr)
    config = model_config(a.bert_config)
    model = BertForClassification(config, len(LABELS))
    r = train_until_target(a, model, train, test)
    print(json.dumps({
        "impl": "pytorch", "task": "trec", "target_accuracy": a.target_accuracy,
        "reached": r["reached"], "steps": r["steps"], "evals": r["evals"],
        "accuracy": r["accuracy"], "time_to_accuracy_s": time.monotonic() - START,
        "train_s": r["train_s"], "eval_s": r["eval_s"], "tokenize_s": tokenize_s,
        "threads": a.threads, "num_train_steps": r["num_train_steps"],
        "learning_rate": a.learning_rate, "warmup_proportion": a.warmup_proportion,
        "num_train_epochs": a.num_train_epochs, "train_batch_size": a.train_batch_size,
        "eval_batch_size": a.eval_batch_size, "max_seq_length": a.max_seq_length,
        "eval_every_steps": a.eval_every_steps, "seed": a.seed,
        "hidden_size": config.hidden_size, "num_hidden_layers": config.num_hidden_layers,
        "num_attention_heads": config.num_attention_heads,
        "intermediate_size": config.intermediate_size, "torch": torch.__version__,
    }))


if __name__ == "__main__":
    main()
