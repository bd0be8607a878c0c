#include "gpu_backend/process/tcp_frames.hpp"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

namespace prefetchlab::gpu::net {
namespace {

constexpr std::uint32_t kMagic = 0x50464c31;  // "PFL1"
constexpr std::size_t kHeadBytes = 20;
// A frame's header is a few fields; its data at most a collective's buffer or a rank's records.
constexpr std::uint64_t kMaxHeaderBytes = 1 << 20;
constexpr std::uint64_t kMaxDataBytes = std::uint64_t{1} << 40;

std::string errno_text() { return std::strerror(errno); }

void put_u32(std::byte* at, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) at[i] = static_cast<std::byte>((v >> (8 * i)) & 0xff);
}
void put_u64(std::byte* at, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) at[i] = static_cast<std::byte>((v >> (8 * i)) & 0xff);
}
std::uint32_t get_u32(const std::byte* at) {
  std::uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<std::uint32_t>(at[i]) << (8 * i);
  return v;
}
std::uint64_t get_u64(const std::byte* at) {
  std::uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<std::uint64_t>(at[i]) << (8 * i);
  return v;
}

void send_all(int fd, const std::byte* data, std::size_t size) {
  while (size > 0) {
    const ssize_t n = ::send(fd, data, size, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw ConnectionLost(errno == EAGAIN || errno == EWOULDBLOCK ? std::string("the peer stopped reading (send timed out)")
                                                                   : "send failed: " + errno_text());
    }
    data += n;
    size -= static_cast<std::size_t>(n);
  }
}

}  // namespace

