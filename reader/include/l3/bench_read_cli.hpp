// `l3pack bench-read DATASET [options]`: runs the reader over a dataset and
// prints its stall metrics (l3::Metrics::summary). Defined in
// converters/cli/cmd_bench_read.cpp; l3pack registers it with
// add_bench_read_command(app).
#pragma once

namespace CLI {
class App;
}

namespace l3::cli {

void add_bench_read_command(CLI::App& app);

}  // namespace l3::cli
