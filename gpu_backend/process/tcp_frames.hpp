#pragma once
// Framed messages over TCP for the ranks of a process job (process_store.hpp): each frame is a
// fixed 20-byte head (magic, type, header length, data length), a small JSON header and raw
// data (a collective's bytes, a rank's records). Reads never block past the caller's wait and
// keep a partial frame buffered, so one thread can watch many connections with poll().
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace prefetchlab::gpu::net {

// The peer closed the connection, or it broke.
class ConnectionLost : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct Frame {
  std::uint32_t type = 0;
  nlohmann::json header;
  std::vector<std::byte> data;
};

class TcpConnection {
 public:
  // Connects to host:port, retrying refused connections until `patience` has passed (the
  // peer's listener may start later). Throws std::runtime_error naming host, port and errno.
  static TcpConnection connect(const std::string& host, int port, std::chrono::milliseconds patience);

  TcpConnection() = default;
  explicit TcpConnection(int fd);
  TcpConnection(TcpConnection&& other) noexcept;
  TcpConnection& operator=(TcpConnection&& other) noexcept;
  TcpConnection(const TcpConnection&) = delete;
  TcpConnection& operator=(const TcpConnection&) = delete;
  ~TcpConnection();

  int fd() const { return fd_; }
  bool open() const { return fd_ >= 0; }
  // A send blocked longer than this (a peer that stopped reading) throws ConnectionLost.
  void set_send_timeout(std::chrono::milliseconds timeout);
  // The largest frame this side accepts: receive() throws std::runtime_error as soon as a frame's
  // head announces more, before any of it is buffered. Defaults: 1 MiB of header, 1 TiB of data.
  void set_frame_limits(std::uint64_t max_header_bytes, std::uint64_t max_data_bytes);
  // Sends one whole frame (blocking). Throws ConnectionLost.
  void send(std::uint32_t type, const nlohmann::json& header, std::span<const std::byte> data = {});
  // Reads what has arrived, waiting up to `wait` for bytes; returns a frame once one is whole.
  // Throws ConnectionLost on end of stream, and std::runtime_error on a malformed frame.
  std::optional<Frame> receive(std::chrono::milliseconds wait);
  void close();

 private:
  std::optional<Frame> take_frame();
  int fd_ = -1;
  std::vector<std::byte> buffer_;  // bytes received, not yet a whole frame
  std::uint64_t max_header_bytes_ = std::uint64_t{1} << 20;
  std::uint64_t max_data_bytes_ = std::uint64_t{1} << 40;
};

class TcpListener {
 public:
  // Listens at `host`'s address (a name or a numeric address of this machine: loopback for a
  // one-node job, the interface other nodes reach for several) and `port`. Throws
  // std::runtime_error when the port is taken or the address is not this machine's.
  TcpListener(const std::string& host, int port);
  TcpListener(const TcpListener&) = delete;
  TcpListener& operator=(const TcpListener&) = delete;
  ~TcpListener();
  int fd() const { return fd_; }
  // A connection waiting to be accepted, if any (non-blocking).
  std::optional<TcpConnection> accept();

 private:
  int fd_ = -1;
};

}  // namespace prefetchlab::gpu::net
