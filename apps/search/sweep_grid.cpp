#include "apps/search/sweep_grid.hpp"

#include <yaml-cpp/yaml.h>


#include "core/input/yaml_section.hpp"

namespace prefetchlab::core {
namespace {

constexpr const char* kListForm = "a non-empty list of values, e.g. [1e6, 5e6, 2e7]";
constexpr const char* kZipKey = "zip";
// Point indices must stay exact in a double-free world and readable in a CSV; a product beyond
// this is a typo (or a sweep nobody can run).
constexpr std::size_t kMaxPoints = std::size_t{1} << 40;

int line_of(const YAML::Node& node, int fallback) {
  const YAML::Mark mark = node.Mark();
  return mark.line >= 0 ? mark.line + 1 : fallback;
}

std::string flow_yaml(const YAML::Node& node) {
  YAML::Emitter out;
  out.SetMapFormat(YAML::Flow);
  out.SetSeqFormat(YAML::Flow);
  out << node;
  return out.c_str();
}

std::string describe(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Map: return "a mapping";
    case YAML::NodeType::Scalar: return "'" + node.Scalar() + "', not a list";
    case YAML::NodeType::Null: return "empty";
    default: return "not a list";
  }
}

// One key's list of values, checked.
std::vector<GridValue> read_values(const YamlSection& section, const std::string& key) {
  const YAML::Node list = section.raw(key);
  const InputLocation where = section.location(key);
  if (!list.IsSequence()) {
    throw InputError(where, section.dotted(key), "is " + describe(list), kListForm);
  }
  if (list.size() == 0) throw InputError(where, section.dotted(key), "is an empty list", kListForm);
  std::vector<GridValue> values;
  values.reserve(list.size());
  for (const auto& item : list) {
    GridValue value;
    value.override = flow_yaml(item);
    value.text = item.IsScalar() ? item.Scalar() : value.override;
    value.line = line_of(item, where.line);
    values.push_back(std::move(value));
  }
  return values;
}

}  // namespace

SweepGrid SweepGrid::load(const std::filesystem::path& file) {
  const YamlSection top = YamlSection::load_file(file.string());
  SweepGrid grid;
  grid.file_ = file.string();
  auto add_key = [&](const std::string& dotted, int line) {
    for (const auto& known : grid.keys_) {
      if (known.dotted == dotted) {
        throw InputError({grid.file_, line}, dotted,
                         "appears twice (first on line " + std::to_string(known.line) + ")",
                         "each key once, either in the product or in the zip block");
      }
    }
    grid.keys_.push_back({dotted, line});
    return GridKey{dotted, line};
  };

  for (const auto& key : top.keys()) {
    GridAxis axis;
    if (key == kZipKey) {
      const YAML::Node block = top.raw(key);
      if (!block.IsMap()) {
        throw InputError(top.location(key), key, "is " + describe(block),
                         "a mapping of keys to lists of equal length");
      }
      // Keys inside the block are scenario keys too: report them without the `zip.` prefix.
      const YamlSection zip(block, top.source(), "", top.location(key).line);
      const auto zip_keys = zip.keys();
      if (zip_keys.empty()) {
        throw InputError(top.location(key), key, "is empty", "a mapping of keys to lists of equal length");
      }
      for (const auto& zip_key : zip_keys) {
        axis.keys.push_back(add_key(zip_key, zip.location(zip_key).line));
        axis.values.push_back(read_values(zip, zip_key));
        if (axis.values.back().size() != axis.values.front().size()) {
          throw InputError(zip.location(zip_key), zip_key,
                           "has " + std::to_string(axis.values.back().size()) + " values but " +
                               axis.keys.front().dotted + " has " +
                               std::to_string(axis.values.front().size()),
                           "lists of equal length in a zip block (they vary together)");
        }
      }
    } else {
      axis.keys.push_back(add_key(key, top.location(key).line));
      axis.values.push_back(read_values(top, key));
    }
    grid.axes_.push_back(std::move(axis));
  }
  if (grid.axes_.empty()) {
    throw InputError({grid.file_, 1}, "", "has no keys", "dotted scenario keys mapped to lists of values");
  }

  grid.point_count_ = 1;
  for (const auto& axis : grid.axes_) {
    if (grid.point_count_ > kMaxPoints / axis.size()) {
      throw InputError({grid.file_, axis.keys.front().line}, axis.keys.front().dotted,
                       "makes the product exceed " + std::to_string(kMaxPoints) + " points",
                       "a grid small enough to run");
    }
    grid.point_count_ *= axis.size();
  }
  return grid;
}

std::vector<const GridValue*> SweepGrid::values_at(std::size_t point) const {
  std::vector<std::size_t> index(axes_.size());
  // Mixed radix, the last axis fastest.
  std::size_t rest = point;
  for (std::size_t a = axes_.size(); a-- > 0;) {
    index[a] = rest % axes_[a].size();
    rest /= axes_[a].size();
  }
  std::vector<const GridValue*> values;
  values.reserve(keys_.size());
  for (std::size_t a = 0; a < axes_.size(); ++a) {
    for (const auto& key_values : axes_[a].values) values.push_back(&key_values[index[a]]);
  }
  return values;
}

std::vector<std::string> SweepGrid::overrides_at(std::size_t point) const {
  const auto values = values_at(point);
  std::vector<std::string> overrides;
  overrides.reserve(values.size());
  for (std::size_t k = 0; k < keys_.size(); ++k) overrides.push_back(keys_[k].dotted + "=" + values[k]->override);
  return overrides;
}

nlohmann::ordered_json SweepGrid::identity() const {
  nlohmann::ordered_json axes = nlohmann::ordered_json::array();
  for (const auto& axis : axes_) {
    nlohmann::ordered_json entry = nlohmann::ordered_json::object();
    for (std::size_t k = 0; k < axis.keys.size(); ++k) {
      nlohmann::ordered_json texts = nlohmann::ordered_json::array();
      for (const auto& value : axis.values[k]) texts.push_back(value.text);
      entry[axis.keys[k].dotted] = std::move(texts);
    }
    axes.push_back(std::move(entry));
  }
  return axes;
}

InputError SweepGrid::relocate(const InputError& error, std::size_t point) const {
  const auto values = values_at(point);
  const std::string& file = error.where().file;
  const std::string set_prefix = "--set ";
  if (file.starts_with(set_prefix)) {
    const std::string assignment = file.substr(set_prefix.size());
    for (std::size_t k = 0; k < keys_.size(); ++k) {
      const std::string& dotted = keys_[k].dotted;
      if (assignment != dotted && !assignment.starts_with(dotted + "=") && !assignment.starts_with(dotted + ".")) {
        continue;
      }
      // A misspelt or misplaced key is the key's fault; anything else is the value's.
      const bool value_fault = error.key() == dotted && error.problem() != "is not a known key";
      const int line = value_fault ? values[k]->line : keys_[k].line;
      const std::string problem = error.problem() + " (grid point " + std::to_string(point) + ")";
      return InputError({file_, line}, error.key(), problem, error.expected(), error.suggestion());
    }
  }
  std::string point_values;
  for (std::size_t k = 0; k < keys_.size(); ++k) {
    point_values += (k ? ", " : "") + keys_[k].dotted + "=" + values[k]->text;
  }
  return InputError(error.where(), error.key(),
                    error.problem() + " (at point " + std::to_string(point) + " of grid " + file_ + ": " +
                        point_values + ")",
                    error.expected(), error.suggestion());
}

}  // namespace prefetchlab::core
