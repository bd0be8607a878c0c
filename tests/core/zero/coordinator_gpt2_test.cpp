// core::Coordinator on GPT-2 small's real module tree (models/gpt2-small.yaml): gathers per
// iteration, phase and kind, and releases, at prefetch buckets 5e7 / 1e6 / 0, each with
// max_reuse_distance 0 and 1e9 (max_live 1e9, world size 8, default persistence thresholds).
// Every expected number is derived below from the rules of DeepSpeed's coordinator (docs/architecture.md) and
// GPT-2 small's shapes; none was copied from a run.
//
// ---- The model as ZeRO-3 sees it (core/model/gpt2_model.cpp, HF GPT2LMHeadModel) ----------------
// Parameters (ds_id order): wte 50257·768 = 38,597,376 (tied: lm_head uses it too),
// wpe 1024·768 = 786,432, then per layer ln_1 (w 768, b 768), c_attn (w 768·2304 = 1,769,472,
// b 2,304), attn.c_proj (w 768·768 = 589,824, b 768), ln_2 (768, 768), c_fc (w 768·3072 =
// 2,359,296, b 3,072), mlp.c_proj (w 3072·768 = 2,359,296, b 768); ln_f (768, 768).
// 2 + 12·12 + 2 = 148 parameters, 124,439,808 elements.
// Persistence (threshold 1e5, model threshold INT64_MAX): every bias and LayerNorm tensor
// (≤ 3,072) is persistent, wpe (786,432) and the weights are not.
//   non-persistent: wte, wpe and 4 weights per layer = 2 + 48 = 50 params,
//     per layer Wl = 1,769,472 + 589,824 + 2,359,296 + 2,359,296 = 7,077,888,
//     N = 38,597,376 + 786,432 + 12·7,077,888 = 124,318,464;
//   persistent: 8 per layer + ln_f = 98 params,
//     per layer 1,536 + 2,304 + 768 + 1,536 + 3,072 + 768 = 9,984,
//     P = 12·9,984 + 1,536 = 121,344  (N + P = 124,439,808).
// Padding: W = 8 and every numel above is a multiple of 768 = 8·96, so ceil(numel/8)·8 = numel
// and each gather's padded_numel equals its numel (checked against the formula).
//
// Modules whose hooks fire, pre-order (= forward step): 0 root, 1 transformer, 2 wte, 3 wpe,
// 4 drop, layer i at 5+12i: block, ln_1, attn, c_attn, c_proj, resid_dropout, ln_2, mlp,
// c_fc, act, mlp.c_proj, dropout (+0..+11); 149 ln_f, 150 lm_head: 151 modules. Backward
// (pre-backward, children reversed, post-backward) continues the trace at 151: root, 152
// lm_head, 153 transformer, 154 ln_f, layer i at 155+12(11−i) in the order block, mlp,
// dropout, mlp.c_proj (+3), act, c_fc (+5), ln_2, attn, resid_dropout, c_proj (+9), c_attn
// (+10), ln_1; then drop 299, wpe 300, wte 301. Trace: 302 steps. A module fetched at step s
// is released (post-hook) with step_id s+1 for a leaf, later for a container.
// Modules with parameters: wte, wpe, 6 per layer (ln_1, c_attn, c_proj, ln_2, c_fc,
// mlp.c_proj), ln_f, lm_head = 76.
//
// ---- Iteration 1 (RECORD; identical in all six configurations) -------------------------------
// Nothing is resident at the start (the optimizer has not yet re-gathered persistent params);
// RECORD has no prefetch and releases every direct param, persistent ones included,
// at each post-hook. So each module with params gathers all of them on demand, in one
// coalesced bf16 gather, in both passes, and wte is gathered twice per pass (wte, lm_head):
//   forward on-demand = 76 gathers, 124,439,808 + 38,597,376 = 163,037,184 elements;
//   forward releases  = 148 + 1 (wte again) = 149 params, 163,037,184 elements;
//   backward: the same 76 / 163,037,184 gathers; releases skip wpe and wte's own module,
//   whose post-backward hook never fires (fed only token ids; ModuleSpec::post_backward_hook_fires):
//   147 params, 163,037,184 − 39,383,808 = 123,653,376 (lm_head still releases wte once).
// Optimizer step: release_and_reset_all releases what is still resident, wte and wpe
// (2 params, 39,383,808), then the persistent re-gather: one gather of the 98 persistent
// params, 121,344 elements.
//
// ---- Iterations 2–4 (COMPLETE) ---------------------------------------------------------------
// Each starts with exactly the 98 persistent params resident (re-gathered by the previous
// step), nothing in flight, n_available 0, queue = full parameter trace. Persistent entries are
// AVAILABLE and popped for free; persistent params are never released in COMPLETE.
// With max_live 1e9 the budget is always the bucket (n_available ≤ 182.6M < 1e9 − bucket).
// Optimizer step: every non-persistent param but wte and wpe was released by its last backward
// post-hook (see below; theirs never fires), so release_and_reset_all releases the 98
// persistent ones and those two: 100 params, 121,344 + 39,383,808, then one persistent
// re-gather of 98 params, 121,344. The state after the step equals the state after
// iteration 1's step, so iterations 3 and 4 repeat iteration 2 exactly.
#include <gtest/gtest.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <ostream>
#include <string>
#include <variant>
#include <vector>

