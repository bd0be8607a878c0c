#include "gpu_backend/cuda/cuda_device.hpp"

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include <cmath>
#include <cstring>
#include <atomic>
#include <deque>
#include <mutex>
#include <span>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>

#include "core/memory/caching_allocator.hpp"
#include "core/memory/device_memory.hpp"
#include "gpu_backend/device/adam_chunk_plan.hpp"
#include "gpu_backend/cuda/cublas_library.hpp"
#include "gpu_backend/cuda/cuda_kernels.hpp"
#include "gpu_backend/device/backend_unavailable.hpp"
#include "gpu_backend/device/failure_state.hpp"
#include "gpu_backend/device/fused_kernel_checks.hpp"
#include "gpu_backend/device/gemm_plan.hpp"
#include "gpu_backend/device/launch_config.hpp"
#include "gpu_backend/process/process_link.hpp"

namespace prefetchlab::gpu {
namespace {

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}
void check(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS) throw std::runtime_error(std::string(what) + ": cuBLAS status " + std::to_string(static_cast<int>(s)));
}
void check(ncclResult_t r, const char* what) {
  if (r != ncclSuccess) throw std::runtime_error(std::string(what) + ": " + ncclGetErrorString(r));
}

void* ptr(DeviceSpan s) { return reinterpret_cast<void*>(s.address); }

cudaDataType_t cuda_type(ElementType t) {
  switch (t) {
    case ElementType::kBF16: return CUDA_R_16BF;
    case ElementType::kFP16: return CUDA_R_16F;
    case ElementType::kFP32: return CUDA_R_32F;
    case ElementType::kFP64: return CUDA_R_64F;
  }
  return CUDA_R_32F;
}
ncclDataType_t nccl_type(ElementType t) {
  switch (t) {
    case ElementType::kBF16: return ncclBfloat16;
    case ElementType::kFP16: return ncclFloat16;
    case ElementType::kFP32: return ncclFloat32;
    case ElementType::kFP64: return ncclFloat64;
  }
  return ncclFloat32;
}
cuda::KernelType kernel_type(ElementType t) {
  switch (t) {
    case ElementType::kBF16: return cuda::KernelType::kBF16;
    case ElementType::kFP16: return cuda::KernelType::kFP16;
    case ElementType::kFP32: return cuda::KernelType::kFP32;
    case ElementType::kFP64: break;
  }
  throw std::invalid_argument("the CUDA device has no fp64 memory-bound kernels");
}
cuda::KernelActivation kernel_activation(Activation a) {
  return a == Activation::kGeluTanh ? cuda::KernelActivation::kGeluTanh : cuda::KernelActivation::kIdentity;
}
std::uint64_t address(DeviceSpan s) { return s.address; }
std::size_t count_of(std::uint64_t bytes, ElementType t) { return static_cast<std::size_t>(bytes / element_bytes(t)); }

// cudaMalloc under the caching allocator, bounded by what the GPU has.
class CudaMemory final : public core::DeviceMemory {
 public:
  explicit CudaMemory(std::uint64_t capacity_bytes) : capacity_bytes_(capacity_bytes) {}
  std::optional<core::DeviceAddress> device_malloc(std::uint64_t size_bytes) override {
    void* p = nullptr;
    if (cudaMalloc(&p, size_bytes) != cudaSuccess) {
      (void)cudaGetLastError();  // clear the sticky-free OOM error
      return std::nullopt;
    }
    used_bytes_ += size_bytes;
    return reinterpret_cast<core::DeviceAddress>(p);
  }
  void device_free(core::DeviceAddress address, std::uint64_t size_bytes) override {
    check(cudaFree(reinterpret_cast<void*>(address)), "cudaFree");  // synchronises the device, as in PyTorch
    used_bytes_ -= size_bytes;
  }
  std::uint64_t capacity_bytes() const override { return capacity_bytes_; }
  std::uint64_t used_bytes() const override { return used_bytes_; }

 private:
  std::uint64_t capacity_bytes_;
  std::uint64_t used_bytes_ = 0;
};

class CudaDeviceGroup;

class CudaDevice final : public Device {
 public:
  // `gpu`: the CUDA device index (the rank in one process, LOCAL_RANK between processes).
  CudaDevice(int rank, int gpu, CudaDeviceGroup& group, const CublasLibrary& cublas, ncclComm_t comm,
             const CudaDeviceOptions& options);
  ~CudaDevice() override;

