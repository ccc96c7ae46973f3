import struct

import numpy as np
import pytest

import l3
from conftest import random_image


@pytest.mark.parametrize("channels", [1, 2, 3, 4])
@pytest.mark.parametrize("shape", [(1, 1), (1, 17), (17, 1), (33, 65), (97, 131)])
def test_round_trip(channels, shape):
    rng = np.random.default_rng(channels * 1000 + shape[0])
    img = random_image(rng, shape[0], shape[1], channels)
    data = l3.encode(img)
    assert isinstance(data, bytes)
    out = l3.decode(data)
    assert out.dtype == np.uint8 and out.shape == (shape[0], shape[1], channels)
    np.testing.assert_array_equal(out, img)
    i = l3.info(data)
    assert (i["height"], i["width"], i["channels"]) == (shape[0], shape[1], channels)
    assert i["encoded_size"] == len(data)


def test_round_trip_options_and_2d():
    rng = np.random.default_rng(1)
    gray = random_image(rng, 50, 70, 1)[:, :, 0]
    for tw, th, effort, threads in [(16, 1, 0, 1), (256, 32, 1, 0), (64, 8, 1, 2)]:
        data = l3.encode(gray, tile_width=tw, tile_height=th, effort=effort, threads=threads)
        assert l3.info(data)["tile_width"] == tw
        np.testing.assert_array_equal(l3.decode(data, threads=threads)[:, :, 0], gray)
    # non-contiguous input (a transposed view) and bytearray / memoryview input
    rgb = random_image(rng, 30, 20, 3)
    view = rgb.transpose(1, 0, 2)
    data = l3.encode(view)
    np.testing.assert_array_equal(l3.decode(bytearray(data)), view)
    np.testing.assert_array_equal(l3.decode(memoryview(data)), view)


def test_deterministic_and_region():
    img = random_image(np.random.default_rng(3), 80, 90, 3)
    a, b = l3.encode(img, threads=1), l3.encode(img, threads=0)
    assert a == b
    np.testing.assert_array_equal(l3.decode_region(a, 10, 20, 33, 41), img[20:61, 10:43])


def test_decoded_array_owns_its_memory():
    img = random_image(np.random.default_rng(4), 20, 20, 3)
    out = l3.decode(l3.encode(img))
    del img
    arr = np.asarray(out)
    assert arr.base is not None  # held by the capsule owner, freed with the array
    assert arr.flags.writeable
    arr[0, 0, 0] ^= 1  # writable, ours


def test_encode_rejects_bad_arrays():
    with pytest.raises(ValueError, match="uint8"):
        l3.encode(np.zeros((4, 4, 3), np.float32))
    with pytest.raises(ValueError, match="channels"):
        l3.encode(np.zeros((4, 4, 5), np.uint8))
    with pytest.raises(ValueError, match="shape"):
        l3.encode(np.zeros((4,), np.uint8))
    with pytest.raises(ValueError, match="empty"):
        l3.encode(np.zeros((0, 4, 3), np.uint8))
    with pytest.raises(ValueError, match="tile"):
        l3.encode(np.zeros((4, 4, 3), np.uint8), tile_width=17)
    with pytest.raises(TypeError):
        l3.decode("not bytes")


def test_corrupt_streams_raise_data_error():
    img = random_image(np.random.default_rng(5), 40, 40, 3)
    data = bytearray(l3.encode(img))
    with pytest.raises(l3.DataError, match="magic"):
        l3.decode(b"XXXX" + bytes(data[4:]))
    with pytest.raises(l3.DataError):
        l3.decode(bytes(data[:20]))
    bad = bytearray(data)
    bad[-5] ^= 0xFF
    with pytest.raises(l3.DataError, match="checksum"):
        l3.decode(bytes(bad))
    assert issubclass(l3.DataError, ValueError)
    with pytest.raises(ValueError):  # callers may catch ValueError
        l3.info(b"")


def test_tile_copies():
    """Tiles equal to an earlier one are stored as copies (format version 5); info counts them."""
    cell = np.random.default_rng(7).integers(0, 256, (32, 256, 3), dtype=np.uint8)
    img = np.tile(cell, (4, 2, 1))  # 8 tiles of 256 x 32, all alike
    data = l3.encode(img)
    meta = l3.info(data)
    assert meta["version"] == 5 and meta["tile_copies"] == 7
    assert len(data) < 2 * len(l3.encode(cell))
    np.testing.assert_array_equal(l3.decode(data), img)
    assert l3.info(l3.encode(cell))["tile_copies"] == 0


def test_symbols():
    """Glyphs repeated across tiles on a white page are stored once in a dictionary and placed by
    patches (format version 15); info counts the patches; crops decode them too."""
    rng = np.random.default_rng(15)
    glyphs = [rng.integers(0, 200, (rng.integers(6, 15), rng.integers(5, 12)), dtype=np.uint8) for _ in range(8)]
    page = np.full((300, 600, 1), 255, np.uint8)
    for k in range(120):
        g = glyphs[k % len(glyphs)]
        y, x = 20 * (k // 30) + 10 + (k % 3), 19 * (k % 30) + 5
        page[y:y + g.shape[0], x:x + g.shape[1], 0] = g
    data = l3.encode(page)
    meta = l3.info(data)
    assert meta["version"] == 15 and meta["symbol_patches"] >= 100
    np.testing.assert_array_equal(l3.decode(data), page)
    np.testing.assert_array_equal(l3.decode_region(data, 250, 15, 101, 40), page[15:55, 250:351])
    assert l3.info(l3.encode(glyphs[0][:, :, None]))["symbol_patches"] == 0


def rans_tiles(data: bytes) -> int:
    """Coded tiles with mode bit 6 set (entropy-coded, spec/codec.md §4, §4.5)."""
    width, height, tw_log2, th = *struct.unpack_from("<II", data, 8), data[16], data[17]
    count = -(-width >> tw_log2) * -(-height // th)
    entries = struct.unpack_from(f"<{count}I", data, 28)
    offset, found = 28 + 4 * count, 0
    for entry in entries:
        if entry >> 31:  # a tile copy (§3.3): no bytes of its own
            continue
        mode = data[offset]
        found += (mode & 3) == 0 and bool(mode & 0x40)
        offset += entry
    return found


def test_encode_entropy_modes():
    rng = np.random.default_rng(5)
    img = np.cumsum(rng.integers(0, 3, (64, 256, 3)), axis=1).astype(np.uint8)  # gradients: rANS pays
    off, auto, best = (l3.encode(img, entropy=e) for e in ("off", "auto", "max"))
    # Rice codes only: v2, or v4 with zero rows, v5 with tile copies, v7 with plane contexts, v8 with
    # residual corrections, v10 with zero-row bitmaps, v12 with NW predictors or mirrored tiles (spec §11).
    assert rans_tiles(off) == 0 and rans_tiles(best) > 0
    assert l3.info(off)["version"] in (2, 4, 5, 7, 8, 10, 12)
    assert len(best) <= len(auto) <= len(off)
    assert l3.encode(img, entropy="7") == auto
    for data in (off, auto, best):
        np.testing.assert_array_equal(l3.decode(data), img)
    with pytest.raises(ValueError, match="must be auto, off, max or a percentage"):
        l3.encode(img, entropy="101")
