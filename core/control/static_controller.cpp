// `static`: the bucket never changes (what an omitted `controller:` section means, as in
// DeepSpeed, where adaptation is opt-in). It never proposes and never wants samples.
#include "core/control/prefetch_controller.hpp"

namespace prefetchlab::core {
namespace {

class StaticController final : public PrefetchController {
 public:
  using PrefetchController::PrefetchController;
  std::optional<Proposal> begin_iteration(int, TraceMode) override { return std::nullopt; }
  void apply(const Proposal&) override {}
  bool wants_samples() const override { return false; }

 private:
  std::optional<std::int64_t> on_sample(const TimingSample&) override { return std::nullopt; }
};

}  // namespace

std::unique_ptr<PrefetchController> make_static_controller(const ControllerConfig& config,
                                                           const ControllerContext& context) {
  return std::make_unique<StaticController>(config, context);
}

}  // namespace prefetchlab::core
