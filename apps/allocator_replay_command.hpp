#pragma once
#include <CLI/CLI.hpp>

namespace prefetchlab::apps {

// `prefetchlab allocator-replay SEQUENCE.csv [--alloc-conf CONF] [--capacity BYTES] [-o FILE]`:
// replays a malloc/free sequence (core/memory/allocator_sequence.hpp) through core::CachingAllocator
// and prints its memory stats as JSON, keyed as torch.cuda.memory_stats() keys them, so
// gpu_backend/torch_allocator_compare.py can set them beside PyTorch's. Exit 4 when a malloc
// runs out of memory (the stats up to it are still printed).
CLI::App* add_allocator_replay_command(CLI::App& app, int* exit_code);

}  // namespace prefetchlab::apps