  int rank() const override { return rank_; }
  int world_size() const override;

  StreamId create_stream(std::string_view) override {
    bind();
    cudaStream_t s = nullptr;
    check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "cudaStreamCreate");
    streams_.push_back(s);
    enqueued_.push_back(0);
    pending_.emplace_back();
    return static_cast<StreamId>(streams_.size() - 1);
  }
  EventId record(StreamId stream) override {
    bind();
    failure().throw_if_failed();
    cudaEvent_t e = nullptr;
    check(cudaEventCreate(&e), "cudaEventCreate");
    check(cudaEventRecord(e, get(stream)), "cudaEventRecord");
    events_.push_back(e);
    return static_cast<EventId>(events_.size() - 1);
  }
  void wait(StreamId stream, EventId event) override {
    bind();
    check(cudaStreamWaitEvent(get(stream), event_at(event), 0), "cudaStreamWaitEvent");
    ++enqueued_[stream];
  }
  bool query(EventId event) override {
    bind();
    const cudaError_t e = cudaEventQuery(event_at(event));
    if (e == cudaErrorNotReady) return false;
    check(e, "cudaEventQuery");
    return true;
  }
  void synchronize(EventId event) override { block_until(event_at(event), "event " + std::to_string(event)); }
  void synchronize_all() override {
    for (StreamId s = 0; s < streams_.size(); ++s) synchronize(record(s));
  }
  std::int64_t elapsed_ns(EventId from, EventId to) override {
    bind();
    float ms = 0;
    check(cudaEventElapsedTime(&ms, event_at(from), event_at(to)), "cudaEventElapsedTime");
    return static_cast<std::int64_t>(static_cast<double>(ms) * 1e6);
  }

  std::optional<DeviceBuffer> allocate(std::uint64_t bytes, StreamId stream) override {
    bind();
    failure().throw_if_failed();
    get(stream);
    poll_pending();
    core::MallocResult result = allocator_.malloc(bytes, stream);
    if (!result) {
      last_oom_ = result.oom;
      return std::nullopt;
    }
    const core::BlockInfo info = allocator_.info(*result.block);
    return DeviceBuffer{*result.block, DeviceSpan{info.address, bytes}, stream};
  }
  void free(const DeviceBuffer& buffer) override {
    bind();
    // Each stream's current end, as a point the allocator can wait for (PyTorch records a
    // cudaEvent per stream the block was used on).
    for (StreamId s = 0; s < streams_.size(); ++s) {
      allocator_.note_enqueued(s, enqueued_[s]);
      cudaEvent_t e = nullptr;
      check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreate");
      check(cudaEventRecord(e, streams_[s]), "cudaEventRecord");
      pending_[s].emplace_back(enqueued_[s], e);
    }
    allocator_.free(buffer.block);
  }
  void record_stream(const DeviceBuffer& buffer, StreamId stream) override {
    get(stream);
    allocator_.record_stream(buffer.block, stream);
  }
  const core::MemoryStats& memory_stats() override { return allocator_.stats(); }
  void reset_peak_memory_stats() override { allocator_.reset_peak_stats(); }
  std::optional<core::OutOfMemory> last_out_of_memory() const override { return last_oom_; }

  void copy_host_to_device(StreamId stream, DeviceSpan dst, const void* host) override {
    enqueue(stream, cudaMemcpyAsync(ptr(dst), host, dst.bytes, cudaMemcpyHostToDevice, get(stream)), "cudaMemcpyAsync H2D");
  }
  void copy_device_to_host(StreamId stream, void* host, DeviceSpan src) override {
    enqueue(stream, cudaMemcpyAsync(host, ptr(src), src.bytes, cudaMemcpyDeviceToHost, get(stream)), "cudaMemcpyAsync D2H");
  }
  void copy_device_to_device(StreamId stream, DeviceSpan dst, DeviceSpan src) override {
    if (dst.bytes != src.bytes) throw std::invalid_argument("device copy between spans of different sizes");
    enqueue(stream, cudaMemcpyAsync(ptr(dst), ptr(src), src.bytes, cudaMemcpyDeviceToDevice, get(stream)), "cudaMemcpyAsync D2D");
  }

  void pin_host_memory(void* host, std::uint64_t bytes) override {
    check(cudaHostRegister(host, bytes, cudaHostRegisterPortable), "cudaHostRegister");
  }
  void unpin_host_memory(void* host) override { check(cudaHostUnregister(host), "cudaHostUnregister"); }
  void* allocate_pinned_host(std::uint64_t bytes) override {
    bind();
    void* host = nullptr;
    // Portable: every rank's GPU copies from it at full rate (the ranks share one process).
    if (cudaHostAlloc(&host, bytes, cudaHostAllocPortable) != cudaSuccess) {
      (void)cudaGetLastError();
      return nullptr;
    }
    return host;
  }
  void free_pinned_host(void* host) override { check(cudaFreeHost(host), "cudaFreeHost"); }

  void all_gather(StreamId stream, DeviceSpan send, DeviceSpan recv, ElementType type) override {
    if (recv.bytes != send.bytes * static_cast<std::uint64_t>(world_size())) throw std::invalid_argument("all_gather: recv is not world_size x send");
    bind();
    check(ncclAllGather(ptr(send), ptr(recv), count_of(send.bytes, type), nccl_type(type), comm_, get(stream)), "ncclAllGather");
    ++enqueued_[stream];
  }
  void reduce_scatter(StreamId stream, DeviceSpan send, DeviceSpan recv, ElementType type, ReduceOp op) override {
    if (send.bytes != recv.bytes * static_cast<std::uint64_t>(world_size())) throw std::invalid_argument("reduce_scatter: send is not world_size x recv");
    bind();
    check(ncclReduceScatter(ptr(send), ptr(recv), count_of(recv.bytes, type), nccl_type(type), op == ReduceOp::kSum ? ncclSum : ncclMax,
                            comm_, get(stream)),
          "ncclReduceScatter");
    ++enqueued_[stream];
  }
  void all_reduce(StreamId stream, DeviceSpan buffer, ElementType type, ReduceOp op) override {
    bind();
    check(ncclAllReduce(ptr(buffer), ptr(buffer), count_of(buffer.bytes, type), nccl_type(type), op == ReduceOp::kSum ? ncclSum : ncclMax,
                        comm_, get(stream)),
          "ncclAllReduce");
    ++enqueued_[stream];
  }

  void gemm(StreamId stream, const GemmArgs& g) override {
    bind();
    // Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T (gemm_plan.hpp). bf16 /
    // fp16 operands with fp32 accumulation on the tensor cores, as PyTorch's matmuls run them.
    const CublasGemmPlan p = plan_cublas_gemm(g);
    check(cublas_library_.set_stream(cublas_, get(stream)), "cublasSetStream");
    const cudaDataType_t t = cuda_type(g.type);
    const auto op = [](bool transpose) { return transpose ? CUBLAS_OP_T : CUBLAS_OP_N; };
    if (p.batch_count == 1) {
      check(cublas_library_.gemm_ex(cublas_, op(p.transpose_first), op(p.transpose_second), static_cast<int>(p.m), static_cast<int>(p.n),
                         static_cast<int>(p.k), &g.alpha, ptr(p.first), t, static_cast<int>(p.ld_first), ptr(p.second), t,
                         static_cast<int>(p.ld_second), &g.beta, ptr(p.c), t, static_cast<int>(p.ldc), CUBLAS_COMPUTE_32F,
                         CUBLAS_GEMM_DEFAULT),
            "cublasGemmEx");
    } else {
      // Attention's per-head products: one call for every head of every sequence.
      check(cublas_library_.gemm_strided_batched_ex(cublas_, op(p.transpose_first), op(p.transpose_second), static_cast<int>(p.m),
                                       static_cast<int>(p.n), static_cast<int>(p.k), &g.alpha, ptr(p.first), t,
                                       static_cast<int>(p.ld_first), p.stride_first, ptr(p.second), t,
                                       static_cast<int>(p.ld_second), p.stride_second, &g.beta, ptr(p.c), t,
                                       static_cast<int>(p.ldc), p.stride_c, static_cast<int>(p.batch_count),
                                       CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
            "cublasGemmStridedBatchedEx");
    }
    ++enqueued_[stream];
  }
  void elementwise(StreamId stream, const ElementwiseArgs& e) override {
    bind();
    const cuda::KernelOp op = e.op == ElementwiseOp::kScale      ? cuda::KernelOp::kScale
                              : e.op == ElementwiseOp::kMultiply ? cuda::KernelOp::kMultiply
                                                                 : cuda::KernelOp::kAxpy;
    // Only the operands the op reads count for alignment.
    const bool aligned = all_aligned_16({address(e.dst), address(e.a), e.op == ElementwiseOp::kMultiply ? address(e.b) : 0});
    const ElementwiseLaunch launch = plan_elementwise_launch(e.numel, element_bytes(e.type), aligned, sm_count_);
    enqueue(stream,
            cuda::launch_elementwise(op, kernel_type(e.type), ptr(e.dst), ptr(e.a), ptr(e.b), e.numel, e.alpha, launch, get(stream)),
            "elementwise kernel");
  }
  void adam(StreamId stream, const AdamArgs& a) override { multi_tensor_adam(stream, {a}); }
  void multi_tensor_adam(StreamId stream, const std::vector<AdamArgs>& tensors) override {
    bind();
    if (tensors.empty()) return;
    check_args(tensors);
    const AdamArgs& first = tensors.front();
    std::vector<cuda::AdamTensor> list;
    std::vector<std::int64_t> numels;
    for (const AdamArgs& t : tensors) {
      list.push_back({ptr(t.params), ptr(t.grads), static_cast<float*>(ptr(t.master)), static_cast<float*>(ptr(t.exp_avg)),
                      static_cast<float*>(ptr(t.exp_avg_sq)), t.numel});
      numels.push_back(t.numel);
    }
    cuda::AdamHyperparameters h;
    h.lr = first.lr, h.beta1 = first.beta1, h.beta2 = first.beta2, h.eps = first.eps;
    // Bias corrections in fp64 on the host, as host::run_adam computes them.
    h.correction1 = static_cast<float>(1.0 - std::pow(static_cast<double>(first.beta1), static_cast<double>(first.step)));
    h.correction2 = static_cast<float>(1.0 - std::pow(static_cast<double>(first.beta2), static_cast<double>(first.step)));
    const AdamChunkLimits limits;
    enqueue(stream, cuda::launch_multi_tensor_adam(kernel_type(first.param_type), list, plan_adam_chunks(numels, limits), limits, h, get(stream)),
            "multi-tensor adam kernel");
  }
  void bias_activation(StreamId stream, const BiasActivationArgs& a) override {
    bind();
    check_args(a);
    const bool aligned = all_aligned_16({address(a.dst), address(a.x), address(a.bias), address(a.residual)});
    const ElementwiseLaunch launch = plan_elementwise_launch(a.rows * a.cols, element_bytes(a.type), aligned, sm_count_);
    enqueue(stream,
            cuda::launch_bias_activation(kernel_type(a.type), kernel_activation(a.activation), ptr(a.dst), ptr(a.x),
                                         a.bias.bytes ? ptr(a.bias) : nullptr, a.residual.bytes ? ptr(a.residual) : nullptr,
                                         a.rows, a.cols, launch, get(stream)),
            "bias_activation kernel");
  }
  void bias_activation_backward(StreamId stream, const BiasActivationBackwardArgs& a) override {
    bind();
    check_args(a);
    const bool aligned = all_aligned_16({address(a.dx), address(a.dy), address(a.x), address(a.bias)});
    const ElementwiseLaunch launch = plan_elementwise_launch(a.rows * a.cols, element_bytes(a.type), aligned, sm_count_);
    enqueue(stream,
            cuda::launch_bias_activation_backward(kernel_type(a.type), kernel_activation(a.activation), ptr(a.dx), ptr(a.dy),
                                                  ptr(a.x), a.bias.bytes ? ptr(a.bias) : nullptr, a.rows, a.cols, launch,
                                                  get(stream)),
            "bias_activation_backward kernel");
  }
  void layer_norm(StreamId stream, const LayerNormArgs& a) override {
    bind();
    check_args(a);
    enqueue(stream,
            cuda::launch_layer_norm(kernel_type(a.type), ptr(a.y), ptr(a.x), ptr(a.gamma), ptr(a.beta),
                                    static_cast<float*>(ptr(a.mean)), static_cast<float*>(ptr(a.rstd)), a.rows, a.cols, a.eps,
                                    plan_row_launch(a.rows, a.cols), get(stream)),
            "layer_norm kernel");
  }
  void layer_norm_backward(StreamId stream, const LayerNormBackwardArgs& a) override {
    bind();
    check_args(a);
    enqueue(stream,
            cuda::launch_layer_norm_backward(kernel_type(a.type), ptr(a.dx), ptr(a.dgamma), ptr(a.dbeta), ptr(a.dy), ptr(a.x),
                                             ptr(a.gamma), static_cast<const float*>(ptr(a.mean)),
                                             static_cast<const float*>(ptr(a.rstd)), a.rows, a.cols,
                                             plan_row_launch(a.rows, a.cols), get(stream)),
            "layer_norm_backward kernel");
  }
  void zero(StreamId stream, DeviceSpan span) override {
    enqueue(stream, cudaMemsetAsync(ptr(span), 0, span.bytes, get(stream)), "cudaMemsetAsync");
  }

 private:
  FailureState& failure();
  void bind() { check(cudaSetDevice(gpu_), "cudaSetDevice"); }
  cudaStream_t get(StreamId s) {
    if (s >= streams_.size()) throw std::out_of_range("no stream " + std::to_string(s) + " on rank " + std::to_string(rank_));
    return streams_[s];
  }
  cudaEvent_t event_at(EventId e) {
    if (e < 0 || static_cast<std::size_t>(e) >= events_.size()) throw std::out_of_range("no event " + std::to_string(e));
    return events_[static_cast<std::size_t>(e)];
  }
  void enqueue(StreamId stream, cudaError_t e, const char* what) {
    bind();
    check(e, what);
    ++enqueued_[stream];
  }
  // Streams that passed a point recorded at a free: tell the allocator.
  void poll_pending() {
    for (StreamId s = 0; s < pending_.size(); ++s) {
      while (!pending_[s].empty() && cudaEventQuery(pending_[s].front().second) == cudaSuccess) {
        allocator_.note_completed(s, pending_[s].front().first);
        check(cudaEventDestroy(pending_[s].front().second), "cudaEventDestroy");
        pending_[s].pop_front();
      }
    }
  }
  void block_until(cudaEvent_t event, const std::string& what);

  int rank_;
  int gpu_;
  CudaDeviceGroup& group_;
  ncclComm_t comm_;
  const CublasLibrary& cublas_library_;
  std::chrono::milliseconds timeout_;
  cublasHandle_t cublas_ = nullptr;
  void* cublas_workspace_ = nullptr;  // outside the caching allocator (PyTorch's comes from it)
  int sm_count_ = 1;
  std::vector<cudaStream_t> streams_;
  std::vector<core::StreamPoint> enqueued_;
  std::vector<std::deque<std::pair<core::StreamPoint, cudaEvent_t>>> pending_;
  std::vector<cudaEvent_t> events_;
  CudaMemory memory_;
  core::CachingAllocator allocator_;
  std::optional<core::OutOfMemory> last_oom_;
};

