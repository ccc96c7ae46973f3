import numpy as np
import pytest

import l3


def loader(d, **kw):
    args = dict(batch_size=8, size=16, workers=2, seed=3)
    args.update(kw)
    return l3.Loader(d, **args)


def test_epoch_covers_every_record_once(small_dataset):
    d, _ = small_dataset
    with loader(d) as ld:
        assert len(ld) == 5 and ld.dataset_size == 40 and ld.classes == ["a", "b", "c", "d"]
        seen, labels = [], []
        for b in ld:
            assert b.data.shape == (8, 3, 16, 16) and b.data.dtype == np.float32
            assert b.labels.dtype == np.int64 and b.records.dtype == np.uint64
            seen.extend(b.records.tolist())
            labels.extend(b.labels.tolist())
        assert sorted(seen) == list(range(40))
        assert labels == [r % 4 for r in seen]
        # iterating again continues with the next epoch (a different order)
        seen2 = [r for b in ld for r in b.records.tolist()]
        assert ld.epoch == 1 and sorted(seen2) == list(range(40)) and seen2 != seen


@pytest.mark.parametrize("layout,dtype,shape", [("hwc", "uint8", (8, 12, 16, 3)), ("chw", "float16", (8, 3, 12, 16)),
                                                ("chw", "float32", (8, 3, 12, 16))])
def test_layout_dtype(small_dataset, layout, dtype, shape):
    d, _ = small_dataset
    with loader(d, size=(12, 16), layout=layout, dtype=dtype, crop="full", flip=0.0) as ld:
        b = ld.next()
        assert b.data.shape == shape and b.data.dtype == np.dtype(dtype)


def test_uint8_center_matches_dataset_pixels(small_dataset):
    # crop="center" with center_fraction=0 takes an exact crop: compare with the decoded image.
    d, images = small_dataset
    with loader(d, size=16, crop="center", center_fraction=0, flip=0.0, layout="hwc", dtype="uint8",
                shuffle=False) as ld:
        b = ld.next()
        for k, r in enumerate(b.records.tolist()):
            img = images[r]
            if img.shape[2] != 3:
                continue
            h, w = img.shape[:2]
            y, x = (h - 16) // 2, (w - 16) // 2
            np.testing.assert_array_equal(b.data[k], img[y:y + 16, x:x + 16])


def test_normalisation(small_dataset):
    d, _ = small_dataset
    kw = dict(size=16, crop="full", flip=0.0, shuffle=False)
    with loader(d, dtype="uint8", **kw) as a, loader(d, normalize=False, **kw) as b, \
            loader(d, mean=(0.5, 0.5, 0.5), std=(0.25, 0.25, 0.25), **kw) as c:
        u8, f, n = a.next().data, b.next().data, c.next().data
        np.testing.assert_allclose(f, u8 / 255.0, atol=1e-6)
        np.testing.assert_allclose(n, (u8 / 255.0 - 0.5) / 0.25, atol=1e-5)


def test_rank_partition_is_exact(small_dataset):
    d, _ = small_dataset
    # 40 records, world 5, batch 8: one step, every record exactly once.
    seen = []
    for r in range(5):
        with loader(d, rank=r, world_size=5) as ld:
            for b in ld:
                seen.extend(b.records.tolist())
    assert sorted(seen) == list(range(40))


def test_drop_last_and_pad(small_dataset):
    d, _ = small_dataset
    with loader(d, batch_size=16, drop_last=True) as ld:
        assert len(ld) == 2
    with loader(d, batch_size=16) as ld:
        recs = [r for b in ld for r in b.records.tolist()]
        assert len(recs) == 48 and set(recs) == set(range(40))  # padded by wrapping around


def test_copy_keeps_batches_valid(small_dataset):
    d, _ = small_dataset
    with loader(d, prefetch=1, dtype="uint8") as ld:
        first = ld.next()
        snapshot = first.data.copy()
        held = [ld.next() for _ in range(4)]  # the reader's ring is reused many times over
        np.testing.assert_array_equal(first.data, snapshot)
        ptrs = {b.data.__array_interface__["data"][0] for b in [first] + held}
        assert len(ptrs) == 5  # every batch held has its own buffer


def test_owned_batches_equal_borrowed_ones_and_outlive_the_epoch(small_dataset):
    # Owned batches (the default) are the ring's buffers handed over to the arrays
    # (Reader::detach): every one kept to the end of the epoch holds the bytes a
    # borrowed batch had when it was handed out.
    d, _ = small_dataset
    with loader(d, prefetch=1, copy=False, dtype="uint8") as ld:
        borrowed = [b.data.copy() for b in ld]
    with loader(d, prefetch=1, dtype="uint8") as ld:
        kept = list(ld)
        ld.set_epoch(1)
        ld.next()  # the ring goes on into the next epoch
    assert len(kept) == len(borrowed) > 2
    for b, want in zip(kept, borrowed):
        np.testing.assert_array_equal(b.data, want)


def test_copy_buffers_are_recycled(small_dataset):
    d, _ = small_dataset
    with loader(d, dtype="uint8") as ld:
        ptrs = []
        for b in ld:
            ptrs.append(b.data.__array_interface__["data"][0])
            del b
        assert len(set(ptrs)) < len(ptrs)  # released batches' buffers are reused


