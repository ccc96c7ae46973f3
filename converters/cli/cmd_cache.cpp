// l3pack cache [show|clear]: the local cache of remote shards (spec/format.md §8.5.3).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <memory>

#include "common.hpp"
#include "l3/storage/storage.hpp"

namespace l3::cli {
namespace {

struct CacheArguments {
  std::string action = "show";
  std::filesystem::path dir;  // empty: L3_CACHE_DIR, ... (storage::cache_options_from_env)
};

void run_cache(const CacheArguments& args) {
  storage::CacheOptions options = about_file(args.dir, [] { return storage::cache_options_from_env(); });
  if (!args.dir.empty()) options.dir = args.dir;
  const storage::ShardCache cache(options);
  if (args.action == "clear") {
    const std::uint64_t freed = cache.clear();
    std::printf("cache:   %s\ncleared: %llu bytes\n", cache.dir().c_str(), static_cast<unsigned long long>(freed));
    return;
  }
  const storage::CacheSummary s = cache.summary();
  std::printf("cache:   %s\nshards:  %llu files, %llu bytes\n", s.dir.c_str(), static_cast<unsigned long long>(s.files),
              static_cast<unsigned long long>(s.bytes));
  std::printf("limit:   %s\n", options.max_bytes ? (std::to_string(options.max_bytes) + " bytes (LRU)").c_str()
                                                 : "none (never evicts; L3_CACHE_MAX_BYTES sets one)");
  if (s.temporaries) std::printf("partial: %llu downloads in progress or abandoned\n", static_cast<unsigned long long>(s.temporaries));
}

}  // namespace

void add_cache_command(CLI::App& app) {
  auto args = std::make_shared<CacheArguments>();
  CLI::App* cmd = app.add_subcommand("cache", "Show or clear the local cache of remote (s3://) shards");
  cmd->add_option("ACTION", args->action, "show (default) or clear")->check(CLI::IsMember({"show", "clear"}));
  cmd->add_option("--dir", args->dir, "Cache folder (default: $L3_CACHE_DIR, else ~/.cache/l3/shards)");
  cmd->callback([args] { run_cache(*args); });
}

}  // namespace l3::cli
