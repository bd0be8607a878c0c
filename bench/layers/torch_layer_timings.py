#!/usr/bin/env python3
"""Time transformer layers in eager PyTorch on one GPU, split so the compute model can be checked
part by part (docs/fidelity.md, "Known gaps"): which of GEMM rate, attention backend and host
issue stalls carries a layer's time.

For a Llama-2-7B layer (RMSNorm, q/k/v/o without bias, causal sdpa, SwiGLU MLP; no rotary) and a
GPT-2-XL layer (LayerNorm, fused qkv with bias, causal sdpa, GELU MLP), bf16, it writes one CSV
row per measurement:
- the whole layer, forward and forward + backward, with sdpa pinned to each attention backend
  this PyTorch has (FlashAttention-2 as PyTorch bundles it, cuDNN, memory-efficient);
- the layer's GEMMs alone, forward and backward (dgrad + wgrad), and attention alone per backend;
- for GPT-2-XL, the MLP's GELU alone, as one fused kernel and as HF's gelu_new (eight);
- each distinct GEMM of the layer alone (forward, dgrad, wgrad: columns m, n, k), and a probe of
  tile and wave quantization at M = K = 4096 with N from 3840 to 4608 (the simulator's model,
  sim/cost/compute_model.hpp, predicts 4 waves of 128 x 256 tiles on 132 SMs up to N = 4096 and 5
  from N = 4224: a step down of 17% in rate), pipelined only;
- each two ways: `synchronized` (CUDA events around one repetition, the device idle before it:
  the host's issue stalls are in the figure) and `pipelined` (repetitions back to back, one
  synchronisation at the end: the host runs ahead, as in a training step's steady state).

    python3 bench/layers/torch_layer_timings.py OUT.csv [--repeats N] [--warmup N]

Without PyTorch or a GPU it says so and exits 0 with nothing written, so gpu-check can call it
everywhere.
"""
import argparse
import csv
import math
import sys


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("output", help="CSV file to write")
    p.add_argument("--repeats", type=int, default=10, help="timed repetitions (median reported)")
    p.add_argument("--warmup", type=int, default=3, help="untimed repetitions first")
    args = p.parse_args(argv)
    if args.repeats < 1 or args.warmup < 0:
        p.error("--repeats must be >= 1 and --warmup >= 0")
    return args


# The layers as their models' configs have them (HF config.json of meta-llama/Llama-2-7b-hf and
# openai-community/gpt2-xl), at the shapes the fidelity notes measured.
LAYERS = [
    {"name": "llama2-7b", "hidden": 4096, "heads": 32, "ffn": 11008, "kind": "llama", "batch": 1, "seq": 4096},
    {"name": "gpt2-xl", "hidden": 1600, "heads": 25, "ffn": 6400, "kind": "gpt2", "batch": 4, "seq": 1024},
]