class CudaDeviceGroup final : public DeviceGroup {
 public:
  explicit CudaDeviceGroup(const CudaDeviceOptions& options)
      : world_size_(options.process ? options.process->world_size() : options.world_size), process_(options.process) {
    if (process_) {
      try {
        join_process_group(options);
      } catch (const std::exception& e) {
        // The others would wait in ncclCommInitRank until their timeout: tell them now.
        if (!dynamic_cast<const RunAborted*>(&e)) {
          process_->abort(RankFailure{process_->rank(), "the NCCL communicator's set-up", e.what(), FailureKind::kError});
        }
        process_->detach();
        throw;
      }
      return;
    }
    comms_.resize(static_cast<std::size_t>(options.world_size));
    std::vector<int> devices;
    for (int r = 0; r < options.world_size; ++r) devices.push_back(r);
    check(ncclCommInitAll(comms_.data(), options.world_size, devices.data()), "ncclCommInitAll");
    for (int r = 0; r < options.world_size; ++r) {
      devices_.push_back(
          std::make_unique<CudaDevice>(r, r, *this, cublas_, comms_[static_cast<std::size_t>(r)], options));
    }
    failure_.on_first_failure([this](const RankFailure&) { abort_comms(); });
  }
  ~CudaDeviceGroup() override {
    if (process_) process_->detach();
    devices_.clear();
    if (aborted_) return;
    for (ncclComm_t c : comms_) {
      if (failure_.failed()) {
        ncclCommAbort(c);
      } else {
        ncclCommDestroy(c);
      }
    }
  }
  int world_size() const override { return world_size_; }
  ProcessLink* process_link() const override { return process_; }
  int process_rank() const override { return process_ ? process_->rank() : -1; }
  Device& device(int rank) override { return *devices_.at(static_cast<std::size_t>(rank - first_local_rank_)); }
  // Only the first failure aborts the communicators (the failure state's listener): that frees
  // ranks blocked in NCCL.
  void abort(const RankFailure& failure) override { failure_.abort(failure); }
  std::optional<RankFailure> failure() const override { return failure_.failure(); }
  FailureState& failure_state() { return failure_; }
  ncclResult_t async_error(int rank) {
    ncclResult_t r = ncclSuccess;
    if (!aborted_) ncclCommGetAsyncError(comms_[static_cast<std::size_t>(rank - first_local_rank_)], &r);
    return r;
  }

