// World size 1: DeepSpeed's no-gather handles. all_gather_coalesced returns
// _no_gather_coalesced(params) when num_partitions == 1 (deepspeed/runtime/zero/
// partition_parameters.py): a NoGatherHandle for one parameter, a NoGatherCoalescedHandle for
// several. No collective runs, but the handle still moves data and still synchronises.
#include "sim/ranks/rank_process.hpp"

namespace prefetchlab::sim {

// NoGather(Coalesced)Handle.__init__: per parameter, param.data =
// ds_tensor.data.to(current_device, non_blocking=True). Issued inside fetch_sub_module's
// `with stream(allgather_stream)`, so with zero.offload_param (ds_tensor in pinned host memory)
// each parameter gets a fresh device buffer from the caching allocator on the all-gather stream
// and one host-to-device copy of its full bytes there; the coordinator's Release frees it as it
// frees gathered buffers. Without offload the .to() is a no-op: the shard is the parameter.
HostTask RankProcess::copy_up_without_gather(const core::Gather& gather, int module) {
  const core::Scenario& scenario = *shared_.scenario;
  for (const int p : gather.param_ids) {
    const auto index = static_cast<std::size_t>(p);
    const std::int64_t bytes = scenario.model.params[index].numel * dtype_bytes_;
    param_resident_bytes_[index] = bytes;
    add_gathered_bytes(bytes);
    param_block_[index] = allocate(bytes, *all_gather_, module, "a parameter copied from host memory",
                                    core::MemoryUse::kGatheredParams);
    if (!param_block_[index]) co_await Halt{};
    co_await spend(shared_.compute->host().kernel_launch_ns());  // one cudaMemcpyAsync per parameter
    launch_kernel(*all_gather_, at_rate_ns(bytes, shared_.host_to_device_bytes_per_s), shared_.label_host_copy);
  }
}

// NoGather(Coalesced)Handle.wait: `if not is_synchronized_device():
// current_stream().synchronize()` — a host synchronisation (CUDA is not a synchronized device)
// on the stream the wait runs under: the all-gather stream in fetch_sub_module's wait loop, the
// compute stream for drains. The coalesced handle then sets __complete, so later waits on it
// return at once: only the first wait on a handle blocks (a NoGatherHandle has one parameter,
// so one wait). The compute stream's idle time meanwhile counts where the same block on a
// collective would: as a fetch stall, as other communication for drains, as the persistent
// re-gather's block.
HostTask RankProcess::wait_without_gather(Stream& stream, core::WaitContext wait_context, core::Phase phase) {
  TimeNs* idle_ns = &current_->host_wait_idle_ns;
  if (wait_context == core::WaitContext::kFetch) idle_ns = &current_->stall_ns[static_cast<int>(phase)];
  co_await host_sync_on_comm(record(stream), idle_ns);
}

}  // namespace prefetchlab::sim
