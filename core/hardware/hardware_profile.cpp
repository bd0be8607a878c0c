#include "core/hardware/hardware_profile.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <initializer_list>
#include <span>
#include <string>

#include "core/input/yaml_section.hpp"

namespace prefetchlab::core {
namespace {

// Profiles write rates in the unit their key names (GB/s, TFLOPS, Gbit/s); these turn them
// into the SI base units the rest of the code uses.
constexpr double kGigaBytesPerS = 1e9;
constexpr double kTeraFlopsPerS = 1e12;
constexpr double kGigaBitsPerS = 1e9;

// Listed in messages for keys that belong to the other link kind.
constexpr std::string_view kNvlinkKeys =
    "nvlink_generation, links_per_gpu, per_link_gb_per_s, nvswitch";
constexpr std::string_view kPcieKeys = "pcie_generation, pcie_lanes, peer_to_peer";

// A rate or peak written as a plain number > 0 (zero or negative is always a mistake: it would
// make a transfer or kernel take forever or negative time).
double read_positive(const YamlSection& s, std::string_view key, std::string_view example) {
  const std::string expected = "a number > 0 (" + std::string(example) + ")";
  const YAML::Node node = s.raw(key);
  if (!node.IsScalar()) s.fail(key, "is not a single number", expected);
  const std::string text = node.Scalar();
  double value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) {
    s.fail(key, "is '" + text + "'", expected);
  }
  if (!std::isfinite(value) || value <= 0) s.fail(key, "is " + text + ", not > 0", expected);
  return value;
}

std::optional<double> get_positive(const YamlSection& s, std::string_view key,
                                   std::string_view example) {
  if (!s.has(key)) {
    s.mark_known(key);
    return std::nullopt;
  }
  return read_positive(s, key, example);
}

// Required keys are checked after finish(), so a misspelt required key is reported as an
// unknown key with the right spelling suggested, not merely as missing.
struct RequiredKey {
  std::string_view key;
  std::string_view expected;
};
void require_keys(const YamlSection& s, std::initializer_list<RequiredKey> keys) {
  for (const auto& [key, expected] : keys) {
    if (!s.has(key)) s.fail(key, "is missing", std::string(expected));
  }
}

template <class Reader>
auto read_section_if_present(const YamlSection& parent, std::string_view key, Reader read)
    -> std::optional<decltype(read(parent))> {
  if (!parent.has(key)) {
    parent.mark_known(key);
    return std::nullopt;
  }
  return read(parent.section(key));
}

int get_small_int(const YamlSection& s, std::string_view key, int min, int max) {
  return static_cast<int>(s.get_int(key, min, min, max));
}

int get_pcie_generation(const YamlSection& s, std::string_view key) {
  // Gen3 (8 GT/s) is the oldest link any supported GPU uses; Gen6 the newest specified.
  return get_small_int(s, key, 3, 6);
}

int get_pcie_lanes(const YamlSection& s, std::string_view key) {
  const int lanes = get_small_int(s, key, 1, 16);
  if (lanes != 1 && lanes != 2 && lanes != 4 && lanes != 8 && lanes != 16) {
    s.fail(key, "is " + std::to_string(lanes) + ", not a PCIe link width", "one of 1, 2, 4, 8, 16");
  }
  return lanes;
}

constexpr std::array<std::string_view, 4> kNvlinkOnlyKeys = {"nvlink_generation", "links_per_gpu",
                                                             "per_link_gb_per_s", "nvswitch"};
constexpr std::array<std::string_view, 3> kPcieOnlyKeys = {"pcie_generation", "pcie_lanes",
                                                           "peer_to_peer"};

// Keys of the other link kind are not typos (finish() would call them unknown and suggest
// nothing useful); say which kind they belong to.
void reject_keys_of_other_kind(const YamlSection& s, std::string_view kind,
                               std::string_view other_kind,
                               std::span<const std::string_view> other_keys,
                               std::string_view own_keys) {
  for (const auto key : other_keys) {
    if (!s.has(key)) continue;
    s.fail(
        key,
        "applies only to kind: " + std::string(other_kind) + ", but kind is " + std::string(kind),
        "keys for kind " + std::string(kind) + ": " + std::string(own_keys));
  }
}

GpuSpec read_gpu(const YamlSection& s) {
  GpuSpec gpu;
  gpu.model = s.get_string("model", "");
  gpu.memory_bytes = s.get_bytes("memory", 0);
  gpu.cuda_memory_bytes = s.get_bytes("cuda_memory", 0);
  gpu.bf16_dense_flops_per_s =
      get_positive(s, "bf16_dense_tflops", "TFLOPS, e.g. 989").value_or(0) * kTeraFlopsPerS;
  if (const auto v = get_positive(s, "fp16_dense_tflops", "TFLOPS, e.g. 989")) {
    gpu.fp16_dense_flops_per_s = *v * kTeraFlopsPerS;
  }
  if (const auto v = get_positive(s, "fp32_tflops", "TFLOPS, e.g. 67")) {
    gpu.fp32_flops_per_s = *v * kTeraFlopsPerS;
  }
  gpu.memory_bandwidth_bytes_per_s =
      get_positive(s, "memory_bandwidth_gb_per_s", "GB/s, e.g. 3350").value_or(0) * kGigaBytesPerS;
  gpu.sm_count = get_small_int(s, "sm_count", 1, 100'000);
  s.finish();
  require_keys(s, {{"model", "a name, e.g. NVIDIA H100 SXM 80GB"},
                   {"memory", "a byte size > 0 (e.g. 80GiB)"},
                   {"bf16_dense_tflops", "a number > 0 (TFLOPS, e.g. 989)"},
                   {"memory_bandwidth_gb_per_s", "a number > 0 (GB/s, e.g. 3350)"},
                   {"sm_count", "a whole number >= 1"}});
  if (gpu.memory_bytes <= 0) s.fail("memory", "is 0", "a byte size > 0 (e.g. 80GiB)");
  if (gpu.cuda_memory_bytes > gpu.memory_bytes) {
    s.fail("cuda_memory", "is more than memory", "what CUDA reports on an empty device, at most memory (e.g. 81089MiB)");
  }
  return gpu;
}

std::variant<NvlinkLink, PcieLink> read_intra_node_link(const YamlSection& s) {
  enum class Kind { kNvlink, kPcie };
  if (!s.has("kind")) {
    // Without a kind every key of either kind is plausible; report typos before "missing".
    for (const auto key : kNvlinkOnlyKeys) s.mark_known(key);
    for (const auto key : kPcieOnlyKeys) s.mark_known(key);
    s.mark_known("kind");
    s.finish();
    s.fail("kind", "is missing", "one of nvlink | pcie");
  }
  const Kind kind =
      s.require_enum<Kind>("kind", {{"nvlink", Kind::kNvlink}, {"pcie", Kind::kPcie}});
  if (kind == Kind::kNvlink) {
    reject_keys_of_other_kind(s, "nvlink", "pcie", kPcieOnlyKeys, kNvlinkKeys);
    NvlinkLink link;
    link.generation = get_small_int(s, "nvlink_generation", 1, 5);
    link.links_per_gpu = get_small_int(s, "links_per_gpu", 1, 64);
    link.per_link_unidirectional_bytes_per_s =
        get_positive(s, "per_link_gb_per_s", "GB/s per link per direction, e.g. 25").value_or(0) *
        kGigaBytesPerS;
    link.nvswitch = s.get_bool("nvswitch", false);
    s.finish();
    require_keys(s, {{"nvlink_generation", "a whole number in [1, 5]"},
                     {"links_per_gpu", "a whole number in [1, 64]"},
                     {"per_link_gb_per_s", "a number > 0 (GB/s per link per direction, e.g. 25)"},
                     {"nvswitch", "true or false"}});
    return link;
  }
  reject_keys_of_other_kind(s, "pcie", "nvlink", kNvlinkOnlyKeys, kPcieKeys);
  PcieLink link;
  link.generation = get_pcie_generation(s, "pcie_generation");
  link.lanes = get_pcie_lanes(s, "pcie_lanes");
  link.peer_to_peer = s.get_bool("peer_to_peer", false);
  s.finish();
  require_keys(s, {{"pcie_generation", "a whole number in [3, 6]"},
                   {"pcie_lanes", "one of 1, 2, 4, 8, 16"},
                   {"peer_to_peer", "true or false"}});
  return link;
}

HostLink read_host_link(const YamlSection& s) {
  HostLink link;
  link.pcie_generation = get_pcie_generation(s, "pcie_generation");
  link.pcie_lanes = get_pcie_lanes(s, "pcie_lanes");
  if (const auto v = get_positive(s, "measured_host_to_device_gb_per_s", "GB/s, e.g. 55.43")) {
    link.measured_host_to_device_bytes_per_s = *v * kGigaBytesPerS;
  }
  if (const auto v = get_positive(s, "measured_device_to_host_gb_per_s", "GB/s, e.g. 55.06")) {
    link.measured_device_to_host_bytes_per_s = *v * kGigaBytesPerS;
  }
  if (const auto v = get_positive(s, "measured_bidirectional_host_to_device_gb_per_s", "GB/s, e.g. 11.2")) {
    link.measured_bidirectional_host_to_device_bytes_per_s = *v * kGigaBytesPerS;
  }
  if (const auto v = get_positive(s, "measured_bidirectional_device_to_host_gb_per_s", "GB/s, e.g. 25")) {
    link.measured_bidirectional_device_to_host_bytes_per_s = *v * kGigaBytesPerS;
  }
  link.gpus_per_switch_uplink = get_small_int(s, "gpus_per_switch_uplink", 1, 64);
  s.finish();
  require_keys(s, {{"pcie_generation", "a whole number in [3, 6]"},
                   {"pcie_lanes", "one of 1, 2, 4, 8, 16"}});
  return link;
}

NetworkSpec read_network(const YamlSection& s) {
  NetworkSpec net;
  net.nics_per_node = get_small_int(s, "nics_per_node", 1, 64);
  net.nic_bits_per_s =
      get_positive(s, "nic_gbit_per_s", "Gbit/s per NIC, e.g. 400").value_or(0) * kGigaBitsPerS;
  // Microseconds per network crossing beyond NCCL's constants (0 for InfiniBand).
  net.transport_latency_ns = s.get_double("transport_latency_us", 0, 0, 10'000) * 1e3;
  s.finish();
  require_keys(s, {{"nics_per_node", "a whole number in [1, 64]"},
                   {"nic_gbit_per_s", "a number > 0 (Gbit/s per NIC, e.g. 400)"}});
  return net;
}

}  // namespace

HardwareProfile load_hardware_profile(const std::filesystem::path& file) {
  const YamlSection root = YamlSection::load_file(file.string());
  HardwareProfile profile;
  profile.source_file = file.string();
  profile.name = root.get_string("name", file.stem().string());
  const auto gpu = read_section_if_present(root, "gpu", read_gpu);
  profile.gpus_per_node = get_small_int(root, "gpus_per_node", 1, 1024);
  const auto intra = read_section_if_present(root, "intra_node_link", read_intra_node_link);
  const auto host = read_section_if_present(root, "host_link", read_host_link);
  profile.network = read_section_if_present(root, "network", read_network);
  profile.max_nodes = get_small_int(root, "max_nodes", 1, 1'000'000);
  profile.calibration =
      read_calibration(root.section("calibration"), default_calibration(gpu ? gpu->model : ""));
  root.finish();
  require_keys(
      root,
      {{"gpu",
        "a mapping with model, memory, bf16_dense_tflops, memory_bandwidth_gb_per_s, sm_count"},
       {"gpus_per_node", "a whole number in [1, 1024]"},
       {"intra_node_link", "a mapping with kind: nvlink | pcie and that kind's keys"},
       {"host_link", "a mapping with pcie_generation and pcie_lanes"}});
  profile.gpu = *gpu;
  profile.intra_node_link = *intra;
  profile.host_link = *host;
  if (profile.max_nodes > 1 && !profile.network) {
    root.fail("max_nodes",
              "is " + std::to_string(profile.max_nodes) + " but there is no network section",
              "max_nodes: 1, or a network section with nics_per_node and nic_gbit_per_s");
  }
  return profile;
}

std::vector<std::string> bundled_hardware_names(const std::filesystem::path& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->is_regular_file(ec) && it->path().extension() == ".yaml") {
      names.push_back(it->path().stem().string());
    }
  }
  std::sort(names.begin(), names.end());
  return names;
}

std::optional<std::filesystem::path> find_hardware_profile(
    std::string_view name_or_path, const std::filesystem::path& bundled_dir) {
  const std::filesystem::path given{std::string(name_or_path)};
  std::error_code ec;
  if (std::filesystem::is_regular_file(given, ec)) return given;
  // Only a bare name (no directory part) is looked up among the bundled profiles.
  if (!name_or_path.empty() && !given.has_parent_path()) {
    const std::filesystem::path bundled = bundled_dir / (given.string() + ".yaml");
    if (std::filesystem::is_regular_file(bundled, ec)) return bundled;
  }
  return std::nullopt;
}

}  // namespace prefetchlab::core
