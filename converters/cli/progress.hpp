// Progress display for long l3pack runs: a bar updated in place on a terminal,
// plain lines every few seconds otherwise (logs, CI, pipes). Writes to stderr.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace l3::cli {

struct ProgressSample {
  std::uint64_t done = 0, total = 0, skipped = 0;
  std::uint64_t bytes_in = 0;  // source bytes read so far
  double seconds = 0;
};

class ProgressDisplay {
public:
  explicit ProgressDisplay(std::string what);  // what: "convert", "verify"
  void update(const ProgressSample& sample);
  // A message line (a warning) that must not be overwritten by the bar.
  void message(const std::string& line);
  // Ends the bar line, if any.
  void finish();

private:
  std::string render(const ProgressSample& sample) const;
  std::string what_;
  bool terminal_;
  bool bar_shown_ = false;
  double last_shown_ = -1;
};

// "1.2 MB", "3.4 GB": decimal units, as the summaries use.
std::string human_bytes(double bytes);

}  // namespace l3::cli
