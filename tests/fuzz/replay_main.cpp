// Replay driver: main() for a fuzz target built without libFuzzer (gcc, the
// normal build). Runs LLVMFuzzerTestOneInput on every file under the given
// folders (or the given files), so every build checks the seed corpora and
// the crashers. A file may come with "<file>.expect" holding the outcome the
// input must have: "ok" (no error), "error" (any l3::Error) or an error's
// errc_name / number ("corrupt tile table" or "105"). Files ending in
// .expect, .txt or .md are not inputs. A folder that does not exist is
// skipped; running no input at all is a failure.
#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <unistd.h>

#include "fuzz_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace fs = std::filesystem;

namespace {

char g_current[4096];

extern "C" void on_fatal_signal(int sig) {
  const char msg[] = "replay: crashed on input ";
  ssize_t r = write(2, msg, sizeof msg - 1);
  r = write(2, g_current, std::strlen(g_current));
  r = write(2, "\n", 1);
  (void)r;
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

bool is_input(const fs::path& p) {
  const std::string ext = p.extension().string();
  return ext != ".expect" && ext != ".txt" && ext != ".md" && p.filename().string()[0] != '.';
}

std::string trim(std::string s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  std::size_t i = 0;
  while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
  return s.substr(i);
}

bool matches(std::string expect, l3::errc got) {
  std::replace(expect.begin(), expect.end(), '_', ' ');  // "corrupt_tile" names the same errc
  if (expect == "ok") return got == l3::errc::ok;
  if (expect == "error") return got != l3::errc::ok;
  return got != l3::errc::ok && (expect == l3::errc_name(got) || expect == std::to_string(static_cast<int>(got)));
}

}  // namespace

int main(int argc, char** argv) {
  std::signal(SIGABRT, on_fatal_signal);
  std::signal(SIGSEGV, on_fatal_signal);
  std::signal(SIGBUS, on_fatal_signal);
  std::signal(SIGFPE, on_fatal_signal);
  std::vector<fs::path> inputs;
  for (int a = 1; a < argc; ++a) {
    const fs::path p = argv[a];
    if (fs::is_regular_file(p)) {
      inputs.push_back(p);
    } else if (fs::is_directory(p)) {
      for (const auto& e : fs::recursive_directory_iterator(p))
        if (e.is_regular_file() && is_input(e.path())) inputs.push_back(e.path());
    } else {
      std::fprintf(stderr, "replay: %s does not exist, skipped\n", argv[a]);
    }
  }
  std::sort(inputs.begin(), inputs.end());
  if (inputs.empty()) {
    std::fprintf(stderr, "replay: no inputs found\n");
    return 1;
  }
  int failures = 0, checked = 0;
  for (const fs::path& p : inputs) {
    std::snprintf(g_current, sizeof g_current, "%s", p.c_str());
    std::ifstream f(p, std::ios::binary);
    const std::vector<char> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    // A heap copy of exactly the input's size, so a sanitizer build sees overreads.
    std::vector<std::uint8_t> copy(bytes.begin(), bytes.end());
    try {
      LLVMFuzzerTestOneInput(copy.data(), copy.size());
    } catch (const std::exception& e) {
      std::fprintf(stderr, "replay: FAIL %s: exception escaped: %s\n", p.c_str(), e.what());
      ++failures;
      continue;
    }
    fs::path expect_file = p;
    expect_file += ".expect";
    if (fs::exists(expect_file)) {
      std::ifstream ef(expect_file);
      const std::string expect = trim(std::string(std::istreambuf_iterator<char>(ef), std::istreambuf_iterator<char>()));
      const l3::errc got = l3fuzz::last_error();
      ++checked;
      if (!matches(expect, got)) {
        std::fprintf(stderr, "replay: FAIL %s: expected \"%s\", got \"%s\"\n", p.c_str(), expect.c_str(),
                     got == l3::errc::ok ? "ok" : l3::errc_name(got));
        ++failures;
      }
    }
  }
  std::printf("replay: %zu inputs, %d with an expected outcome, %d failures\n", inputs.size(), checked, failures);
  return failures ? 1 : 0;
}