#include "core/zero/coordinator.hpp"
#include "core/model/model_config.hpp"
#include "core/zero/persistence.hpp"
#include "tests/core/zero/coordinator_driver.hpp"

namespace pc = prefetchlab::core;
using pc::GatherKind;
using pc::Phase;
using prefetchlab::testing::Driver;
using prefetchlab::testing::Source;

namespace {

constexpr std::int64_t kHuge = 1'000'000'000;
constexpr int kWorld = 8;
constexpr int kIterations = 4;

// Where a plan action happened: forward (reset_step included), backward, or the optimizer step.
enum Stage { kForward, kBackward, kStep, kStages };
constexpr std::array<const char*, kStages> kStageNames{"forward", "backward", "step"};

struct Count {
  int n = 0;
  std::int64_t numel = 0;
  friend bool operator==(const Count&, const Count&) = default;
};

// One stage of one iteration: gathers per kind and released params.
struct StageTally {
  Count on_demand, prefetch, regather, released;
  friend bool operator==(const StageTally&, const StageTally&) = default;
};

using IterationTally = std::array<StageTally, kStages>;

std::ostream& operator<<(std::ostream& os, const Count& c) {
  return os << "{" << c.n << ", " << c.numel << "}";
}
std::ostream& operator<<(std::ostream& os, const StageTally& t) {
  return os << "on_demand " << t.on_demand << " prefetch " << t.prefetch << " regather "
            << t.regather << " released " << t.released;
}

pc::ModelSpec gpt2_small() {
  return pc::load_model_file(PREFETCHLAB_SOURCE_DIR "/models/gpt2-small.yaml", pc::DType::kBF16);
}

pc::CoordinatorConfig config(const pc::ModelSpec& model, std::int64_t bucket,
                             std::int64_t reuse) {
  pc::CoordinatorConfig c;
  c.prefetch_bucket_numel = bucket;
  c.max_reuse_distance_numel = reuse;
  c.max_live_numel = kHuge;
  c.world_size = kWorld;
  c.persistent = pc::persistent_params(model, 100'000, std::numeric_limits<std::int64_t>::max());
  return c;
}

// Runs 4 iterations with an optimizer step after each and tallies the log. Also checks that
// every gather pads each param to a multiple of the world size.
std::vector<IterationTally> run(const pc::ModelSpec& model, std::int64_t bucket,
                                std::int64_t reuse) {
  Driver d(model, config(model, bucket, reuse));
  for (int i = 0; i < kIterations; ++i) {
    d.iteration();
    d.optimizer_step();
  }
  std::vector<IterationTally> out(kIterations + 1);
  for (const auto& e : d.events()) {
    const Stage stage = e.source == Source::kOptimizer ? kStep
                        : e.phase == Phase::kBackward  ? kBackward
                                                       : kForward;
    StageTally& t = out[static_cast<std::size_t>(e.iteration)][stage];
    if (const auto* g = std::get_if<pc::Gather>(&e.action)) {
      std::int64_t padded = 0;
      for (const int p : g->param_ids) {
        const std::int64_t numel = model.params[static_cast<std::size_t>(p)].numel;
        padded += (numel + kWorld - 1) / kWorld * kWorld;
      }
      EXPECT_EQ(g->padded_numel, padded);
      EXPECT_EQ(g->padded_numel, g->numel);  // GPT-2 small: every numel is a multiple of 8
      EXPECT_TRUE(g->collective);
      Count& c = g->kind == GatherKind::kOnDemand   ? t.on_demand
                 : g->kind == GatherKind::kPrefetch ? t.prefetch
                                                    : t.regather;
      ++c.n;
      c.numel += g->numel;
    } else if (const auto* r = std::get_if<pc::Release>(&e.action)) {
      t.released.n += static_cast<int>(r->param_ids.size());
      t.released.numel += r->numel;
    }
  }
  return out;
}

std::int64_t gathered(const IterationTally& it) {
  std::int64_t numel = 0;
  for (const auto& s : it) numel += s.on_demand.numel + s.prefetch.numel + s.regather.numel;
  return numel;
}

constexpr std::int64_t kWte = 38'597'376;
constexpr std::int64_t kWpe = 786'432;
constexpr std::int64_t kLayerWeights = 7'077'888;  // Wl
constexpr std::int64_t kNonPersistent = 124'318'464;  // N
constexpr std::int64_t kPersistent = 121'344;  // P
constexpr Count kNone{};

}  // namespace

// The shapes the derivation rests on.
TEST(CoordinatorGpt2, ModelShapesAndPersistence) {
  const pc::ModelSpec model = gpt2_small();
  ASSERT_EQ(model.modules.size(), 151u);
  ASSERT_EQ(model.params.size(), 148u);
  std::map<std::string, std::int64_t> numel;
  for (const auto& p : model.params) numel[p.name] = p.numel;
  EXPECT_EQ(numel["transformer.wte.weight"], kWte);
  EXPECT_EQ(numel["transformer.wpe.weight"], kWpe);
  EXPECT_EQ(numel["transformer.h.0.attn.c_attn.weight"] + numel["transformer.h.0.attn.c_attn.bias"],
            1'771'776);
  EXPECT_EQ(numel["transformer.h.0.attn.c_proj.weight"] + numel["transformer.h.0.attn.c_proj.bias"],
            590'592);
  EXPECT_EQ(numel["transformer.h.0.mlp.c_fc.weight"] + numel["transformer.h.0.mlp.c_fc.bias"],
            2'362'368);
  EXPECT_EQ(numel["transformer.h.0.mlp.c_proj.weight"] + numel["transformer.h.0.mlp.c_proj.bias"],
            2'360'064);
  EXPECT_EQ(model.modules[150].name, "lm_head");
  EXPECT_EQ(model.modules[150].param_ids, model.modules[2].param_ids);  // tied to wte
  const auto persistent =
      pc::persistent_params(model, 100'000, std::numeric_limits<std::int64_t>::max());
  Count np, pp;
  for (std::size_t i = 0; i < model.params.size(); ++i) {
    Count& c = persistent[i] ? pp : np;
    ++c.n;
    c.numel += model.params[i].numel;
  }
  EXPECT_EQ(np, (Count{50, kNonPersistent}));
  EXPECT_EQ(pp, (Count{98, kPersistent}));
  EXPECT_EQ(kNonPersistent, kWte + kWpe + 12 * kLayerWeights);
}

TEST(CoordinatorGpt2, GathersPerIterationPhaseAndKind) {
  const pc::ModelSpec model = gpt2_small();

  // Iteration 1 (RECORD), every configuration; see the file comment.
  constexpr std::int64_t kRecordPass = 124'439'808 + kWte;  // 163,037,184
  // wte and wpe: never released by a post-backward hook, so by the optimizer step instead.
  constexpr std::int64_t kEmbeddings = kWte + kWpe;  // 39,383,808
  const IterationTally record{{
      {{76, kRecordPass}, kNone, kNone, {149, kRecordPass}},
      {{76, kRecordPass}, kNone, kNone, {147, kRecordPass - kEmbeddings}},
      {kNone, kNone, {1, kPersistent}, {2, kEmbeddings}},
  }};
  // Optimizer step of every later iteration: 98 persistent params and the two embeddings
  // released, then the persistent ones re-gathered.
  const StageTally later_step{kNone, kNone, {1, kPersistent}, {100, kPersistent + kEmbeddings}};
  // Backward of every configuration except bucket 0 / reuse 0: every non-persistent param is
  // resident (kept or prefetched) at backward start, so nothing is gathered; each is released
  // once, at its last backward use (wte at step 301, not at lm_head's 152: a later use is
  // either already passed by a scan, "most recent step" 301 > 153, or within the reuse
  // distance), except wte and wpe, released at the step: 48 params, N − 39,383,808.
  const StageTally backward_kept{kNone, kNone, kNone, {48, kNonPersistent - kEmbeddings}};

  struct Row {
    std::int64_t bucket;
    std::int64_t reuse;
    StageTally forward;  // iteration 2 (= 3 = 4)
    StageTally backward;
    // Elements gathered again in an iteration after the param's first gather of that
    // iteration (the persistent re-gather aside).
    std::int64_t regathered;
  };
  const std::vector<Row> rows{
      // bucket 5e7. Step 0 (root) round, budget min(1e9 − 0, 5e7) = 5e7, pops in trace order
      //   and selects wte + wpe = 39,383,808, layer 0's Wl → 46,461,696, layer 1 c_attn
      //   → 48,231,168, c_proj → 48,820,992 (< 5e7, go on), c_fc → 51,180,288 ≥ 5e7: 9 params.
      // Step 1 (transformer): layer 1 mlp.c_proj 2,359,296 + layers 2–7 6·Wl = 44,826,624,
      //   layer 8 c_attn, c_proj, c_fc → 49,545,216 (< 5e7), mlp.c_proj → 51,904,512: 29 params.
      // Step 2 (wte): layers 9–11 3·Wl = 21,233,664 < 5e7, so the round pops the rest of the
      //   queue: ln_f, lm_head's wte@150 and every backward entry are resident, in flight or
      //   already selected, hence free: 12 params, queue empty.
      //   3 gathers, 51,180,288 + 51,904,512 + 21,233,664 = 124,318,464 = N.
      // Every pop set "most recent step fetched for" to the param's last (backward) use, so
      // no forward post-hook (the first is wte's, at step 3) has a candidate, whatever the
      // reuse distance: 0 releases, and the two reuse rows are identical.
      {50'000'000, kHuge, {kNone, {3, kNonPersistent}, kNone, kNone}, backward_kept, 0},
      {50'000'000, 0, {kNone, {3, kNonPersistent}, kNone, kNone}, backward_kept, 0},
      // bucket 1e6, reuse 1e9. Rounds pop until ≥ 1e6: step 0 {wte}; step 1 {wpe 786,432 <
      //   1e6, layer-0 c_attn}; step 2 {layer-0 c_proj 589,824, c_fc}; step 3 {layer-0
      //   mlp.c_proj}; then 3 rounds per layer ({c_attn}, {c_proj, c_fc}, {mlp.c_proj}) for
      //   layers 1–11 at steps 4–36: 4 + 33 = 37 rounds, always ahead of use (layer i is
      //   first used at step 8+12i), so no on-demand gather. Step 37's round finds the rest of
      //   the queue resident or in flight (nothing released yet, see below): empty, no gather.
      //   37 gathers, N. Forward post-hooks before step 37 do have candidates (most recent
      //   step = the forward use), but the 1e9 scan of the remaining trace (< 2·163M elements)
      //   finds each param's backward use: 0 releases. Nothing re-gathered.
      {1'000'000, kHuge, {kNone, {37, kNonPersistent}, kNone, kNone}, backward_kept, 0},
      // bucket 1e6, reuse 0. Same 37 rounds at steps 0–36, but reuse 0 scans nothing, so each
      //   weight is released at its forward post-hook while its "most recent step" is still
      //   its forward step. Released before step 38's round: wte (step 3), wpe (4), layers 0
      //   and 1 (4 weights each, by step 28), layer 2 c_attn (33), c_proj (34), c_fc (fetched
      //   at 37, released with step_id 38): 13 params, 38,597,376 + 786,432 + 2·7,077,888 +
      //   (1,769,472 + 589,824 + 2,359,296) = 58,258,176.
      //   Step 37 round: wte@150 is not available again: {wte}.
      //   Step 38 round: wte@152, ln_f, layers 11..3 and layer 2's mlp.c_proj are in flight
      //   (prefetched, not yet used) so popped for free, which sets their most recent step to
      //   their backward use: they are never released in forward. Layer 2 c_fc (released)
      //   is selected: {c_fc}. Then step 39 {layer-2 c_proj, c_attn}, 40 {layer-1
      //   mlp.c_proj}, 41 {c_fc}, 42 {c_proj, c_attn}, 43–45 the same for layer 0, 46
      //   {wpe 786,432, then wte@301 in flight: queue empty}: 1 + 9 rounds.
      //   37 + 10 = 47 gathers, N + 58,258,176 = 182,576,640: exactly the 13 released
      //   params are gathered a second time, all before backward.
      //   (The DeepSpeed oracle recording issues 49 / 187,295,232 here because its GPT-2-shaped
      //   model has no transformer wrapper and no dropout modules, so its look-ahead crosses
      //   into backward at layer 3; the same coordinator on that module tree reproduces it
      //   call by call: deepspeed_oracle_test.cpp.)
      {1'000'000, 0,
       {kNone, {47, kNonPersistent + 58'258'176}, kNone, {13, 58'258'176}}, backward_kept,
       58'258'176},
      // bucket 0, reuse 1e9: no prefetch. Forward fetches each non-persistent param on demand
      //   at its first use: 12 layers × 4 weights + wte + wpe = 50 gathers, N; lm_head finds
      //   wte resident. The 1e9 scan keeps each param until its backward use: 0 releases.
      {0, kHuge, {{50, kNonPersistent}, kNone, kNone, kNone}, backward_kept, 0},
      // bucket 0, reuse 0: each non-persistent param is released after every use and
      //   gathered on demand at every use. Forward: 48 weights + wte + wpe + wte again at
      //   lm_head = 51 gathers, N + 38,597,376 = 162,915,840, and the same 51 releases.
      //   Backward gathers as forward (lm_head's wte, 48 weights, wpe, wte): 51 / 162,915,840;
      //   it releases lm_head's wte and the 48 weights, not wpe or wte's own module (their
      //   post-backward hook never fires): 49 / 162,915,840 − 39,383,808.
      {0, 0, {{51, kNonPersistent + kWte}, kNone, kNone, {51, kNonPersistent + kWte}},
       {{51, kNonPersistent + kWte}, kNone, kNone, {49, kNonPersistent + kWte - kEmbeddings}},
       // re-gathered: wte at lm_head in forward, then all of backward (N + wte again).
       kWte + kNonPersistent + kWte},
  };

  for (const auto& row : rows) {
    SCOPED_TRACE("bucket " + std::to_string(row.bucket) + " reuse " + std::to_string(row.reuse));
    const auto tally = run(model, row.bucket, row.reuse);
    for (int s = 0; s < kStages; ++s) {
      SCOPED_TRACE(std::string("iteration 1 ") + kStageNames[static_cast<std::size_t>(s)]);
      EXPECT_EQ(tally[1][static_cast<std::size_t>(s)], record[static_cast<std::size_t>(s)]);
    }
    EXPECT_EQ(tally[2][kForward], row.forward);
    EXPECT_EQ(tally[2][kBackward], row.backward);
    EXPECT_EQ(tally[2][kStep], later_step);
    // Steady state: the trace holds and every iteration starts from the same state.
    EXPECT_EQ(tally[3], tally[2]);
    EXPECT_EQ(tally[4], tally[2]);
    // Gathered numel per iteration and the reuse distance. With 1e9 nothing is re-gathered
    //: N once (on demand or prefetched) + P re-gathered after the step =
    // 124,439,808, the model itself, and backward gathers nothing. With 0 the re-gathers are
    // the params released before a later use: none at 5e7 (the scan got there first),
    // 58,258,176 at 1e6, wte + N + wte at 0.
    EXPECT_EQ(gathered(tally[2]), kNonPersistent + kPersistent + row.regathered);
    if (row.reuse == kHuge) {
      EXPECT_EQ(row.regathered, 0);
      EXPECT_EQ(tally[2][kBackward].on_demand, kNone);
      EXPECT_EQ(tally[2][kBackward].prefetch, kNone);
    }
  }
}