 private:
  // One rank per process: rank 0 makes NCCL's unique id and the store hands it to the others
  // (NCCL documentation, "Creating a communicator": ncclGetUniqueId on one rank, broadcast out
  // of band, ncclCommInitRank on every rank).
  void join_process_group(const CudaDeviceOptions& options) {
    ncclUniqueId id{};
    if (process_->rank() == 0) {
      check(ncclGetUniqueId(&id), "ncclGetUniqueId");
      process_->put("nccl_unique_id", std::as_bytes(std::span(&id, 1)));
    } else {
      const std::vector<std::byte> bytes = process_->get("nccl_unique_id");
      if (bytes.size() != sizeof id) throw std::runtime_error("rank 0's NCCL unique id has the wrong size");
      std::memcpy(&id, bytes.data(), sizeof id);
    }
    first_local_rank_ = process_->rank();
    const int gpu = process_->launch().local_rank;
    // From here a failure on another rank reaches this group (and ends the wait for NCCL's
    // set-up), and one here reaches the others and aborts the communicator.
    process_->attach(failure_, [this] { abort_comms(); });
    const ncclComm_t comm = init_rank_communicator(id, gpu, options.collective_timeout);
    {
      std::lock_guard lock(comms_mutex_);  // the listener may abort from the link's thread
      comms_.assign(1, comm);
    }
    devices_.push_back(std::make_unique<CudaDevice>(first_local_rank_, gpu, *this, cublas_, comms_[0], options));
  }

