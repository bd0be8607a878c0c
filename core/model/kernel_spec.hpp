#pragma once
// One GPU kernel a module's own forward runs in PyTorch eager mode, and what autograd runs for it
// in backward. A module's own work is a list of these (ModuleSpec::kernels), in launch order, so
// compute models can price each with its own ceiling and charge a launch per kernel.
//
// Kinds, each priced against a different measured ceiling (sim/cost/compute_model.hpp):
//   gemm       a (batched) matrix multiply: dense tensor peak x GEMM efficiency x shape fraction;
//   attention  a fused attention kernel (FlashAttention in PyTorch's sdpa, or the flash-attn
//              package): dense peak x the attention kernels' measured efficiency;
//   memory     everything else (norms, casts, activations, adds, copies, softmax, dropout, loss):
//              bytes moved at the measured memory bandwidth.
#include <cstdint>
#include <string>

#include "core/model/token_scaled.hpp"

namespace prefetchlab::core {

enum class KernelKind { kGemm, kAttention, kMemory };
const char* kernel_kind_name(KernelKind kind);

// How attention runs (HF's attn_implementation): eager materialises the s x s scores and
// probabilities (and keeps them for backward); sdpa is torch's scaled_dot_product_attention,
// which dispatches to its FlashAttention-2 backend for 16-bit inputs; flash is the flash-attn
// package (HF "flash_attention_2"), which takes the (b, s, heads, d) layout with no transposes;
// flash3 is FlashAttention-3 (HF "flash_attention_3", the flash-attn package's hopper/ build),
// the same layout and kernels, written for Hopper's asynchronous tensor cores and TMA, so it
// runs only on sm90 GPUs (Shah et al. 2024, arXiv:2407.08608).
enum class AttentionImpl { kEager, kSdpa, kFlash, kFlash3 };
const char* attention_impl_name(AttentionImpl impl);
// Whether attention runs the flash-attn package's kernels (flash or flash3): (b, s, heads, d)
// layout, grouped-query attention without repeating K and V.
bool is_flash_attn_package(AttentionImpl impl);

// Which fused attention kernel a kAttention kernel is, each priced at its own measured rates.
enum class AttentionKernel : std::uint8_t { kFlash2, kFlash3 };

struct KernelSpec {
  std::string op;  // what runs, as a profiler would name it: "rms_norm.pow", "q_proj.mm", ...
  KernelKind kind = KernelKind::kMemory;
  TokenScaled flops;  // forward floating-point operations
  TokenScaled bytes;  // forward device-memory traffic
  // GEMMs: the problem volume M*N*K as a function of the micro-batch (the shape-efficiency curve's
  // input). For a Linear, per_token = in*out (M = tokens); for eager attention's batched QK^T and
  // PV, per_token_per_position = hidden (M*N*K = b*heads*s*s*head_dim).
  TokenScaled gemm_volume;
  // GEMMs: the output's columns N and the reduction's length K of one launch (a Linear: its out
  // and in features), so that M = volume / (N K) and the output's tiles can be counted (tile and
  // wave quantization: sim/cost/compute_model.hpp). 0 = not known (eager attention's batched GEMMs):
  // priced by volume alone.
  std::int64_t gemm_n = 0;
  std::int64_t gemm_k = 0;
  // kAttention: which fused kernel (FlashAttention-2 in sdpa and flash, FlashAttention-3).
  AttentionKernel attention_kernel = AttentionKernel::kFlash2;
  // Backward: how many kernels autograd launches for this one, and their total FLOPs and bytes as
  // multiples of the forward's. A Linear is 2 GEMMs of its forward's FLOPs each (grad input, grad
  // weight); an elementwise op reads the saved input and the output gradient and writes the input
  // gradient; a pass-through (a residual add's gradient) is 0 kernels.
  int backward_kernels = 1;
  double backward_flops_factor = 1.0;
  double backward_bytes_factor = 1.5;
};

}  // namespace prefetchlab::core
