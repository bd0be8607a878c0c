#pragma once
// A model given as a Hugging Face config.json (a file, or a folder holding one): its model_type
// picks the family, its keys the sizes, and the module tree is built as transformers builds it.
// Supported model types: hf_model_types().
#include <filesystem>
#include <string>
#include <vector>

#include "core/model/model_spec.hpp"

namespace prefetchlab::core {

// The model types a config.json may name, in the order the docs list them.
const std::vector<std::string>& hf_model_types();

// Whether a model reference means a config.json: a path ending in .json, or a folder.
bool is_hf_config_reference(const std::filesystem::path& path);

// The config.json a reference means (a folder's config.json); an InputError naming the file
// when it does not exist.
std::filesystem::path hf_config_file(const std::filesystem::path& path);

// Reads and builds. The model's name is the file's stem, or the folder's name for a file called
// config.json. An unknown model_type, a missing or malformed key, an unknown key and a key whose
// value changes the structure in a way not built are InputErrors naming file, line and key.
// Keys read without effect on the simulation (norm epsilons, RoPE settings, token ids) are
// listed in one line appended to `notes` when given.
ModelSpec load_hf_config(const std::filesystem::path& path, DType dtype,
                         AttentionImpl attention = AttentionImpl::kSdpa,
                         std::vector<std::string>* notes = nullptr);

}  // namespace prefetchlab::core
