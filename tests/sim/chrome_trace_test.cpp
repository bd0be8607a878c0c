// trace.json's format (sim/chrome_trace) and its structural checks (sim/trace_validation):
// exact µs text from integer ns, byte-identical output, atomic writes, and the validator's
// verdicts on missing fields, negative durations and partially overlapping spans.
#include "sim/trace/chrome_trace.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "tests/support/cli_runner.hpp"
#include "sim/trace/trace_validation.hpp"

namespace ps = prefetchlab::sim;
namespace fs = std::filesystem;
using nlohmann::json;
using nlohmann::ordered_json;
using prefetchlab::testing::TempDir;

namespace {

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

bool has_problem_containing(const std::vector<std::string>& problems, const std::string& text) {
  return std::any_of(problems.begin(), problems.end(),
                     [&](const std::string& p) { return p.find(text) != std::string::npos; });
}

std::string joined(const std::vector<std::string>& problems) {
  std::string all;
  for (const auto& p : problems) all += p + "\n";
  return all;
}

// A trace of hand-written events, for the validator's negative cases.
json trace_of(std::vector<json> events) { return json{{"traceEvents", std::move(events)}}; }

json x_event(std::int64_t pid, std::int64_t tid, double ts_us, double dur_us) {
  return json{{"name", "x"},   {"ph", "X"},  {"ts", ts_us},
              {"dur", dur_us}, {"pid", pid}, {"tid", tid}};
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// µs formatting

TEST(ChromeTraceFormat, NanosecondsAsMicrosecondsExactly) {
  EXPECT_EQ(ps::format_ns_as_us(0), "0.000");
  EXPECT_EQ(ps::format_ns_as_us(1), "0.001");
  EXPECT_EQ(ps::format_ns_as_us(10), "0.010");
  EXPECT_EQ(ps::format_ns_as_us(999), "0.999");
  EXPECT_EQ(ps::format_ns_as_us(1000), "1.000");
  EXPECT_EQ(ps::format_ns_as_us(1001), "1.001");
  EXPECT_EQ(ps::format_ns_as_us(1234567), "1234.567");
  EXPECT_EQ(ps::format_ns_as_us(1'000'000'000'000'000), "1000000000000.000");
  EXPECT_EQ(ps::format_ns_as_us(1'234'567'890'123'457), "1234567890123.457");
  EXPECT_EQ(ps::format_ns_as_us(999'999'999'999'999), "999999999999.999");
  EXPECT_EQ(ps::format_ns_as_us(std::numeric_limits<std::int64_t>::max()), "9223372036854775.807");
  EXPECT_EQ(ps::format_ns_as_us(-1), "-0.001");
  EXPECT_EQ(ps::format_ns_as_us(-1500), "-1.500");
  EXPECT_EQ(ps::format_ns_as_us(std::numeric_limits<std::int64_t>::min()), "-9223372036854775.808");

  std::string out = "ts=";
  ps::append_ns_as_us(out, 42);
  EXPECT_EQ(out, "ts=0.042");
}

TEST(ChromeTraceFormat, EveryThreeDecimalValueRoundTripsThroughAJsonParser) {
  // What a reader (and the validator) does: parse the decimal as a double, scale to ns, round.
  std::mt19937_64 rng(7);
  std::uniform_int_distribution<std::int64_t> any_ns(0, std::int64_t{1} << 51);
  for (int i = 0; i < 20000; ++i) {
    const std::int64_t ns = i < 2000 ? 1'000'000'000'000'000 + i : any_ns(rng);
    const double us = json::parse(ps::format_ns_as_us(ns)).get<double>();
    ASSERT_EQ(std::llround(us * 1000.0), ns) << ps::format_ns_as_us(ns);
  }
}

// ---------------------------------------------------------------------------------------------
// Writer

TEST(ChromeTraceWriter, TinyTraceIsExactlyTheExpectedText) {
  ps::ChromeTraceWriter w;
  w.name_process(0, "rank 0");
  w.name_thread(0, 1, "compute");
  w.name_thread(0, 2, "all-gather", 5);
  w.complete(0, 1, "forward", 1000, 2'500'000, ordered_json{{"iteration", 1}, {"phase", "fwd"}});
  w.complete(0, 2, "all_gather", 1234567, 999,
             ordered_json{{"kind", "prefetch"}, {"modules", {"h.0.attn", "h.0.mlp"}}});
  w.instant(0, 1, "stall \"begin\"", 1500);
  w.counter(0, "memory", 2000, ordered_json{{"allocated", 1024}, {"reserved", 2048}});
  w.other_data()["seed"] = 42;
  EXPECT_EQ(w.metadata_count(), 6u);
  EXPECT_EQ(w.event_count(), 4u);

  const std::string expected =
      R"({"traceEvents":[
{"name":"process_name","ph":"M","ts":0.000,"pid":0,"tid":0,"args":{"name":"rank 0"}},
{"name":"process_sort_index","ph":"M","ts":0.000,"pid":0,"tid":0,"args":{"sort_index":0}},
{"name":"thread_name","ph":"M","ts":0.000,"pid":0,"tid":1,"args":{"name":"compute"}},
{"name":"thread_sort_index","ph":"M","ts":0.000,"pid":0,"tid":1,"args":{"sort_index":1}},
{"name":"thread_name","ph":"M","ts":0.000,"pid":0,"tid":2,"args":{"name":"all-gather"}},
{"name":"thread_sort_index","ph":"M","ts":0.000,"pid":0,"tid":2,"args":{"sort_index":5}},
{"name":"forward","ph":"X","ts":1.000,"dur":2500.000,"pid":0,"tid":1,"args":{"iteration":1,"phase":"fwd"}},
{"name":"all_gather","ph":"X","ts":1234.567,"dur":0.999,"pid":0,"tid":2,"args":{"kind":"prefetch","modules":["h.0.attn","h.0.mlp"]}},
{"name":"stall \"begin\"","ph":"i","s":"t","ts":1.500,"pid":0,"tid":1},
{"name":"memory","ph":"C","ts":2.000,"pid":0,"tid":0,"args":{"allocated":1024,"reserved":2048}}
],
"displayTimeUnit":"ns",
"otherData":{"seed":42}}
)";
  EXPECT_EQ(w.render(), expected);

  const json parsed = json::parse(w.render());
  EXPECT_TRUE(ps::validate_chrome_trace(parsed).empty())
      << joined(ps::validate_chrome_trace(parsed));
  EXPECT_EQ(parsed["traceEvents"].size(), 10u);
}

TEST(ChromeTraceWriter, EmptyTraceIsAValidDocument) {
  ps::ChromeTraceWriter w;
  EXPECT_EQ(w.render(), "{\"traceEvents\":[\n],\n\"displayTimeUnit\":\"ns\",\n\"otherData\":{}}\n");
  EXPECT_TRUE(ps::validate_chrome_trace(json::parse(w.render())).empty());

  // Events without metadata: the first event loses its separator comma.
  w.complete(3, 4, "a", 0, 0);
  const json parsed = json::parse(w.render());
  ASSERT_EQ(parsed["traceEvents"].size(), 1u);
  EXPECT_EQ(parsed["traceEvents"][0]["pid"], 3);
}

TEST(ChromeTraceWriter, RejectsNegativeDurationsAndMalformedArguments) {
  ps::ChromeTraceWriter w;
  EXPECT_THROW(w.complete(0, 0, "a", 10, -1), std::invalid_argument);
  EXPECT_THROW(w.complete(0, 0, "a", 10, 1, ordered_json::array({1})), std::invalid_argument);
  EXPECT_THROW(w.instant(0, 0, "a", 10, ordered_json(3)), std::invalid_argument);
  EXPECT_THROW(w.counter(0, "m", 10, ordered_json::object()), std::invalid_argument);
  EXPECT_THROW(w.counter(0, "m", 10, ordered_json{{"bytes", "many"}}), std::invalid_argument);
  EXPECT_EQ(w.event_count(), 0u);
  w.complete(0, 0, "a", 10, 0, ordered_json::object());  // empty args object is fine
  EXPECT_NE(w.render().find("\"args\":{}"), std::string::npos);
}

TEST(ChromeTraceWriter, InvalidUtf8InNamesIsReplacedNotFatal) {
  ps::ChromeTraceWriter w;
  w.name_thread(0, 0, std::string("bad\xff"));
  const json parsed = json::parse(w.render());
  EXPECT_EQ(parsed["traceEvents"][0]["args"]["name"], "bad\xEF\xBF\xBD");
}

namespace {

// A deterministic, moderately large trace: the same seed gives the same calls.
ps::ChromeTraceWriter build_sample_trace(std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  ps::ChromeTraceWriter w;
  for (int rank = 0; rank < 4; ++rank) {
    w.name_process(rank, "rank " + std::to_string(rank));
    w.name_thread(rank, 0, "host");
    w.name_thread(rank, 1, "compute");
  }
  ps::TimeNs t = 0;
  for (int i = 0; i < 5000; ++i) {
    const ps::TimeNs dur = static_cast<ps::TimeNs>(rng() % 1'000'000);
    const int rank = static_cast<int>(rng() % 4);
    w.complete(rank, 1, "module", t, dur,
               ordered_json{{"iteration", i / 100},
                            {"numel", rng() % 100'000'000},
                            {"ratio", 0.1 * static_cast<double>(i % 7)}});
    w.counter(rank, "memory", t,
              ordered_json{{"allocated", static_cast<std::int64_t>(rng() >> 4)}});
    t += dur;
  }
  w.other_data()["seed"] = seed;
  return w;
}

}  // namespace

TEST(ChromeTraceWriter, IdenticalInputGivesByteIdenticalFiles) {
  TempDir dir("chrome-trace");
  const fs::path a = dir.path() / "a.json";
  const fs::path b = dir.path() / "b.json";
  build_sample_trace(11).write(a);
  build_sample_trace(11).write(b);
  const std::string text_a = read_file(a);
  EXPECT_EQ(text_a, read_file(b));
  EXPECT_EQ(text_a, build_sample_trace(11).render());
  EXPECT_NE(text_a, build_sample_trace(12).render());
  const json parsed = json::parse(text_a);
  EXPECT_EQ(parsed["traceEvents"].size(), 12u * 2 + 10000u);
  EXPECT_TRUE(ps::validate_chrome_trace(parsed).empty());
}

TEST(ChromeTraceWriter, WriteIsAtomicAndLeavesNoTemporaryFile) {
  TempDir dir("chrome-trace");
  const fs::path path = dir.path() / "trace.json";
  std::ofstream(path) << "old contents";
  ps::ChromeTraceWriter w;
  w.name_process(0, "rank 0");
  w.complete(0, 0, "step", 0, 5);
  w.write(path);
  EXPECT_EQ(read_file(path), w.render());
  for (const auto& entry : fs::directory_iterator(dir.path())) {
    EXPECT_EQ(entry.path().filename(), "trace.json") << "unexpected file " << entry.path();
  }
  EXPECT_FALSE(fs::exists(dir.path() / "trace.json.tmp"));

  // A directory that does not exist: an error naming the path, and nothing left behind.
  const fs::path missing = dir.path() / "no-such-dir" / "trace.json";
  try {
    w.write(missing);
    FAIL() << "expected an error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("no-such-dir"), std::string::npos) << e.what();
  }
}

TEST(ChromeTraceWriter, LargeTimesSurviveTheRoundTripToTheNanosecond) {
  ps::ChromeTraceWriter w;
  const ps::TimeNs base = 1'000'000'000'000'000;  // 1e15 ns, about 11.6 days
  w.complete(0, 0, "outer", base, 3000);
  w.complete(0, 0, "inner", base + 1, 2999);  // ends exactly where outer ends
  w.complete(0, 0, "next", base + 3000, 1);   // starts exactly where outer ends
  const json parsed = json::parse(w.render());
  EXPECT_TRUE(ps::validate_chrome_trace(parsed).empty())
      << joined(ps::validate_chrome_trace(parsed));

  // One nanosecond too long: inner now ends 1 ns after outer.
  ps::ChromeTraceWriter bad;
  bad.complete(0, 0, "outer", base, 3000);
  bad.complete(0, 0, "inner", base + 1, 3000);
  const auto problems = ps::validate_chrome_trace(json::parse(bad.render()));
  ASSERT_EQ(problems.size(), 1u) << joined(problems);
  EXPECT_TRUE(has_problem_containing(problems, "partially overlaps")) << joined(problems);
  EXPECT_TRUE(has_problem_containing(problems, "[1000000000000.001, 1000000000003.001)"))
      << joined(problems);
}

// ---------------------------------------------------------------------------------------------
// Validation

TEST(ChromeTraceValidation, AcceptsProperNestingAndTouchingBoundaries) {
  const json trace = trace_of({
      x_event(0, 1, 0, 10),  // [0, 10)
      x_event(0, 1, 0, 10),  // identical span: nested
      x_event(0, 1, 0, 4),   // shares the start
      x_event(0, 1, 4, 6),   // touches the previous, shares the parent's end
      x_event(0, 1, 5, 0),   // zero length inside
      x_event(0, 1, 10, 5),  // starts where the parent ends
      x_event(0, 1, 15, 0),  // zero length at the end of the previous
      x_event(0, 2, 3, 20),  // other track: overlap with tid 1 does not matter
      x_event(1, 1, 3, 20),  // other process
      json{{"name", "process_name"},
           {"ph", "M"},
           {"pid", 0},
           {"tid", 0},
           {"args", {{"name", "r"}}}},  // metadata without ts is allowed
      json{{"name", "i"}, {"ph", "i"}, {"s", "t"}, {"ts", 2}, {"pid", 0}, {"tid", 1}},
      json{{"name", "c"}, {"ph", "C"}, {"ts", 2}, {"pid", 0}, {"tid", 0}, {"args", {{"v", 1}}}},
      json{{"name", "s"}, {"ph", "X"}, {"ts", 100}, {"dur", 1}, {"pid", "p"}, {"tid", "t"}},
  });
  const auto problems = ps::validate_chrome_trace(trace);
  EXPECT_TRUE(problems.empty()) << joined(problems);

  // The bare-array form of the format is accepted too.
  EXPECT_TRUE(ps::validate_chrome_trace(trace["traceEvents"]).empty());
}

TEST(ChromeTraceValidation, ReportsEachMissingField) {
  const json complete = x_event(0, 1, 0, 10);
  for (const char* key : {"ph", "ts", "pid", "tid"}) {
    json event = complete;
    event.erase(key);
    const auto problems = ps::validate_chrome_trace(trace_of({complete, event}));
    ASSERT_EQ(problems.size(), 1u) << key << ": " << joined(problems);
    EXPECT_EQ(problems[0], std::string("event 1 \"x\": missing \"") + key + "\"");
  }
  json no_dur = complete;
  no_dur.erase("dur");
  EXPECT_TRUE(has_problem_containing(ps::validate_chrome_trace(trace_of({no_dur})),
                                     "complete event without \"dur\""));

  // Metadata: pid, tid and name are required; ts is not.
  const json meta{
      {"name", "thread_name"}, {"ph", "M"}, {"pid", 0}, {"tid", 3}, {"args", {{"name", "host"}}}};
  EXPECT_TRUE(ps::validate_chrome_trace(trace_of({meta})).empty());
  for (const char* key : {"name", "pid", "tid"}) {
    json event = meta;
    event.erase(key);
    EXPECT_EQ(ps::validate_chrome_trace(trace_of({event})).size(), 1u) << key;
  }
  // Instant and counter events need ts too.
  const json instant{{"name", "i"}, {"ph", "i"}, {"pid", 0}, {"tid", 0}};
  EXPECT_TRUE(
      has_problem_containing(ps::validate_chrome_trace(trace_of({instant})), "missing \"ts\""));
}

TEST(ChromeTraceValidation, ReportsMalformedDocumentsAndValues) {
  EXPECT_TRUE(has_problem_containing(ps::validate_chrome_trace(json::object()), "traceEvents"));
  EXPECT_TRUE(
      has_problem_containing(ps::validate_chrome_trace(json{{"traceEvents", 3}}), "not an array"));
  EXPECT_TRUE(has_problem_containing(ps::validate_chrome_trace(trace_of({json(5)})),
                                     "event 0 is not an object"));
  json bad_ts = x_event(0, 0, 0, 1);
  bad_ts["ts"] = "soon";
  EXPECT_TRUE(has_problem_containing(ps::validate_chrome_trace(trace_of({bad_ts})),
                                     "\"ts\" is not a number"));
  json bad_pid = x_event(0, 0, 0, 1);
  bad_pid["pid"] = 1.5;
  EXPECT_TRUE(
      has_problem_containing(ps::validate_chrome_trace(trace_of({bad_pid})), "\"pid\" is neither"));
  json huge = x_event(0, 0, 1e300, 1);
  EXPECT_TRUE(
      has_problem_containing(ps::validate_chrome_trace(trace_of({huge})), "not a number in range"));
}

TEST(ChromeTraceValidation, ReportsNegativeDuration) {
  for (const double dur : {-1.0, -0.001, -0.0001}) {
    const auto problems = ps::validate_chrome_trace(trace_of({x_event(0, 0, 5, dur)}));
    ASSERT_EQ(problems.size(), 1u) << dur;
    EXPECT_TRUE(has_problem_containing(problems, "negative \"dur\"")) << joined(problems);
  }
  json integer_dur = x_event(0, 0, 5, 0);
  integer_dur["dur"] = -3;
  EXPECT_EQ(ps::validate_chrome_trace(trace_of({integer_dur})).size(), 1u);
}

TEST(ChromeTraceValidation, ReportsPartialOverlapOnOneTrackOnly) {
  // [0, 10) and [5, 15) on the same track: partial overlap. On another track: fine.
  const auto problems = ps::validate_chrome_trace(
      trace_of({x_event(0, 1, 0, 10), x_event(0, 1, 5, 10), x_event(0, 2, 5, 10)}));
  ASSERT_EQ(problems.size(), 1u) << joined(problems);
  EXPECT_EQ(problems[0],
            "event 1 \"x\" [5.000, 15.000) partially overlaps event 0 \"x\" [0.000, 10.000) on "
            "track pid 0 tid 1");

  // Overlap with an ancestor rather than the innermost open span: [0,10) ⊃ [2,4); [3,12)
  // crosses both.
  const auto deep = ps::validate_chrome_trace(
      trace_of({x_event(0, 0, 0, 10), x_event(0, 0, 2, 2), x_event(0, 0, 3, 9)}));
  ASSERT_EQ(deep.size(), 1u) << joined(deep);
  EXPECT_TRUE(has_problem_containing(deep, "event 2")) << joined(deep);

  // A child that outlives its parent after a sibling closed: [0,10) ⊃ [0,2); [8,11).
  EXPECT_EQ(ps::validate_chrome_trace(
                trace_of({x_event(0, 0, 0, 10), x_event(0, 0, 0, 2), x_event(0, 0, 8, 3)}))
                .size(),
            1u);
}

TEST(ChromeTraceValidation, CapsTheProblemList) {
  std::vector<json> events;
  for (int i = 0; i < 1500; ++i)
    events.push_back(json{{"ph", "X"}});  // 4 problems each: pid, tid, ts, dur
  const auto problems = ps::validate_chrome_trace(trace_of(std::move(events)));
  ASSERT_EQ(problems.size(), ps::kMaxTraceProblems + 1);
  EXPECT_EQ(problems.back(), "... and " + std::to_string(1500 * 4 - 1000) + " more problems");
}

// ---------------------------------------------------------------------------------------------
// Property tests (seeded)

namespace {

struct Span {
  int pid;
  int tid;
  ps::TimeNs start;
  ps::TimeNs end;
};

// Properly nested spans filling [lo, hi): children are disjoint (possibly touching)
// sub-intervals, recursively.
void nested_spans(std::mt19937_64& rng, int pid, int tid, ps::TimeNs lo, ps::TimeNs hi, int depth,
                  std::vector<Span>& out) {
  out.push_back({pid, tid, lo, hi});
  if (depth == 0 || hi - lo < 2) return;
  const int children = static_cast<int>(rng() % 4);
  std::vector<ps::TimeNs> cuts;
  for (int i = 0; i < 2 * children; ++i) {
    cuts.push_back(lo + static_cast<ps::TimeNs>(rng() % static_cast<std::uint64_t>(hi - lo + 1)));
  }
  std::sort(cuts.begin(), cuts.end());
  for (int i = 0; i < children; ++i) {
    nested_spans(rng, pid, tid, cuts[2 * i], cuts[2 * i + 1], depth - 1, out);
  }
}

std::vector<Span> random_nested_trace(std::mt19937_64& rng, ps::TimeNs base) {
  std::vector<Span> spans;
  for (int pid = 0; pid < 3; ++pid) {
    for (int tid = 0; tid < 3; ++tid) {
      ps::TimeNs t = base;
      for (int top = 0; top < 20; ++top) {
        const ps::TimeNs len = static_cast<ps::TimeNs>(rng() % 100'000);
        nested_spans(rng, pid, tid, t, t + len, 4, spans);
        t += len + static_cast<ps::TimeNs>(rng() % 3);  // sometimes touching
      }
    }
  }
  std::shuffle(spans.begin(), spans.end(), rng);  // the validator must not rely on order
  return spans;
}

json render_and_parse(const std::vector<Span>& spans) {
  ps::ChromeTraceWriter w;
  for (const Span& s : spans) w.complete(s.pid, s.tid, "s", s.start, s.end - s.start);
  return json::parse(w.render());
}

// O(n²) reference (per track): some pair on one track partially overlaps.
bool brute_force_overlap(const std::vector<Span>& spans) {
  std::map<std::pair<int, int>, std::vector<Span>> tracks;
  for (const Span& s : spans) tracks[{s.pid, s.tid}].push_back(s);
  for (const auto& [track, list] : tracks) {
    for (const Span& a : list) {
      for (const Span& b : list) {
        if (a.start < b.start && b.start < a.end && a.end < b.end) return true;
      }
    }
  }
  return false;
}

}  // namespace

TEST(ChromeTraceValidation, RandomNestedSpansPassAndAnInjectedOverlapFails) {
  for (std::uint64_t seed = 1; seed <= 20; ++seed) {
    std::mt19937_64 rng(seed);
    // Half the seeds far from zero, to exercise the µs text round trip at large times.
    const ps::TimeNs base = seed % 2 == 0 ? 0 : 1'000'000'000'000'000;
    std::vector<Span> spans = random_nested_trace(rng, base);
    ASSERT_FALSE(brute_force_overlap(spans)) << "generator bug, seed " << seed;
    const auto ok = ps::validate_chrome_trace(render_and_parse(spans));
    ASSERT_TRUE(ok.empty()) << "seed " << seed << ":\n" << joined(ok);

    // Inject one span that starts strictly inside an existing span and ends 1 ns after it.
    std::vector<std::size_t> candidates;
    for (std::size_t i = 0; i < spans.size(); ++i) {
      if (spans[i].end - spans[i].start >= 2) candidates.push_back(i);
    }
    ASSERT_FALSE(candidates.empty());
    const Span victim = spans[candidates[rng() % candidates.size()]];
    spans.insert(spans.begin() + static_cast<std::ptrdiff_t>(rng() % spans.size()),
                 Span{victim.pid, victim.tid, victim.start + 1, victim.end + 1});
    const auto bad = ps::validate_chrome_trace(render_and_parse(spans));
    ASSERT_FALSE(bad.empty()) << "seed " << seed;
    EXPECT_TRUE(has_problem_containing(bad, "partially overlaps")) << joined(bad);
  }
}

TEST(ChromeTraceValidation, AgreesWithBruteForceOnArbitrarySpans) {
  // Small random span sets on few tracks: overlaps are common, so both verdicts occur.
  int with_overlap = 0;
  for (std::uint64_t seed = 1; seed <= 400; ++seed) {
    std::mt19937_64 rng(seed);
    std::vector<Span> spans;
    const int n = 1 + static_cast<int>(rng() % 6);
    for (int i = 0; i < n; ++i) {
      const ps::TimeNs start = static_cast<ps::TimeNs>(rng() % 20);
      spans.push_back(
          {0, static_cast<int>(rng() % 2), start, start + static_cast<ps::TimeNs>(rng() % 12)});
    }
    const bool expected = brute_force_overlap(spans);
    with_overlap += expected ? 1 : 0;
    const auto problems = ps::validate_chrome_trace(render_and_parse(spans));
    EXPECT_EQ(!problems.empty(), expected) << "seed " << seed << ":\n" << joined(problems);
  }
  EXPECT_GT(with_overlap, 50);
  EXPECT_LT(with_overlap, 350);
}