  // ncclCommInitRank blocks until every rank has called it: on a thread of its own, so that a
  // rank that never comes (its process died: the store says so) or the timeout ends the wait.
  // The thread then stays blocked in NCCL until the process exits; it owns what it touches.
  ncclComm_t init_rank_communicator(const ncclUniqueId& id, int gpu, std::chrono::milliseconds timeout) {
    struct Init {
      ncclComm_t comm = nullptr;
      ncclResult_t result = ncclSuccess;
      std::atomic<bool> done{false};
    };
    auto init = std::make_shared<Init>();
    const int world = world_size_, rank = first_local_rank_;
    std::thread([init, id, world, rank, gpu] {
      (void)cudaSetDevice(gpu);
      init->result = ncclCommInitRank(&init->comm, world, id, rank);
      init->done.store(true, std::memory_order_release);
    }).detach();
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!init->done.load(std::memory_order_acquire)) {
      if (const auto failure = failure_.failure()) throw RunAborted(*failure);
      if (std::chrono::steady_clock::now() > deadline) {
        throw std::runtime_error("ncclCommInitRank: not every rank joined the NCCL communicator within " +
                                 std::to_string(timeout.count()) + " ms");
      }
      std::this_thread::sleep_for(FailureState::kPollInterval);
    }
    check(init->result, "ncclCommInitRank");
    return init->comm;
  }

  void abort_comms() {
    std::lock_guard lock(comms_mutex_);
    if (aborted_.exchange(true)) return;
    for (ncclComm_t c : comms_) ncclCommAbort(c);
  }

  CublasLibrary cublas_;  // opened before any device, closed after the last
  int world_size_;
  ProcessLink* process_;
  int first_local_rank_ = 0;
  FailureState failure_;
  std::mutex comms_mutex_;  // comms_ against abort_comms on another thread
  std::vector<ncclComm_t> comms_;
  std::vector<std::unique_ptr<CudaDevice>> devices_;
  std::atomic<bool> aborted_{false};
};

