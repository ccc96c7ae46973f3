"""One version source: project(l3 VERSION ...) in CMakeLists.txt gives l3::version(),
l3.__version__, the package metadata and `l3pack --version`."""
import importlib.metadata
import pathlib
import re

import l3

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _cmake_version() -> str:
    text = (ROOT / "CMakeLists.txt").read_text()
    m = re.search(r"project\(l3 VERSION ([0-9]+\.[0-9]+\.[0-9]+)", text)
    assert m, "CMakeLists.txt names no project version"
    return m.group(1)


def test_version_comes_from_cmakelists():
    v = _cmake_version()
    assert l3.__version__ == v
    assert l3._l3.version() == v
    assert importlib.metadata.version("l3") == v
