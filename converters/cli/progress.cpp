#include "progress.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdio>

namespace l3::cli {
namespace {

constexpr double kTerminalInterval = 0.2;  // seconds between bar redraws
constexpr double kPlainInterval = 5.0;     // seconds between plain lines

std::string duration(double seconds) {
  char text[32];
  long s = static_cast<long>(seconds + 0.5);
  if (s >= 3600) std::snprintf(text, sizeof text, "%ldh%02ldm", s / 3600, s / 60 % 60);
  else std::snprintf(text, sizeof text, "%ldm%02lds", s / 60, s % 60);
  return text;
}

}  // namespace

std::string human_bytes(double bytes) {
  const char* units[] = {"B", "kB", "MB", "GB", "TB"};
  int unit = 0;
  while (bytes >= 1000 && unit < 4) {
    bytes /= 1000;
    ++unit;
  }
  char text[32];
  std::snprintf(text, sizeof text, unit == 0 ? "%.0f %s" : "%.1f %s", bytes, units[unit]);
  return text;
}

ProgressDisplay::ProgressDisplay(std::string what) : what_(std::move(what)), terminal_(::isatty(STDERR_FILENO) == 1) {}

std::string ProgressDisplay::render(const ProgressSample& s) const {
  const double seconds = std::max(s.seconds, 1e-9);
  const double rate = static_cast<double>(s.done) / seconds;
  const double remaining = rate > 0 ? static_cast<double>(s.total - std::min(s.done, s.total)) / rate : 0;
  const double fraction = s.total == 0 ? 1.0 : static_cast<double>(s.done) / static_cast<double>(s.total);
  char text[256];
  std::snprintf(text, sizeof text, "%llu/%llu images (%.0f%%), %llu skipped, %.1f images/s, %s/s, ETA %s",
                static_cast<unsigned long long>(s.done), static_cast<unsigned long long>(s.total), fraction * 100,
                static_cast<unsigned long long>(s.skipped), rate,
                human_bytes(static_cast<double>(s.bytes_in) / seconds).c_str(), duration(remaining).c_str());
  if (!terminal_) return what_ + ": " + text;
  constexpr int kWidth = 24;
  const int filled = static_cast<int>(fraction * kWidth);
  std::string bar = "[";
  bar.append(static_cast<std::size_t>(filled), '#');
  bar.append(static_cast<std::size_t>(kWidth - filled), '.');
  bar += "] ";
  return bar + text;
}

void ProgressDisplay::update(const ProgressSample& sample) {
  const double interval = terminal_ ? kTerminalInterval : kPlainInterval;
  const bool last = sample.done >= sample.total;
  if (sample.seconds - last_shown_ < interval && !(last && terminal_)) return;
  last_shown_ = sample.seconds;
  if (terminal_) {
    std::fprintf(stderr, "\r\033[K%s", render(sample).c_str());
    bar_shown_ = true;
  } else {
    std::fprintf(stderr, "%s\n", render(sample).c_str());
  }
  std::fflush(stderr);
}

void ProgressDisplay::message(const std::string& line) {
  if (bar_shown_) std::fprintf(stderr, "\r\033[K");
  std::fprintf(stderr, "%s\n", line.c_str());
  bar_shown_ = false;
  last_shown_ = -1;  // redraw the bar at the next update
}

void ProgressDisplay::finish() {
  if (bar_shown_) std::fprintf(stderr, "\n");
  bar_shown_ = false;
}

}  // namespace l3::cli