std::uint64_t total_memory(int device) {
  check(cudaSetDevice(device), "cudaSetDevice");
  std::size_t free_bytes = 0, total_bytes = 0;
  check(cudaMemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo");
  return total_bytes;
}

CudaDevice::CudaDevice(int rank, int gpu, CudaDeviceGroup& group, const CublasLibrary& cublas, ncclComm_t comm,
                       const CudaDeviceOptions& options)
    : rank_(rank), gpu_(gpu), group_(group), comm_(comm), cublas_library_(cublas), timeout_(options.collective_timeout), memory_(total_memory(gpu)),
      allocator_(memory_, options.allocator) {
  if (options.allocator.expandable_segments) {
    throw std::invalid_argument("the CUDA device does not support expandable_segments yet");
  }
  bind();
  check(cublas_library_.create(&cublas_), "cublasCreate");
  // cuBLAS's recommended workspace: 32 MiB on Hopper, 4 MiB before (cuBLAS API reference,
  // cublasSetWorkspace; PyTorch sizes its own so since pytorch/pytorch#120925).
  int major = 0;
  check(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, gpu_), "cudaDeviceGetAttribute");
  const std::size_t workspace_bytes = major >= 9 ? (32u << 20) : (4u << 20);
  check(cudaMalloc(&cublas_workspace_, workspace_bytes), "cudaMalloc (cuBLAS workspace)");
  check(cublas_library_.set_workspace(cublas_, cublas_workspace_, workspace_bytes), "cublasSetWorkspace");
  check(cudaDeviceGetAttribute(&sm_count_, cudaDevAttrMultiProcessorCount, gpu_), "cudaDeviceGetAttribute");
}

