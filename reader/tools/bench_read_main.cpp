// l3_bench_read: a stand-alone driver of `l3pack bench-read` (same command code,
// converters/cli/cmd_bench_read.cpp) until l3pack registers the command.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>

#include "common.hpp"
#include "l3/bench_read_cli.hpp"

int main(int argc, char** argv) {
  CLI::App app{"l3_bench_read: the reader's throughput and stall metrics", "l3_bench_read"};
  app.require_subcommand(1);
  l3::cli::add_bench_read_command(app);
  try {
    app.parse(argc, argv);
    return 0;
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);
    std::string what = e.what();
    std::fprintf(stderr, "l3_bench_read: error: %s\n", what.substr(0, what.find('\n')).c_str());
    return l3::cli::exit_usage;
  } catch (const l3::cli::Failure& f) {
    std::fprintf(stderr, "l3_bench_read: error: %s: %s\n", f.subject.c_str(), f.reason.c_str());
    return f.exit_code;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "l3_bench_read: error: %s\n", e.what());
    return l3::cli::exit_failure;
  }
}
