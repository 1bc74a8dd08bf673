#!/usr/bin/python3
"""Times Google BERT's own Python data code on the inputs bench/run.sh gives bertlab.

Google's tokenization.py, run_squad.py and create_pretraining_data.py are not part of bertlab:
pass the folder that holds them (with its TensorFlow stub), e.g. the workplace's
shared/reference/google-bert. Prints one JSON line per measurement.

    google_reference.py --reference DIR tokenize --vocab V --input LINES.txt
    google_reference.py --reference DIR squad-features --vocab V --input dev-v2.0.json
    google_reference.py --reference DIR create-data --vocab V --input sample_text.txt
"""

import argparse
import json
import os
import random
import sys
import time


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--reference", required=True)
    ap.add_argument("what", choices=["tokenize", "squad-features", "create-data"])
    ap.add_argument("--vocab", required=True)
    ap.add_argument("--input", required=True)
    ap.add_argument("--dupe-factor", type=int, default=10, help="create-data's dupe_factor")
    ap.add_argument("--repeat", type=int, default=3, help="create-data: timed runs, the fastest kept")
    a = ap.parse_args()
    sys.path[:0] = [os.path.join(a.reference, "stub"), a.reference]
    import tokenization  # noqa: E402  (Google's, from --reference)

    tok = tokenization.FullTokenizer(vocab_file=a.vocab, do_lower_case=True)
    if a.what == "tokenize":
        with open(a.input, encoding="utf-8") as f:
            lines = f.read().split("\n")
        mb = sum(len(line.encode("utf-8")) + 1 for line in lines) / 1e6
        t0 = time.perf_counter()
        tokens = sum(len(tok.tokenize(line)) for line in lines)
        s = time.perf_counter() - t0
        print(json.dumps({"impl": "google", "bench": "tokenize", "input_mb": mb, "tokens": tokens,
                          "seconds": s, "mb_per_s": mb / s, "tokens_per_s": tokens / s}))
    elif a.what == "squad-features":
        import run_squad  # noqa: E402

        run_squad.FLAGS.version_2_with_negative = True
        examples = run_squad.read_squad_examples(a.input, is_training=False)
        count = [0]

        def output_fn(_feature):
            count[0] += 1

        t0 = time.perf_counter()
        run_squad.convert_examples_to_features(examples, tok, 384, 128, 64, False, output_fn)
        s = time.perf_counter() - t0
        print(json.dumps({"impl": "google", "bench": "squad-features", "features": count[0],
                          "seconds": s, "features_per_s": count[0] / s}))
    else:
        import create_pretraining_data as cpd  # noqa: E402

        s = float("inf")
        for _ in range(a.repeat):  # the fastest: a small input takes only some milliseconds
            t0 = time.perf_counter()
            instances = cpd.create_training_instances([a.input], tok, 128, a.dupe_factor, 0.1,
                                                      0.15, 20, random.Random(12345))
            s = min(s, time.perf_counter() - t0)
        print(json.dumps({"impl": "google", "bench": "create-data", "input": a.input,
                          "dupe_factor": a.dupe_factor, "instances": len(instances),
                          "seconds": s, "instances_per_s": len(instances) / s}))


if __name__ == "__main__":
    main()
