// Writes spec/vectors/shard/*.l3s and *.txt. Usage: l3_make_shard_vectors <dir>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "shard_vectors.hpp"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s <output dir>\n", argv[0]);
    return 2;
  }
  std::filesystem::path dir = argv[1];
  std::filesystem::create_directories(dir);
  for (const auto& v : l3::vectors::make_shard_vectors()) {
    std::ofstream(dir / (v.name + ".l3s"), std::ios::binary)
        .write(reinterpret_cast<const char*>(v.bytes.data()), static_cast<std::streamsize>(v.bytes.size()));
    std::ofstream(dir / (v.name + ".txt")) << v.expected << "\n" << v.why << "\n";
  }
  return 0;
}