TcpConnection TcpConnection::connect(const std::string& host, int port, std::chrono::milliseconds patience) {
  const auto deadline = std::chrono::steady_clock::now() + patience;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  std::string last_error;
  for (;;) {
    addrinfo* found = nullptr;
    const int rc = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found);
    if (rc != 0) {
      last_error = std::string("cannot resolve: ") + ::gai_strerror(rc);
    } else {
      for (addrinfo* a = found; a; a = a->ai_next) {
        const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
        if (fd < 0) continue;
        if (::connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
          ::freeaddrinfo(found);
          const int one = 1;
          ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
          return TcpConnection(fd);
        }
        last_error = errno_text();
        ::close(fd);
      }
      ::freeaddrinfo(found);
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      throw std::runtime_error("cannot connect to rank 0's store at " + host + ":" + std::to_string(port) + " within " +
                               std::to_string(patience.count()) + " ms (" + last_error + ")");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

TcpConnection::TcpConnection(int fd) : fd_(fd) {}
TcpConnection::TcpConnection(TcpConnection&& other) noexcept
    : fd_(other.fd_), buffer_(std::move(other.buffer_)), max_header_bytes_(other.max_header_bytes_),
      max_data_bytes_(other.max_data_bytes_) {
  other.fd_ = -1;
}
TcpConnection& TcpConnection::operator=(TcpConnection&& other) noexcept {
  if (this != &other) {
    close();
    fd_ = other.fd_;
    buffer_ = std::move(other.buffer_);
    max_header_bytes_ = other.max_header_bytes_;
    max_data_bytes_ = other.max_data_bytes_;
    other.fd_ = -1;
  }
  return *this;
}

void TcpConnection::set_frame_limits(std::uint64_t max_header_bytes, std::uint64_t max_data_bytes) {
  max_header_bytes_ = std::min(max_header_bytes, kMaxHeaderBytes);
  max_data_bytes_ = std::min(max_data_bytes, kMaxDataBytes);
}
TcpConnection::~TcpConnection() { close(); }

void TcpConnection::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

void TcpConnection::set_send_timeout(std::chrono::milliseconds timeout) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(timeout.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((timeout.count() % 1000) * 1000);
  ::setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

void TcpConnection::send(std::uint32_t type, const nlohmann::json& header, std::span<const std::byte> data) {
  if (fd_ < 0) throw ConnectionLost("the connection is closed");
  const std::string text = header.dump();
  std::vector<std::byte> head(kHeadBytes + text.size());
  put_u32(head.data(), kMagic);
  put_u32(head.data() + 4, type);
  put_u32(head.data() + 8, static_cast<std::uint32_t>(text.size()));
  put_u64(head.data() + 12, data.size());
  std::memcpy(head.data() + kHeadBytes, text.data(), text.size());
  send_all(fd_, head.data(), head.size());
  if (!data.empty()) send_all(fd_, data.data(), data.size());
}

std::optional<Frame> TcpConnection::take_frame() {
  if (buffer_.size() < kHeadBytes) return std::nullopt;
  if (get_u32(buffer_.data()) != kMagic) throw std::runtime_error("a frame without PrefetchLab's magic (not a prefetchlab rank?)");
  const std::uint64_t header_bytes = get_u32(buffer_.data() + 8);
  const std::uint64_t data_bytes = get_u64(buffer_.data() + 12);
  if (header_bytes > max_header_bytes_ || data_bytes > max_data_bytes_) throw std::runtime_error("a frame larger than this connection accepts");
  const std::uint64_t total = kHeadBytes + header_bytes + data_bytes;
  if (buffer_.size() < total) return std::nullopt;
  Frame frame;
  frame.type = get_u32(buffer_.data() + 4);
  const char* text = reinterpret_cast<const char*>(buffer_.data() + kHeadBytes);
  frame.header = nlohmann::json::parse(text, text + header_bytes, nullptr, /*allow_exceptions=*/false);
  if (frame.header.is_discarded()) throw std::runtime_error("a frame whose header is not JSON");
  const auto data_begin = buffer_.begin() + static_cast<std::ptrdiff_t>(kHeadBytes + header_bytes);
  frame.data.assign(data_begin, data_begin + static_cast<std::ptrdiff_t>(data_bytes));
  buffer_.erase(buffer_.begin(), buffer_.begin() + static_cast<std::ptrdiff_t>(total));
  return frame;
}

std::optional<Frame> TcpConnection::receive(std::chrono::milliseconds wait) {
  if (auto frame = take_frame()) return frame;
  if (fd_ < 0) throw ConnectionLost("the connection is closed");
  const auto deadline = std::chrono::steady_clock::now() + wait;
  for (;;) {
    pollfd p{fd_, POLLIN, 0};
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    const int ready = ::poll(&p, 1, static_cast<int>(std::max<std::int64_t>(0, left.count())));
    if (ready < 0 && errno != EINTR) throw ConnectionLost("poll failed: " + errno_text());
    if (ready <= 0) return std::nullopt;
    // Read what is there (a large frame arrives over many reads).
    std::byte chunk[1 << 16];
    const ssize_t n = ::recv(fd_, chunk, sizeof chunk, 0);
    if (n == 0) throw ConnectionLost("the peer closed the connection");
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      throw ConnectionLost("receive failed: " + errno_text());
    }
    buffer_.insert(buffer_.end(), chunk, chunk + n);
    if (auto frame = take_frame()) return frame;
    if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
  }
}

TcpListener::TcpListener(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const int rc = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found);
  if (rc != 0) {
    throw std::runtime_error("rank 0 cannot resolve MASTER_ADDR '" + host + "' to serve the store: " + ::gai_strerror(rc));
  }
  std::string why = "no address";
  for (addrinfo* a = found; a && fd_ < 0; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
    if (fd < 0) {
      why = errno_text();
      continue;
    }
    const int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    // Only the address the ranks were told (MASTER_ADDR): a store on every interface would let
    // anyone who reaches the node knock.
    if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd, 1024) == 0) {
      fd_ = fd;
    } else {
      why = errno_text();
      ::close(fd);
    }
  }
  ::freeaddrinfo(found);
  if (fd_ < 0) {
    throw std::runtime_error("rank 0 cannot serve the store at " + host + ":" + std::to_string(port) + ": " + why +
                             " (another job on this node? set MASTER_PORT; is MASTER_ADDR this node's address?)");
  }
}

TcpListener::~TcpListener() {
  if (fd_ >= 0) ::close(fd_);
}

std::optional<TcpConnection> TcpListener::accept() {
  const int fd = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
  if (fd < 0) return std::nullopt;
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return TcpConnection(fd);
}

}  // namespace prefetchlab::gpu::net
