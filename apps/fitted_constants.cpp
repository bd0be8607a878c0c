#include "fitted_constants.hpp"

#include <cmath>

namespace prefetchlab::apps {
namespace {

// ---- The level of DeepSpeed's host path (the host_*_us terms) -------------------------------
// Every DeepSpeed host term is a recorded cost scaled by one anchor: a torch-level collective
// call that allocates its output costs ~115 us on a GPU server (core/hardware/calibration.hpp).
// The anchor was set from the host cases' measurements, so it is refitted on them.
bool fits_host_level(const FidelityCase& c) { return c.kind == FidelityKind::kHost; }

void scale_host_terms(core::CalibrationConstants& calibration, double factor) {
  for (const core::HostTerm& term : core::host_terms()) {
    auto& value = calibration.*term.field;
    value = static_cast<std::int64_t>(std::llround(static_cast<double>(value) * factor));
  }
}

void scale_host_level(FidelityCase& c, double factor) {
  if (c.host) scale_host_terms(c.host->profile.calibration, factor);
  if (c.scenario) scale_host_terms(c.scenario->cluster.calibration, factor);
}

// ---- A host-assisted network's latency per crossing (network.transport_latency_us) ----------
// Fitted to the multi-node collective cases of the one such network in the corpus (A3 Mega,
// GPUDirect-TCPXO): the profile holds the value, so the cases that run on it are its data.
bool on_tcp_class_network(const core::HardwareProfile& profile) {
  return profile.network && profile.network->transport_latency_ns > 0;
}

bool fits_transport_latency(const FidelityCase& c) {
  return c.kind == FidelityKind::kCollective && c.collective->nodes > 1 && on_tcp_class_network(c.collective->profile);
}

void scale_latency(core::HardwareProfile& profile, double factor) {
  if (on_tcp_class_network(profile)) profile.network->transport_latency_ns *= factor;
}

void scale_transport_latency(FidelityCase& c, double factor) {
  if (c.collective) scale_latency(c.collective->profile, factor);
  if (c.host) scale_latency(c.host->profile, factor);
  if (c.scenario) scale_latency(c.scenario->cluster.hardware, factor);
}

// Corpus sources that fixed constants rest on (as the cases' `source:` spells them).
constexpr std::string_view kRingNetSources[] = {
    "https://github.com/NVIDIA/nccl/issues/1218",
    "https://github.com/NVIDIA/nccl/issues/1229",
};
constexpr std::string_view kShmHopSources[] = {
    "https://github.com/NVIDIA/nccl/issues/1530",
    "https://github.com/Anthony-Hoo/Anthony-Hoo.github.io/blob/main/posts/AutoDL_Multi-GPU_Interconnection_Test.md",
};

const FittedConstant kConstants[] = {
    {"host_*_us (DeepSpeed's host terms)", "115 us per torch-level collective call",
     FittedData::kCorpus,
     "the host cases: torch-level collective calls on GPU servers (KuangjuX/NVSHMEM-Tutorial #23, "
     "pytorch/pytorch #138773); every recorded term scales with it",
     &fits_host_level, &scale_host_level, {}},
    {"network.transport_latency_us", "36 us (A3 Mega, GPUDirect-TCPXO)", FittedData::kCorpus,
     "the multi-node collective cases on a host-assisted network (MG-Cafe/TCPXO-Enabled-A3-Mega-H100-"
     "Benchmarks, lessizzmore/create-a3mega-ztan-fork)",
     &fits_transport_latency, &scale_transport_latency, {}},
    {"gemm_efficiency x 0.966 (GEMMs at a model's own shapes)", "0.966 of MAMF", FittedData::kOneMachine,
     "one H200 server (PyTorch 2.11): 8192^3, two Llama-2-7B layers' and a GPT-2-XL layer's GEMMs",
     nullptr, nullptr, {}},
    {"sustained_clock_fraction", "0.842 Hopper, 0.822 Blackwell, 1 elsewhere", FittedData::kOneMachine,
     "one H200 and one B200: mamf-finder's sustained against burst GEMM rate (stas00/ml-engineering "
     "compute/accelerator/README.md, branch fast-mamf)",
     nullptr, nullptr, {}},
    {"gemm_backward_rate_ratio", "0.853", FittedData::kOneMachine,
     "one H200 server: a Llama-2-7B layer's forward and backward", nullptr, nullptr, {}},
    {"forward_op_host_us, backward_op_host_us", "38 us, 68 us", FittedData::kOneMachine,
     "one H200 server: GPT-2-small and BERT-base layers, host-bound", nullptr, nullptr, {}},
    {"GEMM volume curve (gemm_half_volume_mnk)", "2.54e9 x SMs / 132", FittedData::kOneMachine,
     "one H100's torch.matmul sweep (zzc0721/torch-performance-test-data #79)", nullptr, nullptr, {}},
    {"ring NET step latency (multi-node rings)", "2.7 / 4.0 / 14.0 us (LL / LL128 / Simple)",
     FittedData::kPublicSeries,
     "NVIDIA/nccl #812, #1368, #1218, #1229: the last two are corpus sources", nullptr, nullptr,
     kRingNetSources},
    {"SHM extra hop (PCIe without P2P)", "1.5 us per ring step", FittedData::kPublicSeries,
     "NVIDIA/nccl #1530 and Anthony-Hoo's AutoDL test: both corpus sources", nullptr, nullptr, kShmHopSources},
};

}  // namespace

const char* fitted_data_name(FittedData data) {
  switch (data) {
    case FittedData::kCorpus: return "corpus";
    case FittedData::kOneMachine: return "one machine";
    case FittedData::kPublicSeries: return "public series";
  }
  return "?";
}

std::span<const FittedConstant> fitted_constants() { return kConstants; }

}  // namespace prefetchlab::apps
