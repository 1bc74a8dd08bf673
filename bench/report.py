#!/usr/bin/python3
"""Turns bench/run.sh's raw JSON lines (bench/out/) into bench/results.md.

    report.py OUT [PREVIOUS]

After a partial run (bench/run.sh --only, which lists its rows in OUT/rows), the rows it did not
rerun are taken from PREVIOUS, the results.md it replaces, and marked with their run's date.
"""

import datetime
import json
import os
import platform
import re
import statistics
import sys


def load(path):
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def row_key(line):
    """What a row of the targets table measures: its first cell up to any parenthesis."""
    cell = line.split("|")[1].strip()
    if cell.startswith("["):
        cell = cell.split("] ", 1)[1]  # the date of a row carried from an earlier run
    return cell.split(" (")[0]


STEPS = "## Training steps (median over the repetitions)"


BY_HAND = "## Recorded by hand"


def by_hand(previous_path):
    """The hand-recorded section of the previous results.md, from its heading to the end: no run
    produces it, so every run carries it over."""
    if not previous_path or not os.path.exists(previous_path):
        return []
    previous = open(previous_path, encoding="utf-8").read().rstrip("\n").split("\n")
    if BY_HAND not in previous:
        return []
    return [""] + previous[previous.index(BY_HAND):]


def merge(lines, previous_path, rerun):
    """Lines of results.md with what this run did not rerun taken from the previous results.md:
    rows of the targets table (their first cell starts with the date of their run), rows of the
    steps table of a model not rerun, and the `bench gemm` line."""
    if not previous_path or not os.path.exists(previous_path):
        return lines
    previous = open(previous_path, encoding="utf-8").read().rstrip("\n").split("\n")
    if BY_HAND in previous:
        previous = previous[:previous.index(BY_HAND)]
    if STEPS not in previous:
        return lines
    when = (previous[0].split("(", 1)[1].split(")")[0].split(";")[0]
            if "(" in previous[0] else "an earlier run")

    def targets(ls):
        return [l for l in ls[:ls.index(STEPS)] if l.startswith("| ") and not l.startswith("| what")]

    def steps(ls):
        return [l for l in ls[ls.index(STEPS):] if l.startswith("| tiny |") or l.startswith("| base |")]

    def gemm_line(ls):
        return next((l for l in ls if l.startswith("`bench gemm`")), "")

    new_rows = {row_key(l): l for l in targets(lines)}
    merged = []
    for l in targets(previous):
        key = row_key(l)
        if key in new_rows:
            merged.append(new_rows.pop(key))
        elif l.startswith("| ["):
            merged.append(l)  # carried before: keeps its date
        else:
            merged.append(f"| [{when}] " + l[2:])
    merged.extend(new_rows.values())
    notes = []
    if any(l.startswith("| [") for l in merged):
        notes = ["A row whose first cell starts with [date] was not rerun: it comes from the "
                 "run of that date, its ratio from within that run."]
    step_rows = [l for l in steps(previous) if l.split("|")[1].strip() not in rerun]
    step_rows += [l for l in steps(lines) if l.split("|")[1].strip() in rerun]
    step_rows.sort(key=lambda l: l.split("|")[1].strip() != "tiny")
    head = lines[:lines.index("|---|---|---|---:|---|---|") + 1]
    head[0] = f"{head[0][:-1]}; rows rerun: {', '.join(rerun)})"
    steps_head = lines[lines.index(STEPS):lines.index(STEPS) + 4]
    gemm = gemm_line(lines) if "gemm" in rerun else gemm_line(previous)
    return head + merged + [""] + notes + [""] + steps_head + step_rows + ["", gemm]


def one(out, name):
    path = os.path.join(out, name)
    return load(path)[0] if os.path.exists(path) else None


