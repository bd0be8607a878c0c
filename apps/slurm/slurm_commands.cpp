#include "apps/slurm/slurm_commands.hpp"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <regex>
#include <sstream>
#include <stdexcept>

extern char** environ;

namespace prefetchlab::apps {

CommandResult run_command(const std::vector<std::string>& argv) {
  CommandResult result;
  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) {
    result.output = std::string("pipe: ") + std::strerror(errno);
    return result;
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], STDERR_FILENO);
  std::vector<char*> args;
  for (const auto& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  const int spawned = posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(pipe_fds[1]);
  if (spawned != 0) {
    close(pipe_fds[0]);
    result.output = argv[0] + ": " + std::strerror(spawned);
    return result;
  }
  char buffer[4096];
  for (;;) {
    const ssize_t got = read(pipe_fds[0], buffer, sizeof buffer);
    if (got > 0) {
      result.output.append(buffer, static_cast<std::size_t>(got));
    } else if (got == 0 || errno != EINTR) {
      break;
    }
  }
  close(pipe_fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

std::string sbatch_submit(const std::filesystem::path& script, const std::string& dependency) {
  std::vector<std::string> argv{"sbatch", "--parsable"};
  if (!dependency.empty()) argv.push_back("--dependency=" + dependency);
  argv.push_back(script.string());
  const CommandResult result = run_command(argv);
  // --parsable prints "jobid" or "jobid;cluster" on its own line; warnings may come before it.
  static const std::regex kJobLine(R"(^([0-9]+)(;\S+)?$)");
  std::istringstream lines(result.output);
  std::string line;
  std::string job;
  while (std::getline(lines, line)) {
    std::smatch match;
    if (std::regex_match(line, match, kJobLine)) job = match[1];
  }
  if (result.exit_code != 0 || job.empty()) {
    throw std::runtime_error("sbatch " + script.string() + " failed" +
                             (result.exit_code < 0 ? "" : " (exit code " + std::to_string(result.exit_code) + ")") +
                             ": " + (result.output.empty() ? "no output" : result.output));
  }
  return job;
}

}  // namespace prefetchlab::apps
