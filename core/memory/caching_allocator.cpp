#include "core/memory/caching_allocator.hpp"

#include <algorithm>
#include <bit>
#include <cstdio>
#include <limits>
#include <stdexcept>
#include <utility>

#include "core/memory/sorted_vector_set.hpp"

// Behaviour follows pytorch/pytorch c10/cuda/CUDACachingAllocator.cpp (DeviceCachingAllocator)
// and c10/core/AllocatorConfig.cpp; where a detail is subtle the comment at that place says which
// behaviour of the PyTorch source is followed.

namespace prefetchlab::core {

struct CachingAllocator::Block {
  DeviceAddress address = 0;
  std::uint64_t size = 0;
  std::uint64_t requested = 0;
  StreamId stream = 0;
  std::uint32_t prev = kNone;
  std::uint32_t next = kNone;
  std::uint32_t segment = kNone;
  std::uint32_t generation = 0;
  std::uint32_t event_count = 0;  // stream events still pending after free()
  std::uint64_t gc_count_base = 0;
  std::vector<StreamId> stream_uses;  // record_stream() streams, sorted, unique
  bool small = false;
  bool allocated = false;
  bool mapped = true;
  bool live = false;
};

struct CachingAllocator::Segment {
  DeviceAddress address = 0;
  std::uint64_t size = 0;  // address range
  StreamId stream = 0;
  bool small = false;
  bool expandable = false;
  bool live = false;
  std::uint32_t head = kNone;  // lowest-address block
  std::uint64_t page_bytes = 0;                  // expandable: mapping granularity
  std::map<std::uint64_t, DeviceAddress> pages;  // expandable: page index -> device memory
  std::uint64_t held_bytes() const { return expandable ? pages.size() * page_bytes : size; }
};


// A large model's pool caches hundreds of free blocks (Llama-2-7B on 8 ranks: ~420 per rank),
// searched on every allocation: the sets are sorted vectors (sorted_vector_set.hpp), whose binary
// search touches a few cache lines where a tree walks nodes scattered through the heap.
struct CachingAllocator::Pool {
  explicit Pool(bool small_pool) : small(small_pool) {}
  Pool(const Pool&) = delete;
  Pool& operator=(const Pool&) = delete;
  bool small = false;
  SortedVectorSet<SizeKey> blocks;       // cached free (mapped) blocks
  SortedVectorSet<AddressKey> unmapped;  // expandable address space without pages
  std::uint64_t search_count = 0;  // get_free_block calls, the clock of GC ages
};

namespace {

std::string format_size(std::uint64_t bytes) {
  char buffer[64];
  const auto b = static_cast<double>(bytes);
  if (bytes <= 1024) {
    std::snprintf(buffer, sizeof buffer, "%llu bytes", static_cast<unsigned long long>(bytes));
  } else if (bytes <= 1048576) {
    std::snprintf(buffer, sizeof buffer, "%.2f KiB", b / 1024.0);
  } else if (bytes <= 1073741824ULL) {
    std::snprintf(buffer, sizeof buffer, "%.2f MiB", b / 1048576.0);
  } else {
    std::snprintf(buffer, sizeof buffer, "%.2f GiB", b / 1073741824.0);
  }
  return buffer;
}

std::int64_t as_signed(std::uint64_t v) { return static_cast<std::int64_t>(v); }

}  // namespace

std::string OutOfMemory::message() const {
  std::string out = "CUDA out of memory. Tried to allocate " + format_size(segment_bytes) +
                    " (request of " + format_size(requested_bytes) + " on stream " + std::to_string(stream) +
                    "). GPU has a total capacity of " + format_size(device_capacity_bytes) + " of which " +
                    format_size(device_free_bytes) + " is free. ";
  if (allowed_bytes) out += format_size(*allowed_bytes) + " allowed; ";
  out += "Of the allocated memory " + format_size(allocated_bytes) + " is allocated by PyTorch, and " +
         format_size(reserved_bytes - allocated_bytes) + " is reserved by PyTorch but unallocated.";
  return out;
}

std::uint64_t round_allocation_size(std::uint64_t size_bytes, const AllocatorOptions& options) {
  if (size_bytes < kMinBlockBytes) return kMinBlockBytes;
  const std::uint64_t divisions = options.divisions_for(size_bytes);
  if (divisions > 1 && size_bytes > kMinBlockBytes * divisions) {
    // Round up to the next of `divisions` equal steps between 2^k and 2^(k+1); powers of two
    // stay. (A request of 1200 with d=4 does not meet this size > 512·d condition, which
    // PyTorch's round_size checks first: 1200 becomes 1536 there, as here, not 1280.)
    if (std::has_single_bit(size_bytes)) return size_bytes;
    const std::uint64_t floor = std::bit_floor(size_bytes);
    const std::uint64_t step = floor / divisions;
    if (step == 0) return floor << 1;
    const std::uint64_t down = size_bytes & ~(step - 1);
    return down == size_bytes ? size_bytes : down + step;
  }
  return (size_bytes + kMinBlockBytes - 1) / kMinBlockBytes * kMinBlockBytes;
}

std::uint64_t segment_size_for(std::uint64_t rounded_bytes) {
  if (rounded_bytes <= kSmallSizeBytes) return kSmallBufferBytes;
  if (rounded_bytes < kMinLargeAllocBytes) return kLargeBufferBytes;
  return (rounded_bytes + kRoundLargeBytes - 1) / kRoundLargeBytes * kRoundLargeBytes;
}

// ---------------------------------------------------------------------------------------------
// Bookkeeping

CachingAllocator::CachingAllocator(DeviceMemory& device, AllocatorOptions options)
    : device_(device), options_(std::move(options)), next_virtual_address_(1ULL << 52) {
  pools_[0] = std::make_unique<Pool>(true);
  pools_[1] = std::make_unique<Pool>(false);
}

CachingAllocator::~CachingAllocator() = default;

CachingAllocator::Pool& CachingAllocator::pool_of(bool small) { return *pools_[small ? 0 : 1]; }

std::uint32_t CachingAllocator::new_block() {
  std::uint32_t index;
  if (!free_block_slots_.empty()) {
    index = free_block_slots_.back();
    free_block_slots_.pop_back();
  } else {
    index = static_cast<std::uint32_t>(blocks_.size());
    blocks_.emplace_back();
  }
  Block& b = blocks_[index];
  const std::uint32_t generation = b.generation;
  b = Block{};
  b.generation = generation;
  b.live = true;
  return index;
}

void CachingAllocator::delete_block(std::uint32_t index) {
  Block& b = blocks_[index];
  b.live = false;
  ++b.generation;
  b.stream_uses.clear();
  free_block_slots_.push_back(index);
}

void CachingAllocator::delete_segment(std::uint32_t index) {
  segments_[index] = Segment{};
  free_segment_slots_.push_back(index);
}

void CachingAllocator::pool_insert(std::uint32_t index) {
  Block& b = blocks_[index];
  Pool& pool = pool_of(b.small);
  b.gc_count_base = pool.search_count;  // a cached block's GC age starts now
  pool.blocks.insert(SizeKey{b.stream, b.size, b.address, index});
}

void CachingAllocator::unmapped_insert(std::uint32_t index) {
  const Block& b = blocks_[index];
  pool_of(b.small).unmapped.insert(AddressKey{b.stream, b.address, index});
}

void CachingAllocator::pool_erase(std::uint32_t index) {
  const Block& b = blocks_[index];
  Pool& pool = pool_of(b.small);
  if (b.mapped) {
    pool.blocks.erase(SizeKey{b.stream, b.size, b.address, index});
  } else {
    pool.unmapped.erase(AddressKey{b.stream, b.address, index});
  }
}

void CachingAllocator::set_head_if_first(std::uint32_t index) {
  if (blocks_[index].prev == kNone) segments_[blocks_[index].segment].head = index;
}

bool CachingAllocator::is_expandable(std::uint32_t index) const {
  return segments_[blocks_[index].segment].expandable;
}

bool CachingAllocator::is_split(const Block& b) const { return b.prev != kNone || b.next != kNone; }

bool CachingAllocator::free_and_idle(std::uint32_t index) const {
  const Block& b = blocks_[index];
  return !b.allocated && b.event_count == 0;
}

CachingAllocator::Block& CachingAllocator::checked(BlockHandle handle) {
  return const_cast<Block&>(std::as_const(*this).checked(handle));
}

const CachingAllocator::Block& CachingAllocator::checked(BlockHandle handle) const {
  if (handle.index >= blocks_.size()) throw std::invalid_argument("CachingAllocator: invalid block handle");
  const Block& b = blocks_[handle.index];
  if (!b.live || b.generation != handle.generation || !b.allocated)
    throw std::invalid_argument("CachingAllocator: block handle already freed");
  return b;
}

bool CachingAllocator::is_live(BlockHandle handle) const {
  if (handle.index >= blocks_.size()) return false;
  const Block& b = blocks_[handle.index];
  return b.live && b.generation == handle.generation && b.allocated;
}

bool CachingAllocator::gc_enabled() const {
  return options_.per_process_memory_fraction.has_value() && options_.garbage_collection_threshold > 0.0;
}

std::optional<std::uint64_t> CachingAllocator::allowed_bytes() const {
  if (!options_.per_process_memory_fraction) return std::nullopt;
  return static_cast<std::uint64_t>(*options_.per_process_memory_fraction *
                                    static_cast<double>(device_.capacity_bytes()));
}

std::uint64_t CachingAllocator::reserved_total() const {
  return static_cast<std::uint64_t>(stats_.reserved_bytes.all.current);
}

// ---------------------------------------------------------------------------------------------
// malloc

MallocResult CachingAllocator::malloc(std::uint64_t size_bytes, StreamId stream) {
  process_events();
  Request r{};
  r.orig_bytes = size_bytes;
  r.size_bytes = round_allocation_size(size_bytes, options_);
  r.alloc_bytes = segment_size_for(r.size_bytes);
  r.stream = stream;
  r.small = r.size_bytes <= kSmallSizeBytes;

  bool found = get_free_block(r);
  if (!found) {
    // PyTorch runs garbage collection here, before asking the device, and only when a memory
    // fraction is set (set_fraction) and garbage_collection_threshold > 0.
    if (gc_enabled()) garbage_collect_cached_blocks();
    found = alloc_block(r, false);
    if (!found && release_available_cached_blocks(r)) found = alloc_block(r, false);
    if (!found) {
      // Wait for every stream, release every cached whole segment, retry (a "retry" even if it
      // fails again). As in PyTorch, the pool is not searched again after this release.
      release_cached_blocks();
      found = alloc_block(r, true);
    }
  }
  if (!found) {
    ++stats_.num_ooms;
    OutOfMemory oom;
    oom.requested_bytes = r.orig_bytes;
    oom.rounded_bytes = r.size_bytes;
    oom.segment_bytes = r.alloc_bytes;
    oom.stream = r.stream;
    oom.allocated_bytes = static_cast<std::uint64_t>(stats_.allocated_bytes.all.current);
    oom.reserved_bytes = reserved_total();
    oom.device_capacity_bytes = device_.capacity_bytes();
    oom.device_free_bytes = device_.capacity_bytes() - device_.held_elsewhere_bytes() - device_.used_bytes();
    oom.allowed_bytes = allowed_bytes();
    return MallocResult{std::nullopt, oom};
  }
  return MallocResult{alloc_found_block(r), std::nullopt};
}

bool CachingAllocator::get_free_block(Request& r) {
  Pool& pool = pool_of(r.small);
  if (gc_enabled()) ++pool.search_count;
  auto it = pool.blocks.lower_bound(SizeKey{r.stream, r.size_bytes, 0, 0});
  if (it == pool.blocks.end() || it->stream != r.stream) return false;
  if (is_expandable(it->block)) {
    // Among fitting blocks of an expandable segment, prefer the one that could grow least
    // (its size plus the unmapped space right after it), as PyTorch's get_free_block does.
    auto expandable_size = [&](const SizeKey& key) {
      const Block& b = blocks_[key.block];
      return b.size + (b.next != kNone && !blocks_[b.next].mapped ? blocks_[b.next].size : 0);
    };
    auto next = std::next(it);
    while (is_expandable(it->block) && next != pool.blocks.end() && next->stream == r.stream &&
           expandable_size(*next) < expandable_size(*it)) {
      it = next++;
    }
  }
  const std::uint64_t block_bytes = it->size;
  const std::uint64_t mss = options_.max_split_size();
  // An oversize block (>= max_split_size) is never given to a small request, and to a large
  // request only when it wastes less than max_non_split_rounding.
  if (r.size_bytes < mss && block_bytes >= mss) return false;
  if (r.size_bytes >= mss && block_bytes >= r.size_bytes + options_.max_non_split_rounding_bytes) return false;
  r.block = it->block;
  pool.blocks.erase(it);
  return true;
}

bool CachingAllocator::alloc_block(Request& r, bool is_retry) {
  if (is_retry) ++stats_.num_alloc_retries;
  if (const auto allowed = allowed_bytes(); allowed && reserved_total() + r.alloc_bytes > *allowed) return false;
  if (options_.expandable_segments) {
    const std::uint32_t index = try_allocate_expandable_block(r);
    if (index == kNone) return false;
    r.block = index;
    return true;
  }
  const auto address = device_.device_malloc(r.alloc_bytes);
  if (!address) return false;
  std::uint32_t seg_index;
  if (!free_segment_slots_.empty()) {
    seg_index = free_segment_slots_.back();
    free_segment_slots_.pop_back();
  } else {
    seg_index = static_cast<std::uint32_t>(segments_.size());
    segments_.emplace_back();
  }
  const std::uint32_t index = new_block();
  Segment& s = segments_[seg_index];
  s.address = *address;
  s.size = r.alloc_bytes;
  s.stream = r.stream;
  s.small = r.small;
  s.expandable = false;
  s.live = true;
  s.head = index;
  Block& b = blocks_[index];
  b.address = *address;
  b.size = r.alloc_bytes;
  b.stream = r.stream;
  b.small = r.small;
  b.segment = seg_index;
  stats_.segment.increase(r.small, 1);
  stats_.reserved_bytes.increase(r.small, as_signed(r.alloc_bytes));
  if (r.alloc_bytes >= options_.max_split_size()) stats_.oversize_segments.increase(1);
  ++stats_.num_device_alloc;
  r.block = index;
  return true;
}

bool CachingAllocator::should_split(const Block& b, std::uint64_t size) const {
  const std::uint64_t remaining = b.size - size;
  if (b.small || options_.expandable_segments) return remaining >= kMinBlockBytes;
  return size < options_.max_split_size() && remaining > kSmallSizeBytes;
}

BlockHandle CachingAllocator::alloc_found_block(Request& r) {
  std::uint32_t index = r.block;
  const bool expandable = is_expandable(index);
  const bool small = blocks_[index].small;
  const bool already_split = is_split(blocks_[index]);
  if (should_split(blocks_[index], r.size_bytes)) {
    // The caller gets the front; the tail stays cached in the same segment and stream.
    const std::uint32_t rest = index;
    const std::uint32_t front = new_block();
    Block& f = blocks_[front];
    Block& t = blocks_[rest];
    f.address = t.address;
    f.size = r.size_bytes;
    f.stream = t.stream;
    f.small = t.small;
    f.segment = t.segment;
    f.prev = t.prev;
    if (f.prev != kNone) blocks_[f.prev].next = front;
    f.next = rest;
    t.prev = front;
    t.address += r.size_bytes;
    t.size -= r.size_bytes;
    set_head_if_first(front);
    pool_insert(rest);
    if (!expandable) {
      if (already_split) {
        stats_.inactive_split_bytes.decrease(small, as_signed(r.size_bytes));
      } else {
        stats_.inactive_split_bytes.increase(small, as_signed(blocks_[rest].size));
        stats_.inactive_split.increase(small, 1);
      }
    }
    index = front;
  } else if (already_split && !expandable) {
    stats_.inactive_split_bytes.decrease(small, as_signed(blocks_[index].size));
    stats_.inactive_split.decrease(small, 1);
  }
  Block& b = blocks_[index];
  b.allocated = true;
  b.requested = r.orig_bytes;
  stats_.allocation.increase(small, 1);
  stats_.allocated_bytes.increase(small, as_signed(b.size));
  stats_.active.increase(small, 1);
  stats_.active_bytes.increase(small, as_signed(b.size));
  stats_.requested_bytes.increase(small, as_signed(b.requested));
  if (b.size >= options_.max_split_size()) stats_.oversize_allocations.increase(1);
  return BlockHandle{index, b.generation};
}

// ---------------------------------------------------------------------------------------------
// free and stream events

void CachingAllocator::free(BlockHandle handle) {
  Block& b = checked(handle);
  const std::uint32_t index = handle.index;
  b.allocated = false;
  ++b.generation;  // the caller's handle is dead from now on, even while events are pending
  stats_.allocation.decrease(b.small, 1);
  stats_.allocated_bytes.decrease(b.small, as_signed(b.size));
  if (b.size >= options_.max_split_size()) stats_.oversize_allocations.decrease(1);
  if (!b.stream_uses.empty()) {
    insert_events(index);
  } else {
    free_block(index);
  }
}

void CachingAllocator::record_stream(BlockHandle handle, StreamId stream) {
  Block& b = checked(handle);
  if (stream == b.stream) return;
  const auto it = std::lower_bound(b.stream_uses.begin(), b.stream_uses.end(), stream);
  if (it == b.stream_uses.end() || *it != stream) b.stream_uses.insert(it, stream);
}

void CachingAllocator::insert_events(std::uint32_t index) {
  Block& b = blocks_[index];
  for (const StreamId stream : b.stream_uses) {
    StreamState& s = stream_state(stream);
    s.events.push_back(Event{s.enqueued, index});
    ++b.event_count;
  }
  b.stream_uses.clear();
}

CachingAllocator::StreamState& CachingAllocator::add_stream(StreamId stream) {
  if (stream >= kMaxStreams) {
    throw std::invalid_argument("CachingAllocator: stream id " + std::to_string(stream) +
                                " is not a small index (below " + std::to_string(kMaxStreams) + ")");
  }
  streams_.resize(stream + 1);
  return streams_[stream];
}

void CachingAllocator::note_enqueued(StreamId stream, StreamPoint point) {
  StreamState& s = stream_state(stream);
  if (point < s.enqueued) throw std::invalid_argument("CachingAllocator: enqueued point went backwards");
  s.enqueued = point;
}

void CachingAllocator::note_completed(StreamId stream, StreamPoint point) {
  // Points below what is already known are not an error: after a synchronisation (empty_cache,
  // the out-of-memory retry) the allocator knows more than the caller has reported.
  StreamState& s = stream_state(stream);
  s.completed = std::max(s.completed, point);
}

void CachingAllocator::process_events() {
  // Per stream, events complete in the order they were recorded (one FIFO per stream, as in
  // PyTorch, so a slow stream does not hold back the others). Streams in id order.
  for (StreamState& s : streams_) {
    auto& queue = s.events;
    while (!queue.empty() && queue.front().point <= s.completed) {
      const std::uint32_t index = queue.front().block;
      queue.pop_front();
      if (--blocks_[index].event_count == 0) free_block(index);
    }
  }
}

void CachingAllocator::process_events(std::span<const StreamProgress> completed) {
  for (const auto& p : completed) note_completed(p.stream, p.point);
  process_events();
}

void CachingAllocator::mark_streams_synchronized() {
  // PyTorch's synchronize_and_free_events: every pending event is waited for.
  ++stats_.num_sync_all_streams;
  for (StreamState& s : streams_) s.completed = std::max(s.completed, s.enqueued);
  for (StreamState& s : streams_) {
    for (const Event& e : s.events) {
      if (--blocks_[e.block].event_count == 0) free_block(e.block);
    }
    s.events.clear();
  }
}

std::size_t CachingAllocator::pending_free_blocks() const {
  std::size_t n = 0;
  for (const Block& b : blocks_) n += (b.live && !b.allocated && b.event_count > 0) ? 1 : 0;
  return n;
}

void CachingAllocator::free_block(std::uint32_t index) {
  const std::uint64_t original_size = blocks_[index].size;
  const std::uint64_t requested = blocks_[index].requested;
  const bool small = blocks_[index].small;
  const bool expandable = is_expandable(index);
  std::int64_t net_blocks = 0;
  std::int64_t net_bytes = 0;
  const std::uint32_t candidates[2] = {blocks_[index].prev, blocks_[index].next};
  for (const std::uint32_t candidate : candidates) {
    const std::uint64_t subsumed = try_merge(index, candidate);
    if (subsumed > 0) {
      net_blocks -= 1;
      net_bytes -= as_signed(subsumed);
    }
  }
  pool_insert(index);
  if (is_split(blocks_[index])) {
    net_blocks += 1;
    net_bytes += as_signed(blocks_[index].size);
  }
  // inactive_split leaves expandable segments out, as PyTorch does.
  if (!expandable) {
    if (net_blocks > 0) stats_.inactive_split.increase(small, net_blocks);
    if (net_blocks < 0) stats_.inactive_split.decrease(small, -net_blocks);
    if (net_bytes > 0) stats_.inactive_split_bytes.increase(small, net_bytes);
    if (net_bytes < 0) stats_.inactive_split_bytes.decrease(small, -net_bytes);
  }
  stats_.active.decrease(small, 1);
  stats_.active_bytes.decrease(small, as_signed(original_size));
  // requested_bytes follows active blocks: it drops when the block is really freed.
  stats_.requested_bytes.decrease(small, as_signed(requested));
  blocks_[index].requested = 0;
}

std::uint64_t CachingAllocator::try_merge(std::uint32_t dst, std::uint32_t src) {
  if (src == kNone) return 0;
  const Block& s = blocks_[src];
  if (s.allocated || s.event_count > 0 || s.mapped != blocks_[dst].mapped) return 0;
  pool_erase(src);
  Block& d = blocks_[dst];
  const std::uint64_t subsumed = s.size;
  if (d.prev == src) {
    d.address = s.address;
    d.prev = s.prev;
    if (d.prev != kNone) {
      blocks_[d.prev].next = dst;
    } else {
      segments_[d.segment].head = dst;
    }
  } else {
    d.next = s.next;
    if (d.next != kNone) blocks_[d.next].prev = dst;
  }
  d.size += subsumed;
  delete_block(src);
  return subsumed;
}

// ---------------------------------------------------------------------------------------------
// Releasing cached memory

void CachingAllocator::empty_cache() { release_cached_blocks(); }

void CachingAllocator::release_cached_blocks() {
  mark_streams_synchronized();
  release_blocks(pool_of(false));
  release_blocks(pool_of(true));
}

void CachingAllocator::release_blocks(Pool& pool) {
  std::vector<std::uint32_t> whole_segments;
  std::vector<std::uint32_t> to_unmap;
  for (const SizeKey& key : pool.blocks) {
    const std::uint32_t index = key.block;
    if (is_expandable(index)) {
      to_unmap.push_back(index);
    } else if (!is_split(blocks_[index])) {
      whole_segments.push_back(index);
    }
  }
  for (const std::uint32_t index : whole_segments) release_block(index);
  for (const std::uint32_t index : to_unmap) {
    unmap_block(index);
    const Block& b = blocks_[index];
    if (!b.mapped && !is_split(b)) {
      // Nothing mapped is left: give the address range back too.
      pool_erase(index);
      const std::uint32_t seg = b.segment;
      delete_block(index);
      delete_segment(seg);
    }
  }
}

void CachingAllocator::release_block(std::uint32_t index) {
  const Block& b = blocks_[index];
  const std::uint32_t seg = b.segment;
  const Segment& s = segments_[seg];
  device_.device_free(s.address, s.size);
  stats_.segment.decrease(s.small, 1);
  stats_.reserved_bytes.decrease(s.small, as_signed(s.size));
  if (s.size >= options_.max_split_size()) stats_.oversize_segments.decrease(1);
  ++stats_.num_device_free;
  pool_erase(index);
  delete_block(index);
  delete_segment(seg);
}

bool CachingAllocator::release_available_cached_blocks(const Request& r) {
  if (!options_.max_split_size_bytes) return false;
  const std::uint64_t mss = *options_.max_split_size_bytes;
  Pool& pool = pool_of(r.small);
  const std::uint64_t key_bytes = std::max(r.size_bytes, mss);
  auto it = pool.blocks.lower_bound(SizeKey{r.stream, key_bytes, 0, 0});
  if (it == pool.blocks.end() || it->stream != r.stream || is_expandable(it->block)) {
    // No single oversize block is enough: release oversize blocks of this stream from the
    // largest down until enough is released. What was released stays released even when it is
    // not enough (as in PyTorch).
    if (it == pool.blocks.begin()) return false;
    --it;
    std::uint64_t released = 0;
    std::vector<std::uint32_t> victims;
    while (released < key_bytes && it->size >= mss && it->stream == r.stream) {
      const std::uint32_t index = it->block;
      // PyTorch releases the block's whole segment; a cached block >= max_split_size is always
      // a whole segment (splits leave tails < max_split_size), but we check rather than assume.
      if (!is_expandable(index) && !is_split(blocks_[index])) {
        victims.push_back(index);
        released += it->size;
      }
      if (it == pool.blocks.begin()) break;
      --it;
    }
    for (const std::uint32_t index : victims) release_block(index);
    return released >= key_bytes;
  }
  const std::uint32_t index = it->block;
  if (is_split(blocks_[index])) return false;
  release_block(index);
  return true;
}

void CachingAllocator::garbage_collect_cached_blocks() {
  // PyTorch's garbage_collect_cached_blocks: when reserved memory is above threshold × allowed,
  // release cached whole segments of the large pool whose age (pool searches since they were
  // cached) is at least the average age, recomputing the average, until enough is reclaimed.
  const std::uint64_t threshold_bytes = static_cast<std::uint64_t>(
      options_.garbage_collection_threshold * static_cast<double>(*allowed_bytes()));
  if (reserved_total() <= threshold_bytes) return;
  const std::uint64_t target = reserved_total() - threshold_bytes;
  Pool& pool = pool_of(false);
  auto age = [&](std::uint32_t index) { return pool.search_count - blocks_[index].gc_count_base; };
  std::uint64_t total_age = 0;
  std::int64_t freeable = 0;
  for (const SizeKey& key : pool.blocks) {
    if (!is_split(blocks_[key.block])) {
      total_age += age(key.block);
      ++freeable;
    }
  }
  if (freeable == 0) return;
  std::uint64_t reclaimed = 0;
  bool freed_any = true;
  while (reclaimed < target && freed_any && freeable > 0) {
    const double age_threshold = static_cast<double>(total_age) / static_cast<double>(freeable);
    freed_any = false;
    std::vector<std::uint32_t> victims;
    for (const SizeKey& key : pool.blocks) {
      const std::uint32_t index = key.block;
      if (!is_split(blocks_[index]) && !is_expandable(index) &&
          static_cast<double>(age(index)) >= age_threshold) {
        victims.push_back(index);
      }
    }
    for (const std::uint32_t index : victims) {
      freed_any = true;
      reclaimed += blocks_[index].size;
      total_age -= age(index);
      --freeable;
      release_block(index);
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Expandable segments: one virtual range per (stream, pool), 1.125 × device memory, with device
// pages (2 MiB small pool, 20 MiB large pool) mapped on demand and unmapped only by
// empty_cache() / the out-of-memory path. Reserved memory = mapped pages. Follows PyTorch's
// try_allocate_expandable_block / find_expandable_block / map_block / unmap_block; each page is
// one device_malloc of the page size (cuMemCreate), and a failed mapping gives back the pages it
// had created.

std::uint32_t CachingAllocator::find_expandable_block(const Request& r) {
  Pool& pool = pool_of(r.small);
  auto allocatable = [&](std::uint32_t index) { return index != kNone && free_and_idle(index); };
  auto has_space = [&](std::uint32_t index) {
    std::uint64_t bytes = 0;
    while (bytes < r.size_bytes && allocatable(index)) {
      bytes += blocks_[index].size;
      index = blocks_[index].next;
    }
    return bytes >= r.size_bytes;
  };
  for (auto it = pool.unmapped.lower_bound(AddressKey{r.stream, 0, 0});
       it != pool.unmapped.end() && it->stream == r.stream; ++it) {
    std::uint32_t candidate = it->block;
    if (allocatable(blocks_[candidate].prev)) candidate = blocks_[candidate].prev;
    if (has_space(candidate)) return candidate;
  }
  const std::uint64_t page = r.small ? kSmallBufferBytes : kLargeBufferBytes;
  const std::uint64_t capacity = device_.capacity_bytes();
  const std::uint64_t range = std::max<std::uint64_t>(1, (capacity + capacity / 8 + page - 1) / page) * page;
  std::uint32_t seg_index;
  if (!free_segment_slots_.empty()) {
    seg_index = free_segment_slots_.back();
    free_segment_slots_.pop_back();
  } else {
    seg_index = static_cast<std::uint32_t>(segments_.size());
    segments_.emplace_back();
  }
  const std::uint32_t index = new_block();
  Segment& s = segments_[seg_index];
  s.address = next_virtual_address_;
  s.size = range;
  s.stream = r.stream;
  s.small = r.small;
  s.expandable = true;
  s.live = true;
  s.head = index;
  s.page_bytes = page;
  next_virtual_address_ += range + page;  // a gap keeps ranges apart
  Block& b = blocks_[index];
  b.address = s.address;
  b.size = range;
  b.stream = r.stream;
  b.small = r.small;
  b.segment = seg_index;
  b.mapped = false;
  unmapped_insert(index);
  return index;
}

std::uint32_t CachingAllocator::try_allocate_expandable_block(const Request& r) {
  std::uint32_t candidate = find_expandable_block(r);
  if (!blocks_[candidate].mapped &&
      !map_block(candidate, std::min(blocks_[candidate].size, r.size_bytes))) {
    return kNone;
  }
  while (blocks_[candidate].size < r.size_bytes) {
    const std::uint64_t remaining = r.size_bytes - blocks_[candidate].size;
    const std::uint32_t next = blocks_[candidate].next;
    if (next == kNone || blocks_[next].mapped) return kNone;
    if (!map_block(next, std::min(remaining, blocks_[next].size))) return kNone;
    candidate = next;  // map_block merged the free block before it into `next`
  }
  pool_erase(candidate);
  return candidate;
}

bool CachingAllocator::map_block(std::uint32_t index, std::uint64_t size) {
  const std::uint32_t seg = blocks_[index].segment;
  const std::uint64_t page = segments_[seg].page_bytes;
  const std::uint64_t offset = blocks_[index].address - segments_[seg].address;
  const std::uint64_t begin = offset / page;
  const std::uint64_t end = (offset + size + page - 1) / page;
  for (std::uint64_t p = begin; p < end; ++p) {
    const auto memory = device_.device_malloc(page);
    if (!memory) {
      for (std::uint64_t q = begin; q < p; ++q) {
        device_.device_free(segments_[seg].pages.at(q), page);
        segments_[seg].pages.erase(q);
      }
      return false;
    }
    segments_[seg].pages[p] = *memory;
  }
  const std::uint64_t mapped_bytes = (end - begin) * page;
  pool_erase(index);  // from the unmapped set
  blocks_[index].mapped = true;
  if (mapped_bytes < blocks_[index].size) {
    const std::uint32_t rest = new_block();
    Block& b = blocks_[index];
    Block& t = blocks_[rest];
    t.address = b.address + mapped_bytes;
    t.size = b.size - mapped_bytes;
    t.stream = b.stream;
    t.small = b.small;
    t.segment = b.segment;
    t.mapped = false;
    t.prev = index;
    t.next = b.next;
    if (t.next != kNone) blocks_[t.next].prev = rest;
    b.next = rest;
    b.size = mapped_bytes;
    unmapped_insert(rest);
  }
  try_merge(index, blocks_[index].prev);
  try_merge(index, blocks_[index].next);
  pool_insert(index);
  stats_.reserved_bytes.increase(blocks_[index].small, as_signed(mapped_bytes));
  ++stats_.num_device_alloc;
  return true;
}

void CachingAllocator::unmap_block(std::uint32_t index) {
  const std::uint32_t seg = blocks_[index].segment;
  const std::uint64_t page = segments_[seg].page_bytes;
  const DeviceAddress base = segments_[seg].address;
  const std::uint64_t offset = blocks_[index].address - base;
  const std::uint64_t begin = (offset + page - 1) / page;  // only pages wholly inside the block
  const std::uint64_t end = (offset + blocks_[index].size) / page;
  if (begin >= end) return;
  for (std::uint64_t p = begin; p < end; ++p) {
    device_.device_free(segments_[seg].pages.at(p), page);
    segments_[seg].pages.erase(p);
  }
  pool_erase(index);
  const DeviceAddress unmapped_address = base + begin * page;
  const std::uint64_t unmapped_bytes = (end - begin) * page;
  const std::uint64_t before = unmapped_address - blocks_[index].address;
  const std::uint64_t after = blocks_[index].size - before - unmapped_bytes;
  auto make_free = [&](DeviceAddress address, std::uint64_t bytes) {
    const std::uint32_t n = new_block();
    Block& f = blocks_[n];
    const Block& b = blocks_[index];
    f.address = address;
    f.size = bytes;
    f.stream = b.stream;
    f.small = b.small;
    f.segment = b.segment;
    return n;
  };
  if (before > 0) {
    const std::uint32_t n = make_free(blocks_[index].address, before);
    blocks_[n].prev = blocks_[index].prev;
    blocks_[n].next = index;
    if (blocks_[n].prev != kNone) blocks_[blocks_[n].prev].next = n;
    blocks_[index].prev = n;
    set_head_if_first(n);
    pool_insert(n);
  }
  if (after > 0) {
    const std::uint32_t n = make_free(unmapped_address + unmapped_bytes, after);
    blocks_[n].prev = index;
    blocks_[n].next = blocks_[index].next;
    if (blocks_[n].next != kNone) blocks_[blocks_[n].next].prev = n;
    blocks_[index].next = n;
    pool_insert(n);
  }
  Block& b = blocks_[index];
  b.address = unmapped_address;
  b.size = unmapped_bytes;
  b.mapped = false;
  try_merge(index, blocks_[index].prev);
  try_merge(index, blocks_[index].next);
  unmapped_insert(index);
  stats_.reserved_bytes.decrease(blocks_[index].small, as_signed(unmapped_bytes));
  ++stats_.num_device_free;
}

// ---------------------------------------------------------------------------------------------
// Queries

BlockInfo CachingAllocator::info(BlockHandle handle) const {
  const Block& b = checked(handle);
  return BlockInfo{b.address, b.size, b.requested, b.stream, b.small, segments_[b.segment].address};
}

std::vector<SegmentSnapshot> CachingAllocator::snapshot() const {
  std::vector<SegmentSnapshot> out;
  for (const Segment& s : segments_) {
    if (!s.live) continue;
    SegmentSnapshot snap;
    snap.address = s.address;
    snap.total_bytes = s.held_bytes();
    snap.virtual_bytes = s.size;
    snap.stream = s.stream;
    snap.small_pool = s.small;
    snap.expandable = s.expandable;
    for (std::uint32_t i = s.head; i != kNone; i = blocks_[i].next) {
      const Block& b = blocks_[i];
      BlockState state = BlockState::kFree;
      if (!b.mapped) {
        state = BlockState::kUnmapped;
      } else if (b.allocated) {
        state = BlockState::kAllocated;
      } else if (b.event_count > 0) {
        state = BlockState::kPendingFree;
      }
      snap.blocks.push_back(BlockSnapshot{b.address, b.size, b.requested, state});
    }
    out.push_back(std::move(snap));
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.address < b.address; });
  return out;
}

std::vector<std::string> CachingAllocator::check_invariants() const {
  std::vector<std::string> problems;
  auto fail = [&](std::string what) { problems.push_back(std::move(what)); };
  struct Sums {
    std::int64_t allocation = 0, allocated = 0, active = 0, active_bytes = 0, requested = 0;
    std::int64_t segments = 0, reserved = 0, inactive = 0, inactive_bytes = 0;
  } sums[2];
  std::size_t in_pool[2] = {0, 0};
  std::size_t unmapped_count[2] = {0, 0};
  std::size_t pending_events = 0;
  std::vector<std::pair<DeviceAddress, std::uint64_t>> ranges;
  for (std::uint32_t si = 0; si < segments_.size(); ++si) {
    const Segment& s = segments_[si];
    if (!s.live) continue;
    Sums& sum = sums[s.small ? 0 : 1];
    ranges.emplace_back(s.address, s.size);
    if (!s.expandable) ++sum.segments;
    sum.reserved += as_signed(s.held_bytes());
    DeviceAddress expect = s.address;
    std::uint32_t prev = kNone;
    std::size_t count = 0;
    for (std::uint32_t i = s.head; i != kNone; i = blocks_[i].next) {
      const Block& b = blocks_[i];
      const std::string where = "segment " + std::to_string(s.address) + " block " + std::to_string(b.address);
      if (++count > blocks_.size()) {
        fail(where + ": cycle");
        break;
      }
      if (!b.live) fail(where + ": dead block linked");
      if (b.segment != si) fail(where + ": wrong segment");
      if (b.prev != prev) fail(where + ": prev link broken");
      if (b.address != expect) fail(where + ": gap or overlap");
      if (b.size == 0) fail(where + ": empty block");
      if (b.stream != s.stream || b.small != s.small) fail(where + ": stream/pool differs from segment");
      if (b.size % kMinBlockBytes != 0) fail(where + ": size not a multiple of 512");
      const bool idle_free = b.mapped && !b.allocated && b.event_count == 0;
      if (!s.expandable && !b.mapped) fail(where + ": unmapped block in a cudaMalloc segment");
      if (prev != kNone) {
        const Block& p = blocks_[prev];
        const bool prev_idle_free = p.mapped && !p.allocated && p.event_count == 0;
        if (idle_free && prev_idle_free) fail(where + ": free neighbours not merged");
        if (!b.mapped && !p.mapped) fail(where + ": unmapped neighbours not merged");
      }
      if (s.expandable) {
        const std::uint64_t first = (b.address - s.address) / s.page_bytes;
        const std::uint64_t last = (b.address + b.size - 1 - s.address) / s.page_bytes;
        for (std::uint64_t p = first; p <= last; ++p) {
          if (b.mapped != (s.pages.count(p) == 1)) fail(where + ": page mapping disagrees with block");
        }
      }
      const auto& pool = *pools_[b.small ? 0 : 1];
      const bool listed = pool.blocks.count(SizeKey{b.stream, b.size, b.address, i}) == 1;
      const bool listed_unmapped = pool.unmapped.count(AddressKey{b.stream, b.address, i}) == 1;
      if (idle_free != listed) fail(where + ": pool membership wrong");
      if (!b.mapped != listed_unmapped) fail(where + ": unmapped-set membership wrong");
      in_pool[b.small ? 0 : 1] += listed ? 1 : 0;
      unmapped_count[b.small ? 0 : 1] += listed_unmapped ? 1 : 0;
      if (b.allocated) {
        ++sum.allocation;
        sum.allocated += as_signed(b.size);
        if (b.event_count != 0) fail(where + ": allocated block with events");
      }
      if (b.allocated || b.event_count > 0) {
        ++sum.active;
        sum.active_bytes += as_signed(b.size);
        sum.requested += as_signed(b.requested);
      }
      pending_events += b.event_count;
      if (idle_free && !s.expandable && (b.prev != kNone || b.next != kNone)) {
        ++sum.inactive;
        sum.inactive_bytes += as_signed(b.size);
      }
      expect = b.address + b.size;
      prev = i;
    }
    if (expect != s.address + s.size) fail("segment " + std::to_string(s.address) + ": blocks do not cover it");
  }
  std::sort(ranges.begin(), ranges.end());
  for (std::size_t i = 1; i < ranges.size(); ++i) {
    if (ranges[i - 1].first + ranges[i - 1].second > ranges[i].first) fail("segments overlap");
  }
  for (int p = 0; p < 2; ++p) {
    if (in_pool[p] != pools_[static_cast<std::size_t>(p)]->blocks.size()) fail("pool lists blocks outside segments");
    if (unmapped_count[p] != pools_[static_cast<std::size_t>(p)]->unmapped.size())
      fail("unmapped set lists blocks outside segments");
  }
  std::size_t queued = 0;
  for (const StreamState& stream : streams_) queued += stream.events.size();
  if (queued != pending_events) fail("event queues disagree with block event counts");
  auto check = [&](const char* name, const StatArray& stat, std::int64_t Sums::*field) {
    const std::int64_t small = sums[0].*field;
    const std::int64_t large = sums[1].*field;
    if (stat.small_pool.current != small || stat.large_pool.current != large || stat.all.current != small + large)
      fail(std::string(name) + ": stats " + std::to_string(stat.all.current) + " != blocks " +
           std::to_string(small + large));
    for (const Stat* s : {&stat.all, &stat.small_pool, &stat.large_pool}) {
      if (s->peak < s->current) fail(std::string(name) + ": peak below current");
      if (s->allocated - s->freed != s->current) fail(std::string(name) + ": allocated - freed != current");
    }
  };
  check("allocation", stats_.allocation, &Sums::allocation);
  check("allocated_bytes", stats_.allocated_bytes, &Sums::allocated);
  check("active", stats_.active, &Sums::active);
  check("active_bytes", stats_.active_bytes, &Sums::active_bytes);
  check("requested_bytes", stats_.requested_bytes, &Sums::requested);
  check("segment", stats_.segment, &Sums::segments);
  check("reserved_bytes", stats_.reserved_bytes, &Sums::reserved);
  check("inactive_split", stats_.inactive_split, &Sums::inactive);
  check("inactive_split_bytes", stats_.inactive_split_bytes, &Sums::inactive_bytes);
  return problems;
}

}  // namespace prefetchlab::core
