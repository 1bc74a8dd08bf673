#!/usr/bin/python3
"""The training step of `bertlab bench step`, written in plain PyTorch eager.

BERT (Google's architecture: separate Q/K/V projections, erf GELU, post-LayerNorm, dropout 0.1)
with the SQuAD span head (`--task squad`, the default) or the pretraining heads (`--task
pretrain`: masked LM tied to the word embeddings, and next sentence) on random token ids,
Google's AdamWeightDecay written as PyTorch ops, gradients clipped to global norm 1.0. Prints one
JSON line with the keys bertlab prints. The pretraining batch is bertlab's: round(seq * 0.15)
masked tokens at distinct random positions, at most --max_predictions_per_seq (20) slots, as
create_pretraining_data.py; the masked-LM loss is their mean, as run_pretraining.py.
Run with Debian's python3-torch (the same libtorch 1.13 build bertlab links):

    /usr/bin/python3 bench/python_reference.py --hidden_size 128 --num_hidden_layers 2 \\
        --num_attention_heads 2 --intermediate_size 512 --batch 8 --seq 128 --threads 1

`--impl transformers` runs Hugging Face's BertForQuestionAnswering (or BertForPreTraining, which
predicts every position and ignores the unmasked ones' labels) with the same configuration
instead (where transformers is installed), with torch.optim.AdamW (fused on CUDA) and the same
clipping; `--device cuda --precision bf16|fp16` puts the forward pass under torch.autocast (fp16
with a GradScaler), as Hugging Face's Trainer does with --bf16 / --fp16.
"""

import argparse
import contextlib
import json
import math
import resource
import statistics
import time

import torch
from torch import nn


