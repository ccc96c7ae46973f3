#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "l3/reader/reader.hpp"

namespace l3 {
namespace {

void appendf(std::string& out, const char* fmt, auto... args) {
  char buf[512];
  std::snprintf(buf, sizeof buf, fmt, args...);
  out += buf;
}

double pool_busy(const Metrics& m) { return m.busy.decode + m.busy.transform + m.busy.assemble; }

}  // namespace

double Metrics::images_per_second() const noexcept {
  return wall_seconds > 0 ? static_cast<double>(examples) / wall_seconds : 0.0;
}

std::string Metrics::bottleneck() const {
  if (wall_seconds <= 0 || batches == 0) return "unknown";
  if (wait_seconds < 0.05 * wall_seconds) return "consumer";
  const double read_util = busy.read / wall_seconds;
  const double pool_util = workers ? pool_busy(*this) / (wall_seconds * workers) : 0.0;
  if (read_util >= pool_util) return "read";
  if (busy.decode >= busy.transform && busy.decode >= busy.assemble) return "decode";
  return busy.transform >= busy.assemble ? "transform" : "assemble";
}

std::string Metrics::summary() const {
  std::string s;
  const double wall = wall_seconds > 0 ? wall_seconds : 0.0;
  appendf(s, "batches %llu, examples %llu (fresh %llu, echoed %llu) in %.3f s: %.1f images/s\n",
          static_cast<unsigned long long>(batches), static_cast<unsigned long long>(examples),
          static_cast<unsigned long long>(fresh), static_cast<unsigned long long>(echoed), wall, images_per_second());
  appendf(s, "consumer waited %.3f s (%.1f%% of wall; max %.3f s; %llu of %llu batches waited > 1 ms)\n", wait_seconds,
          wall > 0 ? 100.0 * wait_seconds / wall : 0.0, max_wait_seconds,
          static_cast<unsigned long long>(stalled_batches), static_cast<unsigned long long>(batches));
  const double pool = pool_busy(*this);
  appendf(s,
          "busy seconds: read %.3f (%.0f%% of 1 thread) | decode %.3f | transform %.3f | assemble %.3f "
          "(%u workers, %.0f%% busy)\n",
          busy.read, wall > 0 ? 100.0 * busy.read / wall : 0.0, busy.decode, busy.transform, busy.assemble, workers,
          wall > 0 && workers ? 100.0 * pool / (wall * workers) : 0.0);
  appendf(s, "bytes read %.1f MB (%.1f MB/s); cache hits %llu, misses %llu, holds %llu records / %.1f MB\n",
          static_cast<double>(bytes_read) / 1e6, wall > 0 ? static_cast<double>(bytes_read) / 1e6 / wall : 0.0,
          static_cast<unsigned long long>(cache_hits), static_cast<unsigned long long>(cache_misses),
          static_cast<unsigned long long>(cache_records), static_cast<double>(cache_bytes) / 1e6);
  if (peer_cache) {
    const auto u = [](std::uint64_t v) { return static_cast<unsigned long long>(v); };
    appendf(s, "storage: %llu records read; peer cache: hits %llu (%.1f MB), misses %llu, stored %llu, refused %llu, "
               "corrupt %llu, failures %llu, skipped %llu\n",
            u(records_read), u(peer.hits), static_cast<double>(peer.bytes) / 1e6, u(peer.misses), u(peer.stores),
            u(peer.refused), u(peer.corrupt), u(peer.failures), u(peer.skipped));
  }
  appendf(s, "errors: corrupt records %llu, replaced %llu, batches raised %llu\n",
          static_cast<unsigned long long>(corrupt), static_cast<unsigned long long>(replaced),
          static_cast<unsigned long long>(raised));
  const std::string b = bottleneck();
  if (b == "consumer") {
    s += "bound by: consumer (the input pipeline keeps up; the consumer waited < 5% of the time)\n";
  } else if (b == "read") {
    appendf(s, "bound by: read (read thread %.0f%% busy)\n", wall > 0 ? 100.0 * busy.read / wall : 0.0);
  } else if (b != "unknown") {
    const double part = b == "decode" ? busy.decode : b == "transform" ? busy.transform : busy.assemble;
    appendf(s, "bound by: %s (%.0f%% of worker time; worker pool %.0f%% busy)\n", b.c_str(),
            pool > 0 ? 100.0 * part / pool : 0.0, wall > 0 && workers ? 100.0 * pool / (wall * workers) : 0.0);
  } else {
    s += "bound by: unknown (no batches)\n";
  }
  return s;
}

std::string Metrics::to_json() const {
  nlohmann::ordered_json j = {
      {"batches", batches},
      {"examples", examples},
      {"fresh", fresh},
      {"echoed", echoed},
      {"wall_seconds", wall_seconds},
      {"images_per_second", images_per_second()},
      {"wait_seconds", wait_seconds},
      {"max_wait_seconds", max_wait_seconds},
      {"stalled_batches", stalled_batches},
      {"busy_seconds",
       {{"read", busy.read}, {"decode", busy.decode}, {"transform", busy.transform}, {"assemble", busy.assemble}}},
      {"workers", workers},
      {"bytes_read", bytes_read},
      {"records_read", records_read},
      {"cache", {{"hits", cache_hits}, {"misses", cache_misses}, {"bytes", cache_bytes}, {"records", cache_records}}},
      {"errors", {{"corrupt", corrupt}, {"replaced", replaced}, {"raised", raised}}},
      {"bottleneck", bottleneck()}};
  if (peer_cache)
    j["peer_cache"] = {{"hits", peer.hits},         {"misses", peer.misses},   {"bytes", peer.bytes},
                       {"stores", peer.stores},     {"refused", peer.refused}, {"corrupt", peer.corrupt},
                       {"failures", peer.failures}, {"skipped", peer.skipped}};
  return j.dump();
}

FeedPlan Metrics::feed_plan(double step_seconds, std::uint32_t batch_size) const {
  FeedPlan f;
  f.step_seconds = step_seconds;
  f.batch_size = batch_size;
  f.workers = workers;
  f.images_per_second_needed = step_seconds > 0 ? batch_size / step_seconds : 0.0;
  if (examples == 0 || step_seconds <= 0 || batch_size == 0) {
    f.limit = "unknown";
    return f;
  }
  const double per_example = pool_busy(*this) / static_cast<double>(examples);
  const double read_per_example = busy.read / static_cast<double>(examples);
  f.worker_seconds_per_batch = per_example * batch_size;
  f.read_seconds_per_batch = read_per_example * batch_size;
  f.workers_needed = f.worker_seconds_per_batch / step_seconds;
  const double by_workers = per_example > 0 ? workers / per_example : 0.0;
  const double by_read = read_per_example > 0 ? 1.0 / read_per_example : 0.0;
  f.max_images_per_second = by_workers > 0 && by_read > 0 ? std::min(by_workers, by_read) : std::max(by_workers, by_read);
  if (f.read_seconds_per_batch > step_seconds) {
    f.limit = "read";
  } else if (f.workers_needed > workers) {
    f.limit = "workers";
  } else {
    f.limit = "none";
  }
  return f;
}

std::string Metrics::feed_summary(double step_seconds, std::uint32_t batch_size) const {
  const FeedPlan f = feed_plan(step_seconds, batch_size);
  std::string s;
  if (f.limit == "unknown") return "what-if: no examples measured\n";
  appendf(s,
          "what-if: a step of %.1f ms per batch of %u needs %.0f images/s: %.2f worker threads (%.1f ms of worker "
          "time per batch; %u here, at most %.0f images/s), read thread %.0f%% busy",
          step_seconds * 1e3, batch_size, f.images_per_second_needed, f.workers_needed,
          f.worker_seconds_per_batch * 1e3, f.workers, f.max_images_per_second,
          100.0 * f.read_seconds_per_batch / step_seconds);
  if (f.limit == "none") {
    s += ": fed\n";
  } else if (f.limit == "workers") {
    appendf(s, ": STALLS, give it %u workers (on as many free cores)\n",
            static_cast<std::uint32_t>(std::ceil(f.workers_needed)));
  } else {
    s += ": STALLS on the read thread (cache the dataset in RAM or read faster storage)\n";
  }
  return s;
}

std::string Metrics::to_json(double step_seconds, std::uint32_t batch_size) const {
  nlohmann::ordered_json j = nlohmann::ordered_json::parse(to_json());
  const FeedPlan f = feed_plan(step_seconds, batch_size);
  j["what_if"] = {{"step_seconds", f.step_seconds},
                  {"batch_size", f.batch_size},
                  {"images_per_second_needed", f.images_per_second_needed},
                  {"worker_seconds_per_batch", f.worker_seconds_per_batch},
                  {"read_seconds_per_batch", f.read_seconds_per_batch},
                  {"workers_needed", f.workers_needed},
                  {"workers", f.workers},
                  {"max_images_per_second", f.max_images_per_second},
                  {"limit", f.limit}};
  return j.dump();
}

std::string ReaderState::to_json() const {
  nlohmann::ordered_json j = {{"version", 1},
                              {"seed", seed},
                              {"epoch", epoch},
                              {"consumed", consumed},
                              {"dataset_size", dataset_size},
                              {"world_size", world_size},
                              {"window_batches", window_batches}};
  return j.dump();
}

ReaderState ReaderState::from_json(const std::string& text) {
  ReaderState s;
  try {
    const nlohmann::json j = nlohmann::json::parse(text);
    if (!j.is_object() || j.value("version", 0) != 1) throw_error(errc::corrupt_header, "reader state: not version 1");
    s.seed = j.at("seed").get<std::uint64_t>();
    s.epoch = j.at("epoch").get<std::uint64_t>();
    s.consumed = j.at("consumed").get<std::uint64_t>();
    s.dataset_size = j.at("dataset_size").get<std::uint64_t>();
    s.world_size = j.at("world_size").get<std::uint32_t>();
    s.window_batches = j.at("window_batches").get<std::uint64_t>();
  } catch (const nlohmann::json::exception& e) {
    std::string detail = "reader state: ";
    detail += e.what();
    throw_error(errc::corrupt_header, detail);
  }
  if (s.consumed > s.dataset_size || s.world_size == 0)
    throw_error(errc::corrupt_header, "reader state: values out of range");
  return s;
}

}  // namespace l3
