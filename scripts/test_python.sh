#!/usr/bin/env bash
# The Python package's tests: makes (or reuses) a virtual environment, installs
# numpy, pytest, nanobind, scikit-build-core, moto[server] (tests/python/test_s3.py), ray
# (tests/python/test_ray_convert.py: a loopback Ray instance), torch and torchvision from PyPI
# (each skipped when already importable), builds and installs l3 with
# `pip install .` from a clean build directory (warnings as errors), then runs
# pytest on tests/python and prints its summary line. Idempotent. Exits
# non-zero on any failure; the torch tests are never skipped: if torch cannot
# be installed the script fails.
#
# Environment:
#   L3_PY_VENV      the virtual environment (default ~/.cache/l3/venv-ci: kept across
#                   clones on one machine, so torch is downloaded once)
#   PYTHON          interpreter that creates it (default python3; needs >= 3.9)
#   L3_TORCH_INDEX  optional extra pip index for torch (for example
#                   https://download.pytorch.org/whl/cpu for the small CPU wheels);
#                   default: PyPI (the Linux wheels pull the CUDA libraries, ~5 GB,
#                   kept in pip's cache for later runs)
#   PYTEST_ARGS     extra pytest arguments
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${L3_PY_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/l3/venv-ci}"
python="${PYTHON:-python3}"
export CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}"

say() { echo "== test_python: $*"; }
die() { echo "== test_python: FAILED: $*" >&2; exit 1; }

if [[ ! -x "$venv/bin/python" ]]; then
  say "creating $venv"
  "$python" -m venv "$venv" || die "cannot create a virtual environment with $python"
fi
py="$venv/bin/python"
"$py" -c 'import sys; sys.exit(sys.version_info < (3, 9))' || die "Python >= 3.9 needed ($("$py" -V))"

need=()
for spec in numpy:numpy pytest:pytest nanobind:nanobind scikit_build_core:scikit-build-core "moto.server:moto[server]" \
            ray:ray; do
  "$py" -c "import ${spec%%:*}" 2>/dev/null || need+=("${spec##*:}")
done
if ((${#need[@]})); then
  say "pip install ${need[*]}"
  "$py" -m pip install "${need[@]}" || die "pip install ${need[*]}"
fi
if ! "$py" -c 'import torch, torchvision' 2>/dev/null; then
  extra=()
  [[ -n "${L3_TORCH_INDEX:-}" ]] && extra=(--extra-index-url "$L3_TORCH_INDEX")
  say "pip install torch torchvision ${extra[*]}"
  "$py" -m pip install "${extra[@]}" torch torchvision || die "cannot install torch + torchvision (the torch tests must run)"
  "$py" -c 'import torch, torchvision' || die "torch is installed but does not import"
fi

# A clean, non-editable build: remove the build directory and any installed copy.
# The directory sits beside build-ci (scripts/test.sh), one level below the
# root like it: ccache (CCACHE_BASEDIR) then sees the libraries' compile
# commands as identical to the Release build's and reuses its objects (one
# level deeper, every relative path differs and all of them compile again).
build_dir="$root/build-py-ci"
# The same compilers too: scikit-build-core sets CC and CXX from Python's
# sysconfig (gcc, g++) unless they are set, CMake's defaults (cc, c++) built
# build-ci, and ccache keys on the compiler's name.
export CC="${CC:-cc}" CXX="${CXX:-c++}"
rm -rf "$build_dir"
"$py" -m pip uninstall -y -q l3 >/dev/null 2>&1 || true
say "pip install . (build dir $build_dir)"
"$py" -m pip install --no-build-isolation -q "$root" \
  -C build-dir="$build_dir" -C cmake.define.L3_WERROR=ON || die "pip install ."

# `l3pack` for the tests that drive the CLI (test_ray_convert's --engine ray):
# $L3PACK, else the Release build's (scripts/test.sh builds build-ci first).
for candidate in "${L3PACK:-}" "$root/build-ci/converters/l3pack" "$root/build/converters/l3pack"; do
  if [[ -n "$candidate" && -x "$candidate" ]]; then export L3PACK="$candidate"; break; fi
done
# Import from the installed package, not the source tree.
cd "$root/tests/python"
"$py" -c 'import l3, l3.torch; print("l3", l3.__version__, "from", l3.__file__, "cuda:", l3.built_with_cuda)' \
  || die "import l3"
# GPU tests run where a CUDA device is; elsewhere they are deselected (and
# counted as such below), never skipped or passed.
gpus="$("$py" -c 'import l3; print(l3._l3.cuda_device_count() if l3.built_with_cuda else 0)' 2>/dev/null || echo 0)"
if [[ "$gpus" -gt 0 ]]; then select="not no_gpu"; else select="not gpu"; fi
say "CUDA devices: $gpus; running tests marked: $select"
log="$(mktemp)"
set +e
"$py" -m pytest -q -p no:cacheprovider -rs -m "$select" ${PYTEST_ARGS:-} "$root/tests/python" 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
set -e
summary="$(grep -E '^=*.* (passed|failed|error)' "$log" | tail -n 1 || true)"
rm -f "$log"
if grep -qiE '[0-9]+ skipped' <<<"$summary"; then
  say "summary: $summary"
  die "tests were skipped (every Python test must run in CI)"
fi
say "summary: ${summary:-no pytest summary}"
exit "$status"