CudaDevice::~CudaDevice() {
  (void)cudaSetDevice(gpu_);
  if (!group_.failure_state().failed()) (void)cudaDeviceSynchronize();
  allocator_.mark_streams_synchronized();
  allocator_.empty_cache();
  for (auto& q : pending_) {
    for (auto& [point, e] : q) (void)cudaEventDestroy(e);
  }
  for (cudaEvent_t e : events_) (void)cudaEventDestroy(e);
  for (cudaStream_t s : streams_) (void)cudaStreamDestroy(s);
  if (cublas_) cublas_library_.destroy(cublas_);
  if (cublas_workspace_) (void)cudaFree(cublas_workspace_);
}

int CudaDevice::world_size() const { return group_.world_size(); }
FailureState& CudaDevice::failure() { return group_.failure_state(); }

void CudaDevice::block_until(cudaEvent_t event, const std::string& what) {
  bind();
  const auto start = std::chrono::steady_clock::now();
  for (;;) {
    const cudaError_t e = cudaEventQuery(event);
    if (e == cudaSuccess) return;
    if (e != cudaErrorNotReady) check(e, ("waiting for " + what).c_str());
    failure().throw_if_failed();
    if (const ncclResult_t r = group_.async_error(rank_); r != ncclSuccess && r != ncclInProgress) {
      group_.abort(RankFailure{rank_, "NCCL communicator", ncclGetErrorString(r), FailureKind::kError});
      failure().throw_if_failed();
    }
    if (std::chrono::steady_clock::now() - start > timeout_) {
      group_.abort(RankFailure{rank_, "host wait on " + what,
                               "not done after " + std::to_string(timeout_.count()) + " ms (a collective no other rank joined?)",
                               FailureKind::kTimeout});
      failure().throw_if_failed();
    }
    std::this_thread::yield();
  }
}

}  // namespace

int cuda_device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return n;
}

std::unique_ptr<DeviceGroup> make_cuda_device_group(const CudaDeviceOptions& options) {
  const int available = cuda_device_count();
  if (options.process) {
    const int gpu = options.process->launch().local_rank;
    if (gpu >= available) {
      throw BackendUnavailable("--backend cuda --launcher env: LOCAL_RANK " + std::to_string(gpu) + " needs GPU " + std::to_string(gpu) +
                               ", but cudaGetDeviceCount reports " + std::to_string(available) + " on this node");
    }
    return std::make_unique<CudaDeviceGroup>(options);
  }
  if (available < options.world_size) {
    throw BackendUnavailable("--backend cuda: " + std::to_string(options.world_size) + " rank(s) need as many GPUs, but cudaGetDeviceCount reports " +
                             std::to_string(available) + (available == 0 ? " (no GPU or no driver)" : ""));
  }
  return std::make_unique<CudaDeviceGroup>(options);
}

}  // namespace prefetchlab::gpu