def test_borrowed_batches_alias_the_ring(small_dataset):
    d, _ = small_dataset
    with loader(d, prefetch=1, copy=False, dtype="uint8") as ld:
        ptrs = [ld.next().data.__array_interface__["data"][0] for _ in range(5)]
        assert len(set(ptrs)) <= 2  # ring of prefetch + 1 buffers: no copies, reused
    # the arrays keep the reader's memory alive after close()
    ld2 = loader(d, copy=False, dtype="uint8")
    b = ld2.next()
    ld2.close()
    del ld2
    assert int(b.data.sum()) >= 0


def test_resume_gives_exactly_the_remaining_samples(small_dataset):
    d, _ = small_dataset
    with loader(d, batch_size=4) as ld:
        full = [r for b in ld for r in b.records.tolist()]
    with loader(d, batch_size=4) as ld:
        first = [r for _ in range(3) for r in ld.next().records.tolist()]
        st = ld.state()
    assert st["consumed"] == 12 and st["dataset_size"] == 40
    with loader(d, batch_size=4) as ld:
        ld.restore(st)
        rest = [r for b in ld for r in b.records.tolist()]
    assert first + rest == full
    # under another world size: two ranks together get exactly the remaining samples
    got = []
    for r in range(2):
        with loader(d, batch_size=2, rank=r, world_size=2) as ld:
            ld.restore(st)
            got.extend(x for b in ld for x in b.records.tolist())
    assert sorted(got) == sorted(full[12:])


def test_state_is_json_string_too(small_dataset):
    import json
    d, _ = small_dataset
    with loader(d) as ld:
        ld.next()
        s = json.dumps(ld.state())
    with loader(d) as ld:
        ld.restore(s)
        assert ld.state()["consumed"] == 8


def test_stats(small_dataset):
    d, _ = small_dataset
    with loader(d, cache_bytes=1 << 20) as ld:
        n = sum(1 for _ in ld)
        for _ in ld:  # second epoch: cache hits
            pass
        s = ld.stats()
        assert s["batches"] == 2 * n and s["examples"] == 2 * n * 8
        assert s["cache"]["hits"] >= 40
        for k in ("wait_seconds", "max_wait_seconds", "stalled_batches", "busy_seconds", "images_per_second",
                  "bottleneck"):
            assert k in s
        assert "images/s" in ld.stats_summary()
        w = ld.stats(step_seconds=0.05)["what_if"]
        assert w["step_seconds"] == 0.05 and w["batch_size"] == 8 and w["images_per_second_needed"] == 160
        busy = s["busy_seconds"]
        per_batch = (busy["decode"] + busy["transform"] + busy["assemble"]) / s["examples"] * 8
        assert abs(w["worker_seconds_per_batch"] - per_batch) < 0.5 * per_batch + 1e-3  # stats moved on a little
        assert w["workers_needed"] == pytest.approx(w["worker_seconds_per_batch"] / 0.05)
        assert w["limit"] in ("none", "workers", "read")
        with pytest.raises(ValueError):
            ld.stats(step_seconds=0)
        ld.reset_stats()
        assert ld.stats()["batches"] == 0


def test_echo(small_dataset):
    d, _ = small_dataset
    with loader(d, echo=2) as ld:
        recs = [r for b in ld for r in b.records.tolist()]
        s = ld.stats()
    assert len(recs) == 80 and sorted(set(recs)) == list(range(40))
    assert s["fresh"] == 40 and s["echoed"] == 40


def test_loader_option_errors(small_dataset):
    d, _ = small_dataset
    with pytest.raises(ValueError, match="layout"):
        loader(d, layout="nchw")
    with pytest.raises(ValueError, match="dtype"):
        loader(d, dtype="float64")
    with pytest.raises(ValueError, match="crop"):
        loader(d, crop="zoom")
    with pytest.raises(ValueError, match="rank"):
        loader(d, rank=2, world_size=2)
    with pytest.raises(ValueError, match="batch size"):
        loader(d, batch_size=0)
    with pytest.raises(ValueError, match="on_error"):
        loader(d, on_error="ignore")
    with pytest.raises(ValueError, match=">= 0"):
        loader(d, seed=-1)


def test_cuda_device_is_a_clear_error(small_dataset):
    d, _ = small_dataset
    with pytest.raises(ValueError, match="device='cuda'"):
        loader(d, device="cuda")
    with pytest.raises(ValueError, match="device"):
        loader(d, device="tpu")


def test_closed_loader(small_dataset):
    d, _ = small_dataset
    ld = loader(d)
    ld.close()
    with pytest.raises(ValueError, match="closed"):
        ld.next()


def test_concurrent_consumers_are_serialised(small_dataset):
    import threading
    d, _ = small_dataset
    with loader(d, batch_size=2) as ld:
        got, errors = [], []

        def consume():
            try:
                while True:
                    b = ld.next()
                    if b is None:
                        return
                    got.extend(b.records.tolist())
            except Exception as e:  # pragma: no cover - reported below
                errors.append(e)

        threads = [threading.Thread(target=consume) for _ in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors and sorted(got) == list(range(40))


def test_close_while_a_thread_waits(small_dataset):
    import threading
    d, _ = small_dataset
    ld = loader(d, batch_size=2, workers=1)
    out, closed = [], []

    def consume():
        try:
            for b in ld:
                out.extend(b.records.tolist())
        except ValueError as e:
            closed.append(str(e))

    t = threading.Thread(target=consume)
    t.start()
    ld.close()  # a running next() keeps its reference; later calls raise
    t.join()
    assert len(out) == 40 or closed == ["the loader is closed"] or closed[0].endswith("the loader is closed")
    with pytest.raises(ValueError, match="closed"):
        ld.next()
