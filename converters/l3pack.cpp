// l3pack: command-line tool for .l3i images and sharded datasets.
//
// Each subcommand lives in cli/cmd_<name>.cpp and registers itself through
// add_<name>_command() (declared in cli/common.hpp); to add one, write the file,
// declare the function, call it below and list the file in CMakeLists.txt.
// Subcommand code throws cli::Failure; main() prints it as one line and exits.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "cli/common.hpp"
#include "l3/common/text.hpp"
#include "l3/common/version.hpp"

namespace {

// True when `reason` already names the path `subject` ("<subject>/..." or
// "<subject>:" at the start, after a space or a quote): it is then printed once.
bool names_subject(const std::string& reason, const std::string& subject) {
  for (std::size_t at = reason.find(subject); at != std::string::npos; at = reason.find(subject, at + 1)) {
    const std::size_t end = at + subject.size();
    const bool starts = at == 0 || reason[at - 1] == ' ' || reason[at - 1] == '\'';
    const bool ends = end == reason.size() || reason[end] == '/' || reason[end] == ':' || reason[end] == '\'';
    if (starts && ends) return true;
  }
  return false;
}

// One line whatever the subject holds (a file name or key may contain newlines),
// and each path once.
void print_error(const std::string& subject, const std::string& reason) {
  const std::string why = l3::escape_control(reason);
  if (subject.empty() || names_subject(reason, subject)) std::fprintf(stderr, "l3pack: error: %s\n", why.c_str());
  else std::fprintf(stderr, "l3pack: error: %s: %s\n", l3::escape_control(subject).c_str(), why.c_str());
}

// CLI11 messages may span lines; the contract is one line on stderr.
std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }

// The first argument that is not an option, when it names no subcommand: CLI11
// would report it as an unexpected argument, without saying it was meant as a command.
const char* unknown_command(CLI::App& app, int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (argv[i][0] == '-') {
      // An option's value (`--endpoint-url URL`) is not a command.
      const CLI::Option* option = app.get_option_no_throw(argv[i]);
      if (option != nullptr && option->get_expected_min() > 0) ++i;
      continue;
    }
    auto named = [&](CLI::App* command) { return command->check_name(argv[i]); };
    return app.get_subcommands(named).empty() ? argv[i] : nullptr;
  }
  return nullptr;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"l3pack: convert, inspect and pack lossless .l3i images", "l3pack"};
  app.set_version_flag("--version", std::string("l3pack ") + l3::version());
  app.require_subcommand(1);
  // Per call, for s3:// datasets: wins over AWS_ENDPOINT_URL(_S3) (spec/format.md §8.5.2).
  app.add_option_function<std::string>(
         "--endpoint-url", [](const std::string& url) { ::setenv("AWS_ENDPOINT_URL_S3", url.c_str(), 1); },
         "S3 endpoint for s3:// datasets (before the command; overrides AWS_ENDPOINT_URL)")
      ->trigger_on_parse();
  l3::cli::add_encode_command(app);
  l3::cli::add_decode_command(app);
  l3::cli::add_info_command(app);
  l3::cli::add_convert_command(app);
  l3::cli::add_verify_command(app);
  l3::cli::add_ls_command(app);
  l3::cli::add_extract_command(app);
  l3::cli::add_merge_command(app);
  l3::cli::add_bench_command(app);
  l3::cli::add_bench_read_command(app);
  l3::cli::add_cache_command(app);
  // Set after the subcommands are added: CLI11 copies a parent's footer into each
  // new subcommand, and each command's --help shows its own examples.
  app.footer(
      "Examples:\n"
      "  l3pack encode photo.png photo.l3i     encode (PNG, JPEG, PPM/PGM/PAM in)\n"
      "  l3pack decode photo.l3i photo.png     decode (.png, .ppm, .pgm, .pam, .pnm out)\n"
      "  l3pack info photo.l3i --json          header, tiles and bits per pixel\n"
      "  l3pack convert photos/ ds/            folder (one subfolder per class) to a dataset\n"
      "  l3pack verify ds/ --source photos/    checksums, decodes, pixels vs the sources\n"
      "  l3pack info ds/ | ls ds/ | extract ds/ out/ | merge ds/ part0/ part1/\n"
      "  l3pack bench photos/                  bytes and decode speed against PNG\n"
      "  l3pack bench-read ds/ --crop 224      the streaming reader's throughput and stalls\n"
      "  l3pack info s3://bucket/ds            any dataset may be s3://bucket/prefix (AWS_* variables)\n"
      "Run 'l3pack <command> --help' for a command's options.\n"
      "Exit status: 0 success, 1 bad data or I/O error, 2 bad command line.");
  if (const char* name = unknown_command(app, argc, argv)) {
    print_error("", std::string("unknown command '") + name + "' (run 'l3pack --help')");
    return l3::cli::exit_usage;
  }
  try {
    app.parse(argc, argv);
    return 0;
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e);  // --help, --version
    print_error("", first_line(e.what()) + " (run 'l3pack --help')");
    return l3::cli::exit_usage;
  } catch (const l3::cli::Failure& failure) {
    print_error(failure.subject, first_line(failure.reason));
    return failure.exit_code;
  } catch (const std::exception& e) {
    print_error("", first_line(e.what()));
    return l3::cli::exit_failure;
  }
}
