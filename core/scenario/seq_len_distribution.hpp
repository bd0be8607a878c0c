#pragma once
// `training.seq_len` as a distribution: the tokens per sequence of each iteration (one
// micro-batch). Forms:
//   seq_len: 4096                                  fixed
//   seq_len: {uniform: [512, 4096]}                inclusive integers, equally likely
//   seq_len: {choices: [512, 4096], weights: [3, 1]}   weights optional (equal)
//   seq_len: {file: lengths.txt}                   one length per line, cycled
//   seq_len: {packed: 4096}                        packed to exactly N tokens
// Lengths are drawn from the named stream "training/seq_len" of noise.seed, so a run stays a
// pure function of (scenario, seed), and every rank reads the same length for an iteration.
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/input/yaml_section.hpp"

namespace prefetchlab::core {

enum class SeqLenKind { kFixed, kUniform, kChoices, kFile, kPacked };

struct SeqLenDistribution {
  SeqLenKind kind = SeqLenKind::kFixed;
  // kFixed, kPacked: the length. kUniform: [values[0], values[1]]. kChoices: the lengths, with
  // `weights` (same count, sum > 0). kFile: the file's lengths in line order.
  std::vector<std::int64_t> values;
  std::vector<double> weights;
  std::string file_as_written;  // kFile: as in the scenario

  // Whether iterations can differ in length (a one-value choice or [n, n] does not).
  bool varies() const;
  // The longest length any iteration can have: what memory planning and describe use.
  std::int64_t max_len() const;
  // The length of iterations 1..iterations (element i is iteration i + 1).
  std::vector<std::int64_t> draw(std::uint64_t seed, std::int64_t iterations) const;
  // summary.json's scenario.training.seq_len: the plain number for a fixed length (as before),
  // else the form as written ({uniform: [a, b]}, ...).
  nlohmann::json to_json() const;
  // One line for describe and run: "4096", "uniform 512..4096", "choices 512 (75%), 4096 (25%)".
  std::string text() const;
};

// Reads `seq_len` of the training section; every length in [1, max_positions]. A file path is
// relative to the scenario's folder (`scenario_dir`).
SeqLenDistribution read_seq_len(const YamlSection& training, std::int64_t max_positions,
                                const std::filesystem::path& scenario_dir);

}  // namespace prefetchlab::core
