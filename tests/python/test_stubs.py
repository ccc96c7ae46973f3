"""The installed type stub l3/_l3.pyi: generated from the extension at build time
(nanobind's stubgen), so it must parse and show the bound signatures with their
real defaults, and l3 must be marked as a typed package (py.typed)."""
import ast
import pathlib

import l3

PACKAGE = pathlib.Path(l3.__file__).parent


def stub_tree():
    path = PACKAGE / "_l3.pyi"
    assert path.is_file(), f"{path} is not installed"
    return ast.parse(path.read_text(), filename=str(path))


def functions(tree):
    return {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}


def classes(tree):
    return {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}


def defaults(fn):
    args = fn.args.args[len(fn.args.args) - len(fn.args.defaults):]
    return {a.arg: ast.literal_eval(d) for a, d in zip(args, fn.args.defaults)}


def test_package_is_marked_typed():
    assert (PACKAGE / "py.typed").is_file()


def test_codec_functions_carry_their_defaults():
    fns = functions(stub_tree())
    assert defaults(fns["decode"]) == {"threads": 1, "verify_checksum": True}
    assert defaults(fns["encode"]) == {"tile_width": 0, "tile_height": 0, "effort": 1, "threads": 1,
                                       "entropy": "auto"}
    assert [a.arg for a in fns["decode_region"].args.args][:5] == ["data", "x", "y", "width", "height"]


def test_bound_types_and_enums_are_in_the_stub():
    cls = classes(stub_tree())
    for name in ("ReaderOptions", "TransformOptions", "PeerCacheOptions", "Batch", "CropMode", "Layout", "DType",
                 "ErrorPolicy", "Remainder", "Verify"):
        assert name in cls, f"class {name} missing from the stub"
    members = {n.targets[0].id if isinstance(n, ast.Assign) else getattr(n.target, "id", None)
               for n in cls["CropMode"].body if isinstance(n, (ast.Assign, ast.AnnAssign))}
    assert {"random_resized", "center", "full"} <= members
    props = {n.name for n in cls["ReaderOptions"].body if isinstance(n, ast.FunctionDef)}
    assert {"batch_size", "workers", "transform", "seed"} <= props


def test_keyword_member_is_documented_not_emitted():
    # ErrorPolicy.raise cannot be written in Python; the stub (which must parse)
    # keeps `skip` and says how to spell `raise`.
    text = (PACKAGE / "_l3.pyi").read_text()
    cls = classes(stub_tree())["ErrorPolicy"]
    names = {n.targets[0].id for n in cls.body if isinstance(n, ast.Assign)}
    assert "skip" in names and "raise" not in names
    assert "ErrorPolicy['raise']" in text
