// The trace's span budget (output.timeline_budget): the first iteration whose spans, with every
// earlier iteration's, exceed it is left out with every later one, whichever rank recorded first.
#include <gtest/gtest.h>

#include <vector>

#include "sim/trace/trace_recorder.hpp"

namespace ps = prefetchlab::sim;

namespace {

void add_spans(ps::TraceRecorder& trace, int rank, std::int32_t iteration, int count) {
  for (int i = 0; i < count; ++i) {
    ps::TraceSpan span;
    span.rank = rank;
    span.iteration = iteration;
    span.start_ns = i;
    trace.add(span);
  }
}

std::vector<std::int32_t> iterations_kept(const ps::TraceRecorder& trace) {
  std::vector<std::int32_t> kept;
  trace.for_each_span([&](const ps::TraceSpan& span) { kept.push_back(span.iteration); });
  return kept;
}

}  // namespace

TEST(TraceRecorder, TheBudgetCutsTheFirstIterationOverItWhateverTheRankOrder) {
  ps::TraceRecorder trace(true);
  trace.limit(2, {}, {}, 5);
  add_spans(trace, 1, 2, 2);  // rank 1 ran ahead into iteration 2
  add_spans(trace, 0, 1, 2);
  add_spans(trace, 1, 1, 2);
  add_spans(trace, 0, 2, 2);
  trace.apply_budget();
  EXPECT_EQ(trace.first_iteration_over_budget(), 2);  // 4 spans in iteration 1, 8 through 2
  EXPECT_EQ(iterations_kept(trace), (std::vector<std::int32_t>{1, 1, 1, 1}));
  add_spans(trace, 0, 3, 1);  // past the cut: not kept
  EXPECT_EQ(iterations_kept(trace).size(), 4u);
}

TEST(TraceRecorder, IterationsLeftOutOfTheTraceCountNothingTowardTheBudget) {
  ps::TraceRecorder trace(true);
  trace.limit(1, {}, {0, 1, 0, 1}, 3);  // output.trace_iterations: 1 and 3
  add_spans(trace, 0, 1, 2);
  add_spans(trace, 0, 2, 5);  // not kept, not counted
  trace.apply_budget();
  EXPECT_EQ(trace.first_iteration_over_budget(), 0);
  add_spans(trace, 0, 3, 2);
  trace.apply_budget();
  EXPECT_EQ(trace.first_iteration_over_budget(), 3);
  EXPECT_EQ(iterations_kept(trace), (std::vector<std::int32_t>{1, 1}));
}