def main(argv):
    args = parse_args(argv)
    try:
        import torch
        import torch.nn.functional as F
    except ImportError:
        print("torch_layer_timings: PyTorch is not installed here; nothing measured")
        return 0
    if not torch.cuda.is_available():
        print("torch_layer_timings: no CUDA device; nothing measured")
        return 0
    from torch.nn.attention import SDPBackend, sdpa_kernel

    dev = torch.device("cuda")
    dt = torch.bfloat16

    def median(values):
        s = sorted(values)
        n = len(s)
        return s[n // 2] if n % 2 else 0.5 * (s[n // 2 - 1] + s[n // 2])

    def time_ms(fn, mode):
        """Median ms of one call of fn, `synchronized` or `pipelined` (see the module docstring)."""
        for _ in range(args.warmup):
            fn()
        torch.cuda.synchronize()
        if mode == "synchronized":
            times = []
            for _ in range(args.repeats):
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                fn()
                end.record()
                end.synchronize()
                times.append(start.elapsed_time(end))
            return median(times)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(args.repeats):
            fn()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / args.repeats

    class Layer(torch.nn.Module):
        def __init__(self, spec):
            super().__init__()
            h, f = spec["hidden"], spec["ffn"]
            self.kind, self.heads = spec["kind"], spec["heads"]
            llama = self.kind == "llama"
            self.norm1 = torch.nn.RMSNorm(h) if llama else torch.nn.LayerNorm(h)
            self.norm2 = torch.nn.RMSNorm(h) if llama else torch.nn.LayerNorm(h)
            if llama:
                self.q, self.k, self.v = (torch.nn.Linear(h, h, bias=False) for _ in range(3))
                self.o = torch.nn.Linear(h, h, bias=False)
                self.gate, self.up = torch.nn.Linear(h, f, bias=False), torch.nn.Linear(h, f, bias=False)
                self.down = torch.nn.Linear(f, h, bias=False)
            else:
                self.qkv, self.o = torch.nn.Linear(h, 3 * h), torch.nn.Linear(h, h)
                self.up, self.down = torch.nn.Linear(h, f), torch.nn.Linear(f, h)

        def attention_inputs(self, x):
            b, s, h = x.shape
            if self.kind == "llama":
                q, k, v = self.q(x), self.k(x), self.v(x)
            else:
                q, k, v = self.qkv(x).split(h, dim=-1)
            shape = (b, s, self.heads, h // self.heads)
            return [t.view(shape).transpose(1, 2) for t in (q, k, v)]

        def forward(self, x):
            b, s, h = x.shape
            q, k, v = self.attention_inputs(self.norm1(x))
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.o(a.transpose(1, 2).reshape(b, s, h))
            y = self.norm2(x)
            if self.kind == "llama":
                y = self.down(F.silu(self.gate(y)) * self.up(y))
            else:
                y = self.down(F.gelu(self.up(y), approximate="tanh"))
            return x + y

        def gemm_weights(self):
            names = ["q", "k", "v", "o", "gate", "up", "down"] if self.kind == "llama" else ["qkv", "o", "up", "down"]
            return [getattr(self, n).weight for n in names]

    backends = [("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION),
                ("efficient", SDPBackend.EFFICIENT_ATTENTION)]
    rows = []
    for spec in LAYERS:
        layer = Layer(spec).to(dev, dt)
        b, s, h = spec["batch"], spec["seq"], spec["hidden"]
        x = torch.randn(b, s, h, device=dev, dtype=dt, requires_grad=True)
        grad = torch.ones(b, s, h, device=dev, dtype=dt)

        def record(part, backend, mode, ms, flops=None, mnk=("", "", "")):
            rows.append({"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "layer": spec["name"],
                         "batch": b, "seq": s, "part": part, "attention": backend, "timing": mode,
                         "m": mnk[0], "n": mnk[1], "k": mnk[2],
                         "ms": f"{ms:.4f}", "tflops": f"{flops / ms / 1e9:.1f}" if flops else ""})

        def time_gemm(part, m, n, k):
            """One (m x k) @ (k x n) product alone, pipelined."""
            a = torch.randn(m, k, device=dev, dtype=dt)
            bt = torch.randn(n, k, device=dev, dtype=dt)  # a weight as nn.Linear stores it
            record(part, "", "pipelined", time_ms(lambda: torch.matmul(a, bt.t()), "pipelined"), 2 * m * n * k, (m, n, k))

        # GEMMs alone: every Linear's forward (x @ W^T) and backward (dgrad + wgrad) at M = b * s.
        weights = layer.gemm_weights()
        inputs = {w.shape[1]: torch.randn(b * s, w.shape[1], device=dev, dtype=dt) for w in weights}
        outs = {w.shape[0]: torch.randn(b * s, w.shape[0], device=dev, dtype=dt) for w in weights}
        gemm_flops = sum(2 * b * s * w.shape[0] * w.shape[1] for w in weights)

        def gemms_forward():
            for w in weights:
                torch.matmul(inputs[w.shape[1]], w.t())

        def gemms_backward():
            for w in weights:
                torch.matmul(outs[w.shape[0]], w)       # dgrad
                torch.matmul(outs[w.shape[0]].t(), inputs[w.shape[1]])  # wgrad

        for mode in ("synchronized", "pipelined"):
            record("gemms_forward", "", mode, time_ms(gemms_forward, mode), gemm_flops)
            record("gemms_backward", "", mode, time_ms(gemms_backward, mode), 2 * gemm_flops)
        # Each distinct GEMM: forward (M x N out), dgrad (M x K out), wgrad (N x K out, M reduced).
        for n, k in sorted({tuple(w.shape) for w in weights}):
            time_gemm("gemm_forward", b * s, n, k)
            time_gemm("gemm_dgrad", b * s, k, n)
            time_gemm("gemm_wgrad", n, k, b * s)
        if spec["name"] == LAYERS[0]["name"]:
            for n in (3840, 3968, 4096, 4224, 4352, 4480, 4608, 8192):
                time_gemm("wave_probe", 4096, n, 4096)

        q, k, v = (torch.randn(b, spec["heads"], s, h // spec["heads"], device=dev, dtype=dt, requires_grad=True)
                   for _ in range(3))
        attention_flops = 4 * b * spec["heads"] * s * s * (h // spec["heads"]) / 2  # causal: half the scores
        for name, backend in backends:
            try:
                with sdpa_kernel(backend):
                    F.scaled_dot_product_attention(q, k, v, is_causal=True).sum().backward()
            except RuntimeError as e:
                print(f"torch_layer_timings: {spec['name']}: attention backend {name} unavailable ({e})")
                continue
            with sdpa_kernel(backend):
                out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
                dout = torch.ones_like(out)
                for mode in ("synchronized", "pipelined"):
                    record("attention_forward", name, mode,
                           time_ms(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=True), mode),
                           attention_flops)
                    record("attention_backward", name, mode,
                           time_ms(lambda: torch.autograd.grad(out, (q, k, v), dout, retain_graph=True), mode),
                           2.5 * attention_flops)
                    # With autograd recording, as a training step's forward runs.
                    record("layer_forward", name, mode, time_ms(lambda: layer(x), mode))
                    record("layer_forward_backward", name, mode, time_ms(lambda: layer(x).backward(grad), mode))
        if spec["kind"] == "gpt2":
            # The MLP activation alone over (b * s, ffn), both ways a GPT-2 runs it: one fused
            # kernel (F.gelu, approximate="tanh") and HF's NewGELUActivation ("gelu_new", the
            # model's default), its tanh formula op by op (core/model/activation_function.hpp).
            u = torch.randn(b * s, spec["ffn"], device=dev, dtype=dt, requires_grad=True)
            du = torch.ones_like(u)
            c = math.sqrt(2.0 / math.pi)
            gelus = [("gelu_fused", lambda t: F.gelu(t, approximate="tanh")),
                     ("gelu_new", lambda t: 0.5 * t * (1.0 + torch.tanh(c * (t + 0.044715 * torch.pow(t, 3.0)))))]
            for part, gelu in gelus:
                for mode in ("synchronized", "pipelined"):
                    record(part + "_forward", "", mode, time_ms(lambda: gelu(u), mode))
                    record(part + "_forward_backward", "", mode, time_ms(lambda: gelu(u).backward(du), mode))
            del u, du
        del layer, x, q, k, v
        torch.cuda.empty_cache()

    with open(args.output, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0].keys()) if rows else ["layer"])
        w.writeheader()
        w.writerows(rows)
    print(f"torch_layer_timings: {len(rows)} rows in {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
