// l3pack merge OUT PART_DIR...: one dataset from the outputs of --part i/n runs.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <memory>

#include "common.hpp"
#include "l3/convert/convert.hpp"

namespace l3::cli {
namespace {

struct MergeArguments {
  std::filesystem::path out;
  std::vector<std::filesystem::path> parts;
  bool in_place = false;
};

void run_merge(const MergeArguments& args) {
  if (args.in_place != args.parts.empty())
    throw Failure{"", args.in_place ? "--in-place commits the parts already in OUT: no PART_DIR"
                                    : "PART_DIR: the part folders are required (or --in-place)",
                  exit_usage};
  std::uint64_t records = 0;
  try {
    if (args.in_place) {
      records = commit_parts(args.out);
      std::printf("committed %s: %llu records\n", args.out.c_str(), static_cast<unsigned long long>(records));
      return;
    }
    records = merge_parts(args.out, args.parts);
  } catch (const Error& e) {
    // merge's errors name the part or file they concern (OUT is not always it);
    // parts that do not fit together are bad data, not usage.
    throw Failure{"", e.what(), exit_failure};
  }
  std::printf("merged %zu parts into %s: %llu records\n", args.parts.size(), args.out.c_str(),
              static_cast<unsigned long long>(records));
}

}  // namespace

void add_merge_command(CLI::App& app) {
  auto args = std::make_shared<MergeArguments>();
  CLI::App* command = app.add_subcommand(
      "merge", "Join the datasets of 'convert --part i/n' runs into one (shards hard-linked, or copied)");
  command->add_option("OUT", args->out, "Dataset folder to create")->required();
  command->add_option("PART_DIR", args->parts, "The n part folders, in any order");
  command->add_flag("--in-place", args->in_place,
                    "Commit OUT (a folder or s3://) where 'convert --part i/n --shared-out' runs wrote their "
                    "shards: checks the n part manifests and writes manifest.json; reads and moves no shard");
  command->footer("Examples:\n  l3pack merge ds/ part0/ part1/ part2/\n  l3pack merge --in-place ds/");
  command->callback([args] { run_merge(*args); });
}

}  // namespace l3::cli