class Layer(nn.Module):
    def __init__(self, h, heads, inter, p):
        super().__init__()
        self.heads = heads
        self.query = nn.Linear(h, h)
        self.key = nn.Linear(h, h)
        self.value = nn.Linear(h, h)
        self.attn_out = nn.Linear(h, h)
        self.attn_norm = nn.LayerNorm(h, eps=1e-12)
        self.inter = nn.Linear(h, inter)
        self.out = nn.Linear(inter, h)
        self.out_norm = nn.LayerNorm(h, eps=1e-12)
        self.drop = nn.Dropout(p)

    def split(self, x):
        b, s, h = x.shape
        return x.view(b, s, self.heads, h // self.heads).transpose(1, 2)

    def forward(self, x, mask_bias):
        b, s, h = x.shape
        q, k, v = self.split(self.query(x)), self.split(self.key(x)), self.split(self.value(x))
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(h // self.heads) + mask_bias
        probs = self.drop(torch.softmax(scores, dim=-1))
        context = torch.matmul(probs, v).transpose(1, 2).reshape(b, s, h)
        x = self.attn_norm(x + self.drop(self.attn_out(context)))
        y = self.out(nn.functional.gelu(self.inter(x)))
        return self.out_norm(x + self.drop(y))


class Bert(nn.Module):
    """BertModel: embeddings, encoder and pooler; a head subclass adds its modules, then calls
    init_weights()."""

    def __init__(self, a):
        super().__init__()
        h = a.hidden_size
        self.word = nn.Embedding(a.vocab_size, h)
        self.position = nn.Embedding(max(512, a.seq), h)
        self.token_type = nn.Embedding(2, h)
        self.emb_norm = nn.LayerNorm(h, eps=1e-12)
        self.drop = nn.Dropout(0.1)
        self.layers = nn.ModuleList(
            Layer(h, a.num_attention_heads, a.intermediate_size, 0.1)
            for _ in range(a.num_hidden_layers))
        self.pooler = nn.Linear(h, h)

    def init_weights(self):
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.trunc_normal_(m.weight, std=0.02, a=-0.04, b=0.04)
            if isinstance(m, nn.Linear):
                nn.init.zeros_(m.bias)

    def encode(self, ids, mask, segments):
        """The sequence output [batch, seq, hidden] and the pooled output [batch, hidden]."""
        s = ids.shape[1]
        positions = torch.arange(s, device=ids.device).unsqueeze(0)
        x = self.word(ids) + self.position(positions) + self.token_type(segments)
        x = self.drop(self.emb_norm(x))
        mask_bias = (1.0 - mask[:, None, None, :].float()) * -10000.0
        for layer in self.layers:
            x = layer(x, mask_bias)
        return x, torch.tanh(self.pooler(x[:, 0]))


class BertForSquad(Bert):
    def __init__(self, a):
        super().__init__(a)
        self.span = nn.Linear(a.hidden_size, 2)
        self.init_weights()

    def forward(self, input_ids, input_mask, segment_ids, start_positions, end_positions):
        # The pooled output is computed and unused, as bertlab computes it.
        x, _ = self.encode(input_ids, input_mask, segment_ids)
        logits = self.span(x)
        start_logits, end_logits = logits[..., 0], logits[..., 1]
        ce = nn.functional.cross_entropy
        return (ce(start_logits, start_positions) + ce(end_logits, end_positions)) / 2


class BertForPretraining(Bert):
    """run_pretraining.py's heads: the masked-LM transform (dense, GELU, LayerNorm) and output
    layer tied to the word embeddings at the masked slots, and the next-sentence classifier on the
    pooled output. Loss: Σ weight * cross-entropy / Σ weight, plus the next-sentence mean."""

    def __init__(self, a):
        super().__init__(a)
        h = a.hidden_size
        self.mlm_dense = nn.Linear(h, h)
        self.mlm_norm = nn.LayerNorm(h, eps=1e-12)
        self.mlm_bias = nn.Parameter(torch.zeros(a.vocab_size))
        self.next_sentence = nn.Linear(h, 2)
        self.init_weights()

    def forward(self, input_ids, input_mask, segment_ids, masked_lm_positions, masked_lm_ids,
                masked_lm_weights, next_sentence_labels):
        x, pooled = self.encode(input_ids, input_mask, segment_ids)
        index = masked_lm_positions.unsqueeze(-1).expand(-1, -1, x.shape[-1])
        gathered = x.gather(1, index)  # [batch, slots, hidden]
        # LayerNorm in fp32, as CUDA autocast runs it (CPU autocast would give it bf16 input).
        t = self.mlm_norm(nn.functional.gelu(self.mlm_dense(gathered)).float())
        logits = torch.matmul(t, self.word.weight.t()) + self.mlm_bias
        log_probs = torch.log_softmax(logits.reshape(-1, logits.shape[-1]).float(), dim=-1)
        per_slot = -log_probs.gather(1, masked_lm_ids.reshape(-1, 1)).squeeze(1)
        weights = masked_lm_weights.reshape(-1)
        masked_lm = (weights * per_slot).sum() / weights.sum()
        ce = nn.functional.cross_entropy
        return masked_lm + ce(self.next_sentence(pooled), next_sentence_labels)


class AdamWeightDecay:
    """Google's optimization.py: Adam without bias correction, decoupled weight decay, written
    with PyTorch's multi-tensor (_foreach) kernels as torch.optim's foreach implementations."""

    def __init__(self, named, wd=0.01, b1=0.9, b2=0.999, eps=1e-6):
        named = list(named)
        self.params = [p for _, p in named]
        self.m = [torch.zeros_like(p) for p in self.params]
        self.v = [torch.zeros_like(p) for p in self.params]
        self.decay = [not any(x in n for x in ("norm", "bias")) for n, _ in named]
        self.wd, self.b1, self.b2, self.eps = wd, b1, b2, eps

    @torch.no_grad()
    def step(self, lr):
        # A parameter without a gradient (the pooler, unused by the span head) is skipped, as
        # TensorFlow's apply_gradients and torch.optim skip it.
        live = [i for i, p in enumerate(self.params) if p.grad is not None]
        params = [self.params[i] for i in live]
        grads = [self.params[i].grad for i in live]
        m = [self.m[i] for i in live]
        v = [self.v[i] for i in live]
        torch._foreach_mul_(m, self.b1)
        torch._foreach_add_(m, grads, alpha=1 - self.b1)
        torch._foreach_mul_(v, self.b2)
        torch._foreach_addcmul_(v, grads, grads, value=1 - self.b2)
        denom = torch._foreach_sqrt(v)
        torch._foreach_add_(denom, self.eps)
        updates = torch._foreach_div(m, denom)
        decayed = [k for k, i in enumerate(live) if self.decay[i]]
        torch._foreach_add_([updates[k] for k in decayed], [params[k] for k in decayed],
                            alpha=self.wd)
        torch._foreach_add_(params, updates, alpha=-lr)


def transformers_model(a):
    """Hugging Face's BertForQuestionAnswering (--task squad) or BertForPreTraining (--task
    pretrain) with bertlab's configuration, a function making its inputs from a batch of
    make_batch (before the timed steps), and one making its optimizer."""
    try:
        from transformers import BertConfig, BertForPreTraining, BertForQuestionAnswering
    except ImportError:
        raise SystemExit("--impl transformers: Hugging Face transformers is not installed here "
                         "(it is on the GPU machine; see scripts/gpu-check.sh)")

    config = BertConfig(vocab_size=a.vocab_size, hidden_size=a.hidden_size,
                        num_hidden_layers=a.num_hidden_layers,
                        num_attention_heads=a.num_attention_heads,
                        intermediate_size=a.intermediate_size,
                        max_position_embeddings=max(512, a.seq), type_vocab_size=2,
                        hidden_act="gelu", layer_norm_eps=1e-12)
    model = (BertForPreTraining if a.task == "pretrain" else BertForQuestionAnswering)(config)

    def inputs_of(b):
        inputs = {"input_ids": b["input_ids"], "attention_mask": b["input_mask"],
                  "token_type_ids": b["segment_ids"]}
        if a.task == "squad":
            return {**inputs, "start_positions": b["start_positions"],
                    "end_positions": b["end_positions"]}
        # labels: the original id at each masked position, -100 (ignored) elsewhere.
        labels = torch.full_like(b["input_ids"], -100)
        real = b["masked_lm_weights"] > 0
        rows = torch.arange(labels.shape[0], device=labels.device).unsqueeze(1).expand_as(real)
        labels[rows[real], b["masked_lm_positions"][real]] = b["masked_lm_ids"][real]
        return {**inputs, "labels": labels, "next_sentence_label": b["next_sentence_labels"]}

    def make_opt():  # once the model is on its device
        fused = {"fused": True} if a.device.startswith("cuda") else {}
        return torch.optim.AdamW(model.parameters(), lr=5e-5, weight_decay=0.01, eps=1e-6, **fused)

    return model, inputs_of, make_opt


def masked_lm_tokens(a):
    """create_pretraining_data.py's number of masked tokens in a sequence of --seq tokens:
    round(seq * 0.15), at least 1, at most --max_predictions_per_seq (bertlab's bench step)."""
    return min(a.max_predictions_per_seq, max(1, round(a.seq * 0.15)))


def make_batch(a, g):
    """bertlab's bench step batch: random ids, a full mask, two segments, and random answer spans
    (squad) or masked-LM slots and next-sentence labels (pretrain): distinct random positions in
    ascending order with random ids and weight 1, padding slots at 0 with weight 0."""
    b = {"input_ids": torch.randint(a.vocab_size, (a.batch, a.seq), generator=g),
         "input_mask": torch.ones(a.batch, a.seq, dtype=torch.long),
         "segment_ids": torch.zeros(a.batch, a.seq, dtype=torch.long)}
    b["segment_ids"][:, a.seq // 2:] = 1
    if a.task == "squad":
        b["start_positions"] = torch.randint(a.seq, (a.batch,), generator=g)
        b["end_positions"] = torch.randint(a.seq, (a.batch,), generator=g)
        return b
    slots, masked = a.max_predictions_per_seq, masked_lm_tokens(a)
    drawn = torch.rand(a.batch, a.seq, generator=g).argsort(dim=1)[:, :masked].sort(dim=1).values
    b["masked_lm_positions"] = torch.zeros(a.batch, slots, dtype=torch.long)
    b["masked_lm_positions"][:, :masked] = drawn
    b["masked_lm_ids"] = torch.zeros(a.batch, slots, dtype=torch.long)
    b["masked_lm_ids"][:, :masked] = torch.randint(a.vocab_size, (a.batch, masked), generator=g)
    b["masked_lm_weights"] = torch.zeros(a.batch, slots)
    b["masked_lm_weights"][:, :masked] = 1.0
    b["next_sentence_labels"] = torch.randint(2, (a.batch,), generator=g)
    return b


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--hidden_size", "--hidden-size", type=int, default=768)
    ap.add_argument("--num_hidden_layers", "--num-hidden-layers", type=int, default=12)
    ap.add_argument("--num_attention_heads", "--num-attention-heads", type=int, default=12)
    ap.add_argument("--intermediate_size", "--intermediate-size", type=int, default=3072)
    ap.add_argument("--vocab_size", "--vocab-size", type=int, default=30522)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--impl", choices=["pytorch", "transformers"], default="pytorch")
    ap.add_argument("--task", choices=["squad", "pretrain"], default="squad")
    ap.add_argument("--max_predictions_per_seq", "--max-predictions-per-seq", type=int, default=20,
                    help="pretrain: masked-LM slots per sequence (the pretrain task's default)")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--precision", choices=["fp32", "bf16", "fp16"], default="fp32")
    ap.add_argument("--tf32", action="store_true")
    a = ap.parse_args()
    if a.max_predictions_per_seq < 1:
        ap.error(f"--max_predictions_per_seq must be >= 1, got {a.max_predictions_per_seq}")
    torch.set_num_threads(a.threads)
    torch.manual_seed(12345)
    device = torch.device(a.device)
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = a.tf32
    if a.impl == "transformers":
        model, inputs_of, make_opt = transformers_model(a)

        def loss_of(inputs):
            return model(**inputs).loss
    else:
        model = BertForPretraining(a) if a.task == "pretrain" else BertForSquad(a)

        def inputs_of(b):
            return b

        def loss_of(inputs):
            return model(**inputs)

        def make_opt():
            return AdamWeightDecay(model.named_parameters())
    model.to(device)
    opt = make_opt()
    model.train()
    g = torch.Generator().manual_seed(1000)
    inputs = inputs_of({k: t.to(device) for k, t in make_batch(a, g).items()})
    dtype = {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}[a.precision]
    scaler = torch.cuda.amp.GradScaler() if a.precision == "fp16" else None

    def sync():
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    steps, fwd, bwd, optim = [], [], [], []
    for step in range(a.steps + 1):  # step 0 warms up
        sync()
        t0 = time.perf_counter()
        model.zero_grad(set_to_none=True)
        # fp32: no autocast context at all (torch 1.13 refuses a float32 CPU autocast even when
        # disabled).
        with (torch.autocast(device.type, dtype=dtype) if dtype else contextlib.nullcontext()):
            loss = loss_of(inputs)
        sync()
        t1 = time.perf_counter()
        (scaler.scale(loss) if scaler else loss).backward()
        sync()
        t2 = time.perf_counter()
        if scaler:
            scaler.unscale_(opt)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        if a.impl == "pytorch":
            opt.step(5e-5 * (1 - step / (a.steps + 1)))
        elif scaler:
            scaler.step(opt)
            scaler.update()
        else:
            opt.step()
        sync()
        t3 = time.perf_counter()
        if step > 0:
            steps.append(t3 - t0)
            fwd.append(t1 - t0)
            bwd.append(t2 - t1)
            optim.append(t3 - t2)
    h, i, s, L = a.hidden_size, a.intermediate_size, a.seq, a.num_hidden_layers
    flops = 3.0 * (2.0 * (4 * h * h + 2 * h * i) + 4.0 * s * h) * L * a.batch * s
    step_s = statistics.median(steps)
    total = sum(steps)
    peak_device_mb = (torch.cuda.max_memory_allocated(device) / 2**20
                      if device.type == "cuda" else None)
    pretrain = {}
    if a.task == "pretrain":
        # Hugging Face's head predicts every position; bertlab's and BertForPretraining's only
        # the slots.
        pretrain = {"masked_lm_slots": a.seq if a.impl == "transformers"
                    else a.max_predictions_per_seq,
                    "masked_lm_tokens": masked_lm_tokens(a)}
    print(json.dumps({
        "impl": a.impl, "task": a.task, **pretrain, "device": a.device, "precision": a.precision,
        "sequences_per_second": a.batch / step_s, "peak_device_mb": peak_device_mb,
        "hidden_size": h, "num_hidden_layers": L, "num_attention_heads": a.num_attention_heads,
        "intermediate_size": i, "vocab_size": a.vocab_size, "batch": a.batch, "seq": s,
        "threads": a.threads, "strategy": "single", "replicas": 1, "sparse_embeddings": False,
        "steps": a.steps, "step_s": step_s, "tokens_per_second": a.batch * s / step_s,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
        "forward_share": sum(fwd) / total, "backward_share": sum(bwd) / total,
        "comm_share": 0.0, "optimizer_share": sum(optim) / total,
        "encoder_gflop_per_step": flops / 1e9, "achieved_gflops": flops / step_s / 1e9,
        "torch": torch.__version__,
    }))


if __name__ == "__main__":
    main()
