#include "core/trace_import/trace_set.hpp"

#include <filesystem>

#include <algorithm>
#include <map>
#include <set>

#include "core/input/input_error.hpp"
#include "core/trace_import/trace_file.hpp"

namespace prefetchlab::core {
namespace {

constexpr const char* kOneJob = "one trace file per rank of one job, profiled over the same steps";

void check_one_job(const std::vector<RankTimeline>& ranks) {
  for (std::size_t a = 0; a < ranks.size(); ++a) {
    for (std::size_t b = a + 1; b < ranks.size(); ++b) {
      const RankTimeline& x = ranks[a];
      const RankTimeline& y = ranks[b];
      if (x.rank == y.rank) {
        throw InputError({y.path, 0}, "distributedInfo.rank",
                         "is rank " + std::to_string(y.rank) + ", like " + x.path +
                             " (two traces of one rank: the same file twice, or ranks of different jobs)",
                         kOneJob);
      }
      if (x.world_size >= 0 && y.world_size >= 0 && x.world_size != y.world_size) {
        throw InputError({y.path, 0}, "distributedInfo.world_size",
                         "has world size " + std::to_string(y.world_size) + " but " + x.path + " has " +
                             std::to_string(x.world_size) + ": ranks of different jobs",
                         kOneJob);
      }
      if (!x.backend.empty() && !y.backend.empty() && x.backend != y.backend) {
        throw InputError({y.path, 0}, "distributedInfo.backend",
                         "uses backend " + y.backend + " but " + x.path + " uses " + x.backend + ": ranks of different jobs",
                         kOneJob);
      }
      if (x.absolute_clock != y.absolute_clock) {
        throw InputError({y.path, 0}, "", "is a different kind of export than " + x.path +
                                              " (legacy autograd-profiler against Kineto): ranks of different runs",
                         kOneJob);
      }
      std::set<std::int64_t> steps;
      for (const auto& s : x.steps) steps.insert(s.number);
      bool common = false;
      for (const auto& s : y.steps) common = common || steps.count(s.number) > 0;
      if (!common) {
        throw InputError({y.path, 0}, "ProfilerStep#N",
                         "has no step in common with " + x.path +
                             " (different jobs, or profiler windows that do not overlap)",
                         kOneJob);
      }
    }
    if (ranks[a].world_size >= 0 && ranks[a].rank >= ranks[a].world_size) {
      throw InputError({ranks[a].path, 0}, "distributedInfo.rank",
                       "is rank " + std::to_string(ranks[a].rank) + " of a world of " + std::to_string(ranks[a].world_size),
                       "a rank below the world size");
    }
  }
}

}  // namespace

TraceSet match_trace_set(std::vector<RankTimeline> ranks) {
  check_one_job(ranks);
  std::sort(ranks.begin(), ranks.end(), [](const RankTimeline& a, const RankTimeline& b) { return a.rank < b.rank; });
  TraceSet set;
  set.ranks = std::move(ranks);
  bool absolute = true;
  for (const auto& r : set.ranks) absolute = absolute && r.absolute_clock;
  set.cross_rank_times = absolute && set.ranks.size() >= 2;
  if (set.ranks.size() < 2) return set;

  // step number -> group -> per rank, its collectives in order.
  std::map<std::int64_t, std::map<std::string, std::map<std::size_t, std::vector<std::size_t>>>> order;
  for (std::size_t r = 0; r < set.ranks.size(); ++r) {
    const RankTimeline& rank = set.ranks[r];
    for (std::size_t c = 0; c < rank.collectives.size(); ++c) {
      const RankCollective& collective = rank.collectives[c];
      if (collective.step < 0) continue;
      order[rank.steps[static_cast<std::size_t>(collective.step)].number][collective.process_group][r].push_back(c);
    }
  }
  for (auto& [step_number, groups] : order) {
    for (auto& [group, per_rank] : groups) {
      // "Seq" when every member has it (the exact key); else the order of starts.
      for (auto& [r, list] : per_rank) {
        const auto& cs = set.ranks[r].collectives;
        const bool all_seq = std::all_of(list.begin(), list.end(), [&](std::size_t c) { return cs[c].seq >= 0; });
        if (all_seq) std::stable_sort(list.begin(), list.end(), [&](std::size_t a, std::size_t b) { return cs[a].seq < cs[b].seq; });
      }
      if (per_rank.size() < 2) continue;
      std::size_t count = SIZE_MAX, most = 0;
      for (const auto& [r, list] : per_rank) {
        count = std::min(count, list.size());
        most = std::max(most, list.size());
      }
      const std::string group_label = group.empty() ? "the one assumed group" : "group '" + group + "'";
      const std::string where = "step " + std::to_string(step_number) + ", " + group_label;
      if (count != most) {
        std::string counts;
        for (const auto& [r, list] : per_rank) {
          counts += (counts.empty() ? "" : ", ") + std::string("rank ") + std::to_string(set.ranks[r].rank) + ": " +
                    std::to_string(list.size());
        }
        set.notes.push_back(where + ": ranks ran different numbers of collectives (" + counts + "); the first " +
                            std::to_string(count) + " are matched");
      }
      for (std::size_t i = 0; i < count; ++i) {
        MatchedCollective m;
        m.step_number = step_number;
        m.process_group = group;
        m.index = i;
        bool consistent = true;
        std::int64_t max_start = INT64_MIN, min_start = INT64_MAX, min_end = INT64_MAX;
        m.min_span_ns = INT64_MAX;
        for (const auto& [r, list] : per_rank) {
          const RankCollective& c = set.ranks[r].collectives[list[i]];
          if (m.ranks.empty()) {
            m.kind = c.kind;
            m.elements = c.elements;
          } else if (c.kind != m.kind || (c.elements >= 0 && m.elements >= 0 && c.elements != m.elements)) {
            const RankCollective& first = set.ranks[m.ranks.front()].collectives[m.members.front()];
            set.notes.push_back(where + ": collective #" + std::to_string(i) + " is " + collective_kind_name(first.kind) +
                                " of " + std::to_string(first.elements) + " elements on rank " +
                                std::to_string(set.ranks[m.ranks.front()].rank) + " but " + collective_kind_name(c.kind) +
                                " of " + std::to_string(c.elements) + " on rank " + std::to_string(set.ranks[r].rank) +
                                "; matching in this group stops there");
            consistent = false;
            break;
          }
          if (m.elements < 0) m.elements = c.elements;
          m.ranks.push_back(r);
          m.members.push_back(list[i]);
          max_start = std::max(max_start, c.start_ns);
          min_start = std::min(min_start, c.start_ns);
          min_end = std::min(min_end, c.end_ns);
          m.max_span_ns = std::max(m.max_span_ns, c.end_ns - c.start_ns);
          m.min_span_ns = std::min(m.min_span_ns, c.end_ns - c.start_ns);
        }
        if (!consistent) break;
        if (set.cross_rank_times) {
          m.true_ns = std::max<std::int64_t>(0, min_end - max_start);
          m.skew_ns = max_start - min_start;
        }
        set.matched.push_back(std::move(m));
      }
    }
  }
  return set;
}

std::vector<std::string> expand_trace_paths(const std::vector<std::string>& paths) {
  std::vector<std::string> files;
  for (const std::string& path : paths) {
    std::error_code error;
    if (!std::filesystem::is_directory(path, error)) {
      files.push_back(path);
      continue;
    }
    std::vector<std::string> in_folder;
    for (const auto& entry : std::filesystem::directory_iterator(path, error)) {
      const std::string name = entry.path().filename().string();
      const auto ends_with = [&](std::string_view suffix) {
        return name.size() >= suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0;
      };
      if (entry.is_regular_file(error) && (ends_with(".json") || ends_with(".json.gz"))) {
        in_folder.push_back(entry.path().string());
      }
    }
    if (in_folder.empty()) {
      throw InputError({path, 0}, "", "is a folder without trace files",
                       "torch.profiler traces (.json or .json.gz, one per rank) in it, or the files themselves");
    }
    std::sort(in_folder.begin(), in_folder.end());
    files.insert(files.end(), in_folder.begin(), in_folder.end());
  }
  return files;
}

TraceSet load_trace_set(const std::vector<std::string>& given, const TimelineOptions& options) {
  const std::vector<std::string> paths = expand_trace_paths(given);
  std::vector<RankTimeline> ranks;
  for (std::size_t i = 0; i < paths.size(); ++i) {
    const TraceFile file = read_trace_file(paths[i]);
    ranks.push_back(build_rank_timeline(file, static_cast<std::int64_t>(i), options));
  }
  return match_trace_set(std::move(ranks));
}

}  // namespace prefetchlab::core
