#include "gpu_backend/process/job_secret.hpp"

#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <vector>

namespace prefetchlab::gpu {
namespace {

constexpr std::size_t kMinSecretBytes = 16;
constexpr std::size_t kMaxSecretBytes = 4096;
constexpr const char* kHowToMake =
    "a shared secret of 16 to 4096 bytes in the launcher's environment, the same for every rank: "
    "export PREFETCHLAB_JOB_SECRET=$(head -c 32 /dev/urandom | base64) before torchrun or srun, or "
    "PREFETCHLAB_JOB_SECRET_FILE naming a 0600 file that holds one";

[[noreturn]] void bad(const std::string& what) {
  throw std::invalid_argument("--launcher env: " + what + "; expected " + kHowToMake);
}

std::string checked(std::string secret, const std::string& from) {
  while (!secret.empty() && (secret.back() == '\n' || secret.back() == '\r')) secret.pop_back();
  if (secret.size() < kMinSecretBytes || secret.size() > kMaxSecretBytes) {
    bad(from + " holds " + std::to_string(secret.size()) + " bytes");
  }
  return secret;
}

std::string read_secret_file(const std::string& path) {
  // O_NOFOLLOW: a link planted in the file's place is refused, not followed.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) bad("PREFETCHLAB_JOB_SECRET_FILE '" + path + "' cannot be opened (" + std::strerror(errno) + ")");
  struct stat info {};
  std::string problem;
  if (::fstat(fd, &info) != 0) {
    problem = std::strerror(errno);
  } else if (!S_ISREG(info.st_mode)) {
    problem = "not a regular file";
  } else if (info.st_uid != ::geteuid()) {
    problem = "owned by another user";
  } else if ((info.st_mode & 077) != 0) {
    problem = "readable or writable by other users (chmod 600 it)";
  } else if (static_cast<std::size_t>(info.st_size) > kMaxSecretBytes + 2) {
    problem = "larger than 4096 bytes";
  }
  std::string secret;
  if (problem.empty()) {
    std::vector<char> buffer(kMaxSecretBytes + 3);
    const ssize_t n = ::read(fd, buffer.data(), buffer.size());
    if (n < 0) problem = std::strerror(errno);
    else secret.assign(buffer.data(), static_cast<std::size_t>(n));
  }
  ::close(fd);
  if (!problem.empty()) bad("PREFETCHLAB_JOB_SECRET_FILE '" + path + "' is " + problem);
  return checked(std::move(secret), "PREFETCHLAB_JOB_SECRET_FILE '" + path + "'");
}

}  // namespace

std::string job_secret_from(const std::function<const char*(const char*)>& lookup, int world_size) {
  const char* inline_secret = lookup("PREFETCHLAB_JOB_SECRET");
  const char* file = lookup("PREFETCHLAB_JOB_SECRET_FILE");
  const bool has_inline = inline_secret && *inline_secret;
  const bool has_file = file && *file;
  if (has_inline && has_file) bad("both PREFETCHLAB_JOB_SECRET and PREFETCHLAB_JOB_SECRET_FILE are set");
  if (has_inline) return checked(inline_secret, "PREFETCHLAB_JOB_SECRET");
  if (has_file) return read_secret_file(file);
  if (world_size == 1) return random_hex(32);
  bad("neither PREFETCHLAB_JOB_SECRET nor PREFETCHLAB_JOB_SECRET_FILE is set, and rank 0's store admits only "
      "processes that know the job's secret");
}

bool secrets_equal(std::string_view a, std::string_view b) {
  const std::size_t n = a.size() > b.size() ? a.size() : b.size();
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (std::size_t i = 0; i < n; ++i) {
    const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    const unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff = static_cast<unsigned char>(diff | (x ^ y));
  }
  return diff == 0;
}

std::string random_hex(std::size_t bytes) {
  std::vector<unsigned char> raw(bytes);
  std::size_t got = 0;
  while (got < bytes) {
    const ssize_t n = ::getrandom(raw.data() + got, bytes - got, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw std::runtime_error(std::string("cannot read random bytes from the kernel: ") + std::strerror(errno));
    }
    got += static_cast<std::size_t>(n);
  }
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * bytes);
  for (const unsigned char c : raw) {
    out.push_back(kDigits[c >> 4]);
    out.push_back(kDigits[c & 15]);
  }
  return out;
}

}  // namespace prefetchlab::gpu
