#pragma once
// The real numbers the executor computes with, all derived from a seed and a name (core::
// RandomStream), so tests can regenerate any of them to build references.
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "core/model/model_spec.hpp"
#include "gpu_backend/device/element_type.hpp"

namespace prefetchlab::gpu {

// numel values uniform in [-1, 1), stream (seed, name).
std::vector<float> seeded_values(std::uint64_t seed, std::string_view name, std::int64_t numel);
// The values as `type` would store them (bf16 rounded to nearest even), as raw bytes.
std::vector<std::byte> encode(ElementType type, const std::vector<float>& values);
std::vector<double> decode(ElementType type, const std::vector<std::byte>& bytes);

// The unsharded initial parameters of a model (index = ds_id), in `type`.
std::vector<std::vector<std::byte>> seeded_parameters(const core::ModelSpec& model, ElementType type,
                                                      std::uint64_t seed);
// What rank `rank` computes with: its activations (input of every GEMM) and the gradients
// arriving from above (output gradient of every GEMM), each `numel` elements of workspace.
std::vector<float> rank_input_values(std::uint64_t seed, int rank, std::int64_t numel);
std::vector<float> rank_upstream_gradient_values(std::uint64_t seed, int rank, std::int64_t numel);

}  // namespace prefetchlab::gpu