def data_rows(out, lines, google_squad):
    """The `data` rows: the data tools as whole processes (start-up included, files written)
    against Google's core loop on the same input, the writers' encoding in-process, memory."""
    runs = {}
    for r in load(os.path.join(out, "data.jsonl")):
        runs.setdefault(r["name"], []).append(r)
    if not runs:
        return

    def median(name, key):
        values = sorted(r[key] for r in runs.get(name, []))
        return values[len(values) // 2] if values else None

    def yes(ok):
        return "yes" if ok else "no"

    core = one(out, "create_data_corpus.json")
    google = one(out, "google_create_data_corpus.json")
    google_rss = one(out, "google_create_data_rss.json")
    start = median("startup-data", "wall_s")
    start_rss = median("startup-data", "peak_rss_mb")
    host = median("startup", "wall_s")
    n = len(runs.get("startup", []))
    if start is not None:
        lines.append(
            f"| start-up, whole process, median of {n} | every other command (`bertlab --version`, "
            f"in bertlab-host: libtorch's libraries loaded and its operators registered): "
            f"{host:.2f} s, peak RSS {median('startup', 'peak_rss_mb')} MB | the data commands "
            f"(`bertlab squad features --help`, without libtorch): {start:.3f} s, peak RSS "
            f"{start_rss} MB | – | stated, not a target | – |")
    if core:
        instances = core["instances"]
        for fmt, target in (("tfrecord", 10), ("jsonl", 5)):
            wall = median(f"create-data-{fmt}", "wall_s")
            if wall is None:
                continue
            rate = instances / wall
            name = "TFRecord" if fmt == "tfrecord" else "JSON Lines"
            out_mb = median(f"create-data-{fmt}", "output_bytes") / 1e6
            rss = median(f"create-data-{fmt}", "peak_rss_mb")
            mine = (f"{rate:,.0f} instances/s ({wall:.2f} s, start-up included; {out_mb:.0f} MB "
                    f"written; peak RSS {rss} MB)")
            if google:
                g = google["instances_per_s"]
                lines.append(
                    f"| create-data end to end, whole process, to {name} (SQuAD v1.1 + v2.0 dev "
                    f"paragraphs ×5, 12.9 MB, dupe 2, {instances:,} instances, median of {n}) | "
                    f"Google's core loop {g:,.0f} instances/s (measured in this run; reads and "
                    f"builds the instances, writes nothing) | {mine} | {rate / g:.1f}× | "
                    f"≥ {target}× | {yes(rate / g >= target)} |")
            else:
                lines.append(f"| create-data end to end, whole process, to {name} | not measured "
                             f"| {mine} | – | ≥ {target}× | unknown |")
        for fmt in ("tfrecord", "jsonl"):
            mbps = core[f"{fmt}_encode_mb_per_s"]
            what = ("TFRecord (tf.train.Example, framing, crc32c)" if fmt == "tfrecord"
                    else "JSON Lines")
            lines.append(
                f"| writer's encoding, {what}, one core, in-process core loop | – | "
                f"{mbps:,.0f} MB/s | – | ≥ 200 MB/s | {yes(mbps >= 200)} |")
        rss1 = median("create-data-tfrecord", "peak_rss_mb")
        held1 = core["store_mb"]
        tf_mb = median("create-data-tfrecord", "output_bytes") / 1e6
        if rss1 is not None:
            g = (f"Google's core loop {google_rss['peak_rss_mb']:,} MB" if google_rss
                 else "not measured")
            lines.append(
                f"| create-data peak memory (RSS), whole process, 12.9 MB corpus | {g} | "
                f"{rss1} MB: start-up {start_rss} MB, the instances held {held1:.0f} MB (for "
                f"{tf_mb:.0f} MB of TFRecord), the documents and buffers the rest | "
                f"{held1 / tf_mb:.2f}× the TFRecord | instances held < the TFRecord they "
                f"become | {yes(held1 < tf_mb)} |")
        rss4 = median("create-data-tfrecord-4x", "peak_rss_mb")
        log_path = os.path.join(out, "create_data_4x.log")
        if rss4 is not None and os.path.exists(log_path):
            log = open(log_path, encoding="utf-8").read()
            m = re.search(r"→ (\d+) instances .*holding (\d+) MB", log)
            instances4, held4 = (int(m.group(1)), int(m.group(2))) if m else (0, 0)
            wall4 = median("create-data-tfrecord-4x", "wall_s")
            tf4 = median("create-data-tfrecord-4x", "output_bytes") / 1e6
            growth = (rss4 - start_rss) / (rss1 - start_rss)
            lines.append(
                f"| create-data at 4× the corpus (51.6 MB, {instances4:,} instances), whole "
                f"process, to TFRecord | 1×: {rss1} MB peak RSS | {rss4} MB peak RSS (instances "
                f"held {held4} MB for {tf4:.0f} MB of TFRecord); {instances4 / wall4:,.0f} "
                f"instances/s | memory above start-up {growth:.1f}× for 4× the instances | "
                f"linear (≤ 4.4×) | {yes(growth <= 4.4)} |")
    sq_wall = median("squad-features", "wall_s")
    if sq_wall is not None and google_squad:
        features = google_squad["features"]
        rate = features / sq_wall
        g = google_squad["features_per_s"]
        lines.append(
            f"| SQuAD features end to end, whole process, dev-v2.0 to a file ({features:,} "
            f"features, 384/128/64, median of {n}) | Google's core loop {g:,.0f} features/s "
            f"(measured in this run; writes nothing) | {rate:,.0f} features/s ({sq_wall:.2f} s, "
            f"start-up included; {median('squad-features', 'output_bytes') / 1e6:.0f} MB written; "
            f"peak RSS {median('squad-features', 'peak_rss_mb')} MB) | {rate / g:.1f}× | ≥ 10× | "
            f"{yes(rate / g >= 10)} |")


def main():
    out = sys.argv[1]
    here = os.path.dirname(os.path.abspath(__file__))
    quoted = json.load(open(os.path.join(here, "reference.json"), encoding="utf-8"))
    gemm = {g["threads"]: g["gflops"] for g in load(os.path.join(out, "gemm.jsonl"))}

    # Median step time of each configuration over the repetitions.
    groups = {}
    for row in load(os.path.join(out, "steps.jsonl")):
        r = row["result"]
        key = (row["config"], r["impl"], r["threads"], r["strategy"], r["replicas"],
               r["sparse_embeddings"])
        groups.setdefault(key, []).append(r)
    configs = []
    for key, runs in groups.items():
        runs.sort(key=lambda r: r["step_s"])
        mid = runs[len(runs) // 2]
        configs.append((key, mid, len(runs)))

    def label(key):
        _, impl, threads, strategy, replicas, sparse = key
        if impl == "pytorch":
            return f"PyTorch eager, {threads} thread(s)"
        s = f"bertlab {strategy}"
        if replicas > 1:
            s += f" ×{replicas} replicas"
        if sparse:
            s += ", sparse embeddings"
        return s + f", {threads} thread(s)" + (" each" if replicas > 1 else "")

    lines = []
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    cpu = "unknown CPU"
    try:
        for line in open("/proc/cpuinfo", encoding="utf-8"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    lines.append(f"# bertlab benchmarks ({now})")
    lines.append("")
    load_average = os.getloadavg()[0]
    lines.append(f"Machine: {os.cpu_count()} cores ({cpu}), {platform.platform()}. "
                 f"Produced by `bench/run.sh`. The cores are shared with other jobs (load "
                 f"average {load_average:.1f} when this report was written), so absolute figures are "
                 f"noisy: each ratio compares two figures taken in this same run.")
    lines.append("")
    lines.append("## Targets")
    lines.append("")
    lines.append("| what | reference, measured here | bertlab | ratio | target | met |")
    lines.append("|---|---|---|---:|---|---|")

    def best(config, impl):
        rows = [(m["step_s"], k, m) for k, m, _ in configs if k[0] == config and k[1] == impl]
        return min(rows, key=lambda x: x[0]) if rows else None

    for config, title, target in (("tiny", "tiny BERT (h128, L2, A2, I512), batch 8 × 128", 1.5),
                                  ("base", "BERT-Base (h768, L12, A12, I3072), batch 4 × 128", 1.2)):
        p, b = best(config, "pytorch"), best(config, "bertlab")
        if not p or not b:
            continue
        ratio = p[0] / b[0]
        lines.append(
            f"| {title}: tokens/s at each one's best setting | {p[2]['tokens_per_second']:,.0f} "
            f"({label(p[1])}) | {b[2]['tokens_per_second']:,.0f} ({label(b[1])}) | "
            f"{ratio:.2f}× | ≥ {target}× | {'yes' if ratio >= target else 'no'} |")
        if config == "base":
            pm, bm = p[2]["peak_rss_mb"], b[2]["peak_rss_mb"]
            lines.append(f"| BERT-Base peak memory (RSS) | {pm:,.0f} MB | {bm:,.0f} MB | "
                         f"{bm / pm:.2f}× | ≤ PyTorch's | {'yes' if bm <= pm else 'no'} |")
            peak = gemm.get(b[2]["threads"])
            if peak:
                share = b[2]["achieved_gflops"] / peak
                lines.append(
                    f"| BERT-Base achieved FLOP rate | `bench gemm` {peak:.1f} GFLOP/s at "
                    f"{b[2]['threads']} thread(s) | {b[2]['achieved_gflops']:.1f} GFLOP/s | "
                    f"{share:.0%} | ≥ 70% | {'yes' if share >= 0.7 else 'no'} |")

    def google(name, key, quoted_key):
        g = one(out, name)
        if g:
            return g[key], "measured"
        value = quoted.get(quoted_key)
        return value, "quoted"

    tok = one(out, "tokenize.json")
    if tok:
        g, how = google("google_tokenize.json", "mb_per_s", "tokenize_mb_per_s")
        mbps = tok["mb_per_s_1_thread"]
        lines.append(
            f"| WordPiece tokenization, SQuAD dev-v2.0 text ({tok['input_mb']:.2f} MB), 1 thread, "
            f"in-process core loop | "
            f"Google's tokenization.py {g:.2f} MB/s ({how}) | {mbps:.1f} MB/s "
            f"({tok['mb_per_s_all_threads']:.1f} MB/s on {tok['threads']} threads) | "
            f"{mbps / g:.0f}× | ≥ 25 MB/s | {'yes' if mbps >= 25 else 'no'} |")
    sq = one(out, "squad_features.json")
    if sq:
        g, how = google("google_squad_features.json", "features_per_s", "squad_features_per_s")
        fps = sq["features_per_s"]
        lines.append(
            f"| SQuAD features, dev-v2.0 ({sq['features']:,} features, 384/128/64), in-process core "
            f"loop | Google's "
            f"run_squad.py {g:,.0f} features/s ({how}) | {fps:,.0f} features/s | {fps / g:.0f}× | "
            f"≥ 25,000 features/s | {'yes' if fps >= 25000 else 'no'} |")
    cd = one(out, "create_data.json")
    if cd:
        g, how = google("google_create_data.json", "instances_per_s",
                        "create_data_instances_per_s")
        ips = cd["instances_per_s"]
        if g:
            lines.append(
                f"| create-data, bundled sample text ({cd['instances']} instances, dupe 10), "
                f"in-process core loop | "
                f"Google's script {g:,.0f} instances/s ({how}) | {ips:,.0f} instances/s | "
                f"{ips / g:.0f}× | ≥ 20× | {'yes' if ips / g >= 20 else 'no'} |")
        else:
            lines.append(f"| create-data, bundled sample text | not measured | {ips:,.0f} "
                         f"instances/s | – | ≥ 20× | unknown |")
    data_rows(out, lines, one(out, "google_squad_features.json"))
    bm, bs = one(out, "bytes_mirrored.json"), one(out, "bytes_sparse.json")
    if bm and bs:
        table = 30522 * 768 * 4
        share = bs["comm_sparse_bytes"] / table
        lines.append(
            f"| word-embedding bytes per step, 30522 × 768, batch 32 × 128, 2 replicas | mirrored: "
            f"dense all-reduce of {table / 1e6:.1f} MB (all dense bytes {bm['comm_dense_bytes'] / 1e6:.1f} MB) | "
            f"sparse_allgather: {bs['comm_sparse_bytes'] / 1e6:.2f} MB | {share:.1%} | ≤ 10% | "
            f"{'yes' if share <= 0.10 else 'no'} |")
    for mode, name in (("false", "in memory"), ("true", "streaming")):
        path = os.path.join(out, f"pipeline-{mode}", "pretrain", "single", "metrics.jsonl")
        if not os.path.exists(path):
            continue
        rows = load(path)
        wait = sum(r["data_s"] for r in rows)
        step = sum(r["data_s"] + r["compute_s"] + r["comm_s"] + r["optimizer_s"] for r in rows)
        share = wait / step
        lines.append(
            f"| input pipeline, pretrain task {name} (hidden 32, batch 8) | – | waiting "
            f"{wait / len(rows) * 1e3:.2f} ms per step | {share:.2%} of the step | ≤ 2% | "
            f"{'yes' if share <= 0.02 else 'no'} |")

    # Per-example dropout masks against each replica's own generator, per strategy.
    modes = {}
    for r in load(os.path.join(out, "dropout.jsonl")):
        key = (r["strategy"], r["replicas"])
        modes.setdefault(key, {}).setdefault(r["dropout_rng"], []).append(r["step_s"])
    for (strategy, replicas), times in sorted(modes.items()):
        if "replica" not in times or "per_example" not in times:
            continue
        med = {m: sorted(v)[len(v) // 2] for m, v in times.items()}
        ratio = med["per_example"] / med["replica"]
        who = strategy if replicas == 1 else f"{strategy} ×{replicas} replicas"
        lines.append(
            f"| dropout masks per example vs per replica, tiny BERT {who}, 1 thread "
            f"(dropout 0.1, batch 8 × 128, step s, median of {len(times['replica'])}) | "
            f"replica: {med['replica'] * 1e3:.1f} ms | per_example: "
            f"{med['per_example'] * 1e3:.1f} ms | {ratio:.2f}× | ≤ 1.05× | "
            f"{'yes' if ratio <= 1.05 else 'no'} |")

    # Adversarial training's step against plain training's, in the same run.
    adversarial = {}
    for r in load(os.path.join(out, "adversarial.jsonl")):
        adversarial.setdefault(r.get("adversarial", "none"), []).append(r["step_s"])
    if "none" in adversarial:
        plain = sorted(adversarial["none"])[len(adversarial["none"]) // 2]
        expected = {"fgm": ("2 passes", 2.0), "pgd": ("1 + 3 passes", 4.0),
                    "freelb": ("3 passes", 3.0)}
        for name, (passes, target) in expected.items():
            if name not in adversarial:
                continue
            med = sorted(adversarial[name])[len(adversarial[name]) // 2]
            ratio = med / plain
            lines.append(
                f"| adversarial step, {name} ({passes}), tiny BERT, 1 thread (dropout 0.1, batch "
                f"8 × 128, step s, median of {len(adversarial[name])}, in-process core loop) | "
                f"plain training: {plain * 1e3:.1f} ms | {name}: {med * 1e3:.1f} ms | "
                f"{ratio:.2f}× | ~{target:.0f}× (its passes) | "
                f"{'yes' if ratio <= target * 1.15 else 'no'} |")

    # Time to accuracy: whole processes, bertlab and PyTorch alternating in the same run.
    tta = {}
    for r in load(os.path.join(out, "tta.jsonl")):
        tta.setdefault(r["impl"], []).append(r)
    if "bertlab" in tta and "pytorch" in tta:
        def median_run(runs):
            return sorted(runs, key=lambda r: r["time_to_accuracy_s"])[len(runs) // 2]

        b, p = median_run(tta["bertlab"]), median_run(tta["pytorch"])
        reached = all(r["reached"] for r in tta["bertlab"] + tta["pytorch"])
        ratio = p["time_to_accuracy_s"] / b["time_to_accuracy_s"]
        lines.append(
            f"| time to 0.80 TREC-6 test accuracy, tiny BERT from scratch, 1 thread (batch 16, lr "
            f"5e-4, test set every 100 steps, whole process, median of {len(tta['bertlab'])}) | "
            f"PyTorch eager: {p['time_to_accuracy_s']:.1f} s ({p['steps']} steps, "
            f"{p['accuracy']:.3f}) | {b['time_to_accuracy_s']:.1f} s ({b['steps']} steps, "
            f"{b['accuracy']:.3f}) | {ratio:.2f}× | ≥ 2× | "
            f"{'yes' if ratio >= 2.0 and reached else 'no'} |")

    lines.append("")
    lines.append("## Training steps (median over the repetitions)")
    lines.append("")
    lines.append("| model | implementation | step s | tokens/s | peak RSS MB | forward | backward "
                 "| communication | optimizer | GFLOP/s | runs |")
    lines.append("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for key, m, n in sorted(configs, key=lambda c: (c[0][0] != "tiny", c[1]["step_s"])):
        lines.append(
            f"| {key[0]} | {label(key)} | {m['step_s']:.4f} | {m['tokens_per_second']:,.0f} | "
            f"{m['peak_rss_mb']:,.0f} | {m['forward_share']:.0%} | {m['backward_share']:.0%} | "
            f"{m['comm_share']:.0%} | {m['optimizer_share']:.0%} | {m['achieved_gflops']:.1f} | {n} |")
    lines.append("")
    lines.append("`bench gemm` (1024², float32): " + ", ".join(
        f"{g:.1f} GFLOP/s at {t} thread(s)" for t, g in sorted(gemm.items())))
    rerun = open(os.path.join(out, "rows"), encoding="utf-8").read().split() if os.path.exists(
        os.path.join(out, "rows")) else []
    previous = sys.argv[2] if len(sys.argv) > 2 else None
    if rerun:
        lines = merge(lines, previous, rerun)
    print("\n".join(lines + by_hand(previous)))


if __name__ == "__main__":
    main()
