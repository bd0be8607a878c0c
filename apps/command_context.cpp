#include "command_context.hpp"

#include <cstdlib>
#include <iostream>
#include <new>

#include "core/input/input_error.hpp"
#include "core/io/io_error.hpp"

namespace prefetchlab::apps {

std::filesystem::path data_root() {
  if (const char* home = std::getenv("PREFETCHLAB_HOME"); home && *home) return home;
  return PREFETCHLAB_SOURCE_DIR;
}

core::BundledData bundled_data() { return core::BundledData::from_root(data_root()); }

int run_guarded(const std::function<int()>& body) {
  try {
    return body();
  } catch (const core::InputError& e) {
    std::cerr << "error: " << e.what() << "\n";
    return kExitBadInput;
  } catch (const core::IoError& e) {
    std::cerr << "I/O error: " << e.what() << "\n";
    return kExitIoError;
  } catch (const std::filesystem::filesystem_error& e) {
    std::cerr << "I/O error: " << e.what() << "\n";
    return kExitIoError;
  } catch (const std::bad_alloc&) {
    std::cerr << "error: out of host memory (the run is larger than this machine's memory or its limit; what was "
                 "finished is kept, and summary.json says the run did not end)\n";
    return kExitOutOfMemory;
  } catch (const std::exception& e) {
    std::cerr << "internal error: " << e.what() << "\n";
    return kExitInternalError;
  }
}

std::string uncalibrated_note(const core::Scenario& scenario) {
  const auto& keys = scenario.cluster.calibration.uncalibrated;
  if (keys.empty()) return {};
  std::string line = "note: " + scenario.name + ": absolute times rest on uncalibrated defaults for " +
                     scenario.cluster.hardware.gpu.model + ":";
  for (std::size_t i = 0; i < keys.size(); ++i) line += (i ? ", " : " ") + keys[i];
  return line + " (measure them: prefetchlab calibrate, or set them under cluster.calibration)";
}

void drop_torn_tail(const std::filesystem::path& path, std::size_t complete_bytes, bool torn, const char* command) {
  if (!torn) return;
  std::filesystem::resize_file(path, complete_bytes);
  std::cerr << "note: " << path.string() << ": dropped a partial last row (the " << command << " was stopped mid-write)\n";
}

}  // namespace prefetchlab::apps
