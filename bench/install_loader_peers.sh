#!/usr/bin/env bash
# Installs the training-loader peers of bench/loader_peers.py into their own venv
# (default /root/.cache/l3/venv-loaders), which sees the torch / torchvision / numpy of
# the CI venv through a .pth file (it never installs into that venv).
#
#   FFCV (raw pixels)         ffcv (PyPI sdist, built here: needs libturbojpeg0-dev,
#                             libopencv-dev and pkg-config from Debian) + numba
#   MosaicML MDS              mosaicml-streaming
#   WebDataset                webdataset
#   LitData                   litdata
#   NVIDIA DALI (CPU)         nvidia-dali-cuda120 (the CPU operators run without a GPU)
#   ImageFolder / PIL         torchvision (the CI venv's)
#
# Each peer is installed on its own: one that fails is reported (and left out by
# loader_peers.py, which says why) without stopping the others. Idempotent.
# Usage: bench/install_loader_peers.sh [VENV]    (L3_CI_VENV: the venv with torch)
set -u
venv="${1:-/root/.cache/l3/venv-loaders}"
ci_venv="${L3_CI_VENV:-/root/.cache/l3/venv-ci}"
say() { echo "install_loader_peers: $*" >&2; }

if [ ! -d "$ci_venv/lib/python3.11/site-packages/torch" ]; then
  say "no torch in $ci_venv (run scripts/test_python.sh once, or set L3_CI_VENV)"; exit 1
fi
if ! dpkg -s libturbojpeg0-dev libopencv-dev pkg-config >/dev/null 2>&1; then
  say "apt-get install libturbojpeg0-dev libopencv-dev pkg-config (for ffcv)"
  apt-get install -y -q libturbojpeg0-dev libopencv-dev pkg-config >/dev/null ||
    { apt-get update -q >/dev/null && apt-get install -y -q libturbojpeg0-dev libopencv-dev pkg-config >/dev/null; } ||
    say "apt-get failed: ffcv will not build"
fi
[ -x "$venv/bin/python" ] || python3 -m venv "$venv" || { say "cannot create $venv"; exit 1; }
echo "$ci_venv/lib/python3.11/site-packages" > "$venv/lib/python3.11/site-packages/venv-ci.pth"
pip=("$venv/bin/python" -m pip install -q)

failed=()
try() {  # try NAME PACKAGE...
  local name="$1"; shift
  say "pip install $*"
  "${pip[@]}" "$@" || { say "FAILED: $name ($*)"; failed+=("$name"); }
}
try mds mosaicml-streaming
try webdataset webdataset
try litdata litdata
# ffcv 1.0.2's setup.py finds OpenCV and libturbojpeg with pkg-config; it builds
# against the numpy already present (no build isolation, so it is the CI venv's numpy).
try ffcv-deps numba terminaltables fastprogress assertpy psutil tqdm "opencv-python-headless"
try ffcv --no-build-isolation --no-deps ffcv==1.0.2
try dali nvidia-dali-cuda120
if [ "${#failed[@]}" -gt 0 ]; then
  say "not installed: ${failed[*]} (loader_peers.py reports them as unavailable)"
fi
"$venv/bin/python" - <<'EOF'
import importlib
for m in ("ffcv", "streaming", "webdataset", "litdata", "nvidia.dali", "torchvision"):
    try:
        importlib.import_module(m)
        print(f"  {m}: ok")
    except Exception as e:  # report exactly why
        print(f"  {m}: unavailable: {type(e).__name__}: {e}")
EOF
exit 0
