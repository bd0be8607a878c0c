#include "gpu_backend/executor/seeded_data.hpp"

#include <cstring>
#include <string>

#include "core/scenario/random_stream.hpp"
#include "gpu_backend/device/host_kernels.hpp"

namespace prefetchlab::gpu {

std::vector<float> seeded_values(std::uint64_t seed, std::string_view name, std::int64_t numel) {
  core::RandomStream stream(seed, name);
  std::vector<float> values(static_cast<std::size_t>(numel));
  for (float& v : values) v = static_cast<float>(2.0 * stream.uniform() - 1.0);
  return values;
}

std::vector<std::byte> encode(ElementType type, const std::vector<float>& values) {
  std::vector<double> wide(values.begin(), values.end());
  std::vector<std::byte> bytes(values.size() * static_cast<std::size_t>(element_bytes(type)));
  host::store_from_double(type, wide.data(), static_cast<std::int64_t>(values.size()), bytes.data());
  return bytes;
}

std::vector<double> decode(ElementType type, const std::vector<std::byte>& bytes) {
  const auto numel = static_cast<std::int64_t>(bytes.size()) / element_bytes(type);
  std::vector<double> values(static_cast<std::size_t>(numel));
  host::load_as_double(type, bytes.data(), numel, values.data());
  return values;
}

std::vector<std::vector<std::byte>> seeded_parameters(const core::ModelSpec& model, ElementType type,
                                                      std::uint64_t seed) {
  std::vector<std::vector<std::byte>> params;
  params.reserve(model.params.size());
  for (const auto& param : model.params) params.push_back(encode(type, seeded_values(seed, "param/" + param.name, param.numel)));
  return params;
}

std::vector<float> rank_input_values(std::uint64_t seed, int rank, std::int64_t numel) {
  return seeded_values(seed, "input/rank" + std::to_string(rank), numel);
}

std::vector<float> rank_upstream_gradient_values(std::uint64_t seed, int rank, std::int64_t numel) {
  return seeded_values(seed, "upstream_gradient/rank" + std::to_string(rank), numel);
}

}  // namespace prefetchlab::gpu
