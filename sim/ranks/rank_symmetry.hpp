#pragma once
// Identical ranks simulated once. In a data-parallel ZeRO-3 job every rank runs the same modules
// on the same sizes, and one communicator spans them all, so where nothing in the scenario tells
// ranks apart their timelines are the same to the nanosecond: one representative rank, with
// collectives costed for the whole world, gives every figure of the full simulation at a
// fraction of its cost (a 1,024-rank run is one rank's work). Every collective's cost depends
// only on (op, bytes, world size, nodes) (collective_cost_model.hpp), so all ranks share one
// position class; anything that tells ranks apart falls back to simulating every rank.
#include <string>

#include "core/scenario/scenario.hpp"

namespace prefetchlab::sim {

enum class RankSimulation {
  kCollapseIdentical,  // one representative where the scenario proves ranks identical
  kEveryRank,          // callers that read each rank: validation against real ranks, kineto traces
};

struct RankCollapse {
  int world_size = 1;
  int simulated_ranks = 1;   // 1 when collapsed, else world_size
  std::string full_because;  // why every rank is simulated ("" when collapsed or one rank)

  bool collapsed() const { return simulated_ranks < world_size; }
  // "1 of 64" for summary.json and the terminal.
  std::string text() const;
};

// Collapses unless the scenario (or `mode`) needs every rank; the reason is one line naming the
// key that breaks the symmetry: per-rank noise, a slow rank, divergence on some ranks, MoE
// routing, cores shared within a node.
RankCollapse plan_rank_collapse(const core::Scenario& scenario, RankSimulation mode);

}  // namespace prefetchlab::sim
