#include "collective_command.hpp"

#include <limits>
#include <cctype>
#include <cstdio>
#include <iostream>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "command_context.hpp"
#include "core/input/closest_match.hpp"
#include "core/hardware/hardware_profile.hpp"
#include "core/input/input_error.hpp"
#include "core/hardware/nccl_tests_log.hpp"
#include "core/input/size_value.hpp"
#include "nccl_tests_table.hpp"
#include "sim/cost/nccl_tuner_cost_model.hpp"

namespace prefetchlab::apps {
namespace {

struct CollectiveOptions {
  std::string hardware;
  std::string op;
  int ranks = 0;
  std::optional<int> nodes;
  std::string min_bytes = "8";
  std::string max_bytes = "8GiB";
  int factor = 2;
  std::string algo = "auto";
  std::string nccl_algo;   // the job's NCCL_ALGO list (empty: unset)
  std::string nccl_proto;  // the job's NCCL_PROTO list
  // nccl-tests' default type is float; ZeRO-3 moves bf16 parameters and gradients, so this
  // command defaults to bfloat16 (-d bfloat16). The size column does not depend on it, only
  // the count and the rounding of sizes to whole elements.
  std::string type = "bfloat16";
};

// NCCL's choice under the job's NCCL_ALGO / NCCL_PROTO; one that leaves nothing to run is bad input.
sim::NcclChoice choose_or_explain(const sim::NcclTunerCostModel& model, const sim::CollectiveShape& shape,
                                  sim::AlgorithmFilter filter, const sim::NcclAllowed& allowed) {
  try {
    return model.choose(shape, filter, allowed);
  } catch (const std::invalid_argument& e) {
    if (allowed.everything()) throw;
    throw core::InputError({"<command line>", 0}, "--nccl-algo/--nccl-proto", e.what(),
                           "lists that leave an algorithm and protocol NCCL runs here");
  }
}

// nccl-tests' own size syntax as well: one trailing K, M or G (either case) is 1024, 1024^2 or
// 1024^3 (parsesize in NVIDIA/nccl-tests src/common.cu), so `-b 1K -e 8G` reads as it does there.
std::optional<std::int64_t> nccl_tests_size(const std::string& text) {
  if (text.size() < 2) return std::nullopt;
  const char unit = static_cast<char>(std::toupper(static_cast<unsigned char>(text.back())));
  const int shift = unit == 'K' ? 10 : unit == 'M' ? 20 : unit == 'G' ? 30 : 0;
  if (shift == 0 || !std::isdigit(static_cast<unsigned char>(text[text.size() - 2]))) return std::nullopt;
  const auto count = core::parse_count(text.substr(0, text.size() - 1));
  if (!count || *count > (std::numeric_limits<std::int64_t>::max() >> shift)) return std::nullopt;
  return *count << shift;
}

std::int64_t size_option(const std::string& flag, const std::string& text) {
  auto v = core::parse_bytes(text);
  if (!v) v = nccl_tests_size(text);
  if (!v) {
    throw core::InputError({"<command line>", 0}, flag, "is " + core::quoted_input(text),
                           "a byte size such as 8, 5e7, 512MiB or 70GiB, or as nccl-tests writes it (1K, 64M, 8G)");
  }
  return *v;
}

std::string bytes_text(std::int64_t b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  std::int64_t v = b;
  while (u < 4 && v >= 1024 && v % 1024 == 0) {
    v /= 1024;
    ++u;
  }
  return std::to_string(v) + " " + units[u];
}

struct Row {
  std::int64_t bytes;
  std::int64_t count;
  sim::NcclChoice choice;
};

int run_collective(const CollectiveOptions& o) {
  const core::BundledData bundled = bundled_data();
  const auto path = core::find_hardware_profile(o.hardware, bundled.hardware_dir);
  if (!path) {
    throw core::InputError({"<command line>", 0}, "--hardware", "'" + o.hardware + "' is neither a file nor a bundled profile",
                           "a hardware YAML path or bundled name",
                           core::closest_match(o.hardware, core::bundled_hardware_names(bundled.hardware_dir)));
  }
  const core::HardwareProfile profile = core::load_hardware_profile(*path);
  const auto op = core::parse_nccl_tests_op(o.op);
  if (!op) {
    throw core::InputError({"<command line>", 0}, "--op", "is '" + o.op + "'",
                           "all_gather, reduce_scatter or all_reduce");
  }
  const auto kind = *op == core::NcclTestsOp::kAllGather       ? sim::CollectiveKind::kAllGather
                    : *op == core::NcclTestsOp::kReduceScatter ? sim::CollectiveKind::kReduceScatter
                                                               : sim::CollectiveKind::kAllReduce;
  const auto type_bytes = core::nccl_tests_type_bytes(o.type);
  if (!type_bytes) {
    throw core::InputError({"<command line>", 0}, "--type", "is '" + o.type + "'",
                           "an nccl-tests type: float, bfloat16, half, double, int8, int32, ...");
  }
  const int nodes = o.nodes.value_or((o.ranks + profile.gpus_per_node - 1) / profile.gpus_per_node);
  if (o.ranks < 2) {
    throw core::InputError({"<command line>", 0}, "--ranks", "is " + std::to_string(o.ranks), "at least 2");
  }
  if (nodes < 1 || o.ranks % nodes != 0 || o.ranks / nodes > profile.gpus_per_node ||
      nodes > profile.max_nodes) {
    throw core::InputError({"<command line>", 0}, "--nodes",
                           std::to_string(o.ranks) + " ranks on " + std::to_string(nodes) + " nodes does not fit " +
                               profile.name,
                           "ranks spread evenly, at most " + std::to_string(profile.gpus_per_node) +
                               " per node and " + std::to_string(profile.max_nodes) + " nodes");
  }
  const std::int64_t min_bytes = size_option("--min-bytes", o.min_bytes);
  const std::int64_t max_bytes = size_option("--max-bytes", o.max_bytes);
  if (max_bytes < min_bytes) {
    throw core::InputError({"<command line>", 0}, "--max-bytes", "is below --min-bytes", "max >= min");
  }
  const sim::AlgorithmFilter filter = *sim::algorithm_filter_from_name(o.algo);  // CLI11 checked the name
  const std::optional<sim::NcclAlgorithm> only = sim::only_algorithm(filter);
  sim::NcclAllowed allowed;
  if (!o.nccl_algo.empty() && !allowed.restrict_algorithms(o.nccl_algo)) {
    throw core::InputError({"<command line>", 0}, "--nccl-algo", "is '" + o.nccl_algo + "'",
                           std::string("NCCL_ALGO's form: a comma-separated list of ") + sim::NcclAllowed::kAlgorithmNames);
  }
  if (!o.nccl_proto.empty() && !allowed.restrict_protocols(o.nccl_proto)) {
    throw core::InputError({"<command line>", 0}, "--nccl-proto", "is '" + o.nccl_proto + "'",
                           std::string("NCCL_PROTO's form: a comma-separated list of ") + sim::NcclAllowed::kProtocolNames);
  }
  const sim::NcclTunerCostModel model(profile, profile.calibration);
  if (only && !model.available({kind, 0, o.ranks, nodes}, *only)) {
    throw core::InputError({"<command line>", 0}, "--algo", o.algo + " is not available for " + o.op + " on " +
                               profile.name + " (" + model.path_description() + ", " + std::to_string(o.ranks) +
                               " ranks on " + std::to_string(nodes) + " node(s))",
                           "ring; tree for all_reduce; nvls on one node of NVSwitch Hopper or later; nvls_tree "
                           "the same across nodes for all_reduce; pat with one GPU per node for all_gather / "
                           "reduce_scatter");
  }

  // nccl-tests' sizes: min, min*factor, ... up to max; count per rank for AG/RS.
  const std::int64_t per_elem = *type_bytes * ((kind == sim::CollectiveKind::kAllReduce) ? 1 : o.ranks);
  std::vector<Row> rows;
  for (std::int64_t size = min_bytes; size <= max_bytes;) {
    const std::int64_t count = size / per_elem;
    const std::int64_t bytes = count * per_elem;
    rows.push_back({bytes, count, choose_or_explain(model, {kind, bytes, o.ranks, nodes}, filter, allowed)});
    if (size == 0 || size > max_bytes / o.factor) break;
    size *= o.factor;
  }

  std::printf("# prefetchlab collective: NCCL tuner model of %s_perf on %s, %d ranks on %d node(s), %s; "
              "ring graph %d channels x %.1f GB/s\n",
              o.op.c_str(), profile.name.c_str(), o.ranks, nodes, model.path_description().c_str(),
              model.ring_graph(o.ranks, nodes).channels, model.ring_graph(o.ranks, nodes).channel_bytes_per_s / 1e9);
  std::printf("# nThread 1 nGpus %d minBytes %lld maxBytes %lld step: %d(factor) warmup iters: 0 iters: 1 agg iters: 1 validation: 0 graph: 0\n",
              o.ranks, static_cast<long long>(min_bytes), static_cast<long long>(max_bytes), o.factor);
  std::printf("#\n# Using devices\n");
  for (int r = 0; r < o.ranks; ++r) {
    std::printf("#  Rank %2d Group  0 Pid %6d on %10s device %2d [0x00] %s\n", r, 0, ("node" + std::to_string(r / (o.ranks / nodes))).c_str(),
                r % (o.ranks / nodes), profile.gpu.model.c_str());
  }
  std::printf("#\n");
  // Which algorithm / protocol / channels per size range.
  std::string ranges;
  for (std::size_t i = 0; i < rows.size();) {
    std::size_t j = i;
    while (j + 1 < rows.size() && rows[j + 1].choice.algorithm == rows[i].choice.algorithm &&
           rows[j + 1].choice.protocol == rows[i].choice.protocol) {
      ++j;
    }
    const int ch_lo = rows[i].choice.channels;
    const int ch_hi = rows[j].choice.channels;
    if (!ranges.empty()) ranges += "; ";
    ranges += bytes_text(rows[i].bytes) + " - " + bytes_text(rows[j].bytes) + ": " +
              sim::nccl_algorithm_name(rows[i].choice.algorithm) + "/" +
              sim::nccl_protocol_name(rows[i].choice.protocol) + " " +
              (ch_lo == ch_hi ? std::to_string(ch_lo) : std::to_string(ch_lo) + "-" + std::to_string(ch_hi)) +
              " channels";
    i = j + 1;
  }
  std::printf("# Chosen algorithm/protocol/channels by size: %s\n", ranges.c_str());
  if (!rows.empty() && rows.front().choice.measured) {
    std::printf("# Times: the profile's measured_collectives curve for %s on %d ranks (calibrate --from-nccl-tests), "
                "interpolated in log-size; the choice above is the model's, for reference\n",
                o.op.c_str(), o.ranks);
  }
  std::printf("#\n");
  std::vector<NcclTestsTableRow> table;
  for (const Row& row : rows) {
    const double us = static_cast<double>(row.choice.duration_ns) / 1e3;
    table.push_back({row.bytes, row.count, us, us});  // the model has one time for both placements
  }
  print_nccl_tests_table(*op, o.ranks, o.type, table);
  return kExitOk;
}

}  // namespace

CLI::App* add_collective_command(CLI::App& app, int* exit_code) {
  auto o = std::make_shared<CollectiveOptions>();
  CLI::App* c = app.add_subcommand(
      "collective", "Predict one collective over a size sweep, printed as nccl-tests prints it");
  c->add_option("--hardware", o->hardware, "hardware profile: bundled name or YAML path")->required();
  c->add_option("--op", o->op, "all_gather, reduce_scatter or all_reduce")->required();
  c->add_option("--ranks", o->ranks, "communicator size")->required();
  c->add_option("--nodes", o->nodes, "nodes the ranks spread over (default: fewest that fit)");
  c->add_option("-b,--min-bytes", o->min_bytes, "smallest size (nccl-tests -b; e.g. 8, 5e7, 1MiB, 1K)");
  c->add_option("-e,--max-bytes", o->max_bytes, "largest size (nccl-tests -e; e.g. 8GiB, 8G)");
  c->add_option("-f,--factor", o->factor, "size multiplier between rows (nccl-tests -f)")
      ->check(CLI::Range(2, 1 << 20));
  c->add_option("--algo", o->algo, "ring, tree, nvls, nvls_tree or pat (default: NCCL's choice)")
      ->check(CLI::IsMember({"auto", "ring", "tree", "nvls", "nvls_tree", "pat"}));
  c->add_option("--nccl-algo", o->nccl_algo, "the algorithms the job's NCCL_ALGO allows (e.g. Ring,Tree)");
  c->add_option("--nccl-proto", o->nccl_proto, "the protocols the job's NCCL_PROTO allows (e.g. Simple)");
  c->add_option("-d,--type", o->type, "element type (nccl-tests -d); default bfloat16");
  c->callback([o, exit_code] { *exit_code = run_guarded([&] { return run_collective(*o); }); });
  return c;
}

}  // namespace prefetchlab::apps
