"""KVEventTracker: SGLang's own KV event structs -> router on_cached / on_evicted."""

from __future__ import annotations

import msgspec
import pytest

pytestmark = pytest.mark.engine

kv = pytest.importorskip("sglang.srt.disaggregation.kv_events")

from sglang_fair.binding.controller.kv_events import KVEventTracker  # noqa: E402
from sglang_fair.router import make_router  # noqa: E402
from sglang_fair.router.base import Router  # noqa: E402


class Recorder(Router):
    name = "recorder"

    def __init__(self, n: int) -> None:
        super().__init__(n)
        self.calls: list[tuple] = []

    def route(self, rid, client, tokens, max_new_tokens):
        return 0

    def on_cached(self, worker, tokens):
        self.calls.append(("cached", worker, list(tokens)))

    def on_evicted(self, worker, tokens):
        self.calls.append(("evicted", worker, list(tokens)))

    def on_cache_cleared(self, worker):
        self.calls.append(("cleared", worker))


def stored(hashes, parent, tokens, size=1, medium=None):
    return kv.BlockStored(block_hashes=hashes, parent_block_hash=parent, token_ids=tokens, block_size=size,
                          lora_id=None, medium=medium)


def frames(seq: int, *events) -> list[bytes]:
    payload = msgspec.msgpack.encode(kv.KVEventBatch(ts=0.0, events=list(events)))
    return [b"", seq.to_bytes(8, "big"), payload]


def test_paths_rebuilt_from_chained_blocks_and_removals_prune_the_shallowest() -> None:
    rec = Recorder(2)
    t = KVEventTracker(rec, 2)
    t.handle_frames(1, frames(0, stored([11, 12], None, [1, 2, 3, 4], size=2)))
    t.handle_frames(1, frames(1, stored([13], 12, [5, 6], size=2), stored([21], 11, [7, 8], size=2)))
    assert rec.calls == [("cached", 1, [1, 2, 3, 4]), ("cached", 1, [1, 2, 3, 4, 5, 6]), ("cached", 1, [1, 2, 7, 8])]
    rec.calls.clear()
    # Removing 12 and its child 13 together: one prune at the start of block 12.
    t.handle_frames(1, frames(2, kv.BlockRemoved(block_hashes=[12, 13])))
    assert rec.calls == [("evicted", 1, [1, 2, 3])]
    rec.calls.clear()
    t.handle_frames(1, frames(3, kv.BlockRemoved(block_hashes=[999]), kv.AllBlocksCleared()))
    assert rec.calls == [("cleared", 1)]


def test_host_tier_events_are_ignored() -> None:
    rec = Recorder(1)
    t = KVEventTracker(rec, 1)
    t.handle_frames(0, frames(0, stored([1], None, [4], medium="CPU_PINNED")))
    assert rec.calls == []


@pytest.mark.parametrize(
    "bad",
    [
        [b"only-one-part"],
        [b"", b"\x00\x01", b"x"],
        [b"", (0).to_bytes(8, "big"), b"\xc1not msgpack"],
    ],
)
def test_malformed_frames_resync_and_never_raise(bad) -> None:
    rec = Recorder(1)
    t = KVEventTracker(rec, 1)
    t.handle_frames(0, bad)
    assert ("cleared", 0) in rec.calls and t.bad_frames == 1
    rec.calls.clear()
    t.handle_frames(0, frames(1, stored([1], None, [4])))  # the stream goes on
    assert rec.calls == [("cached", 0, [4])]


def test_sequence_gap_resyncs_and_orphan_chains_are_skipped() -> None:
    rec = Recorder(1)
    t = KVEventTracker(rec, 1)
    t.handle_frames(0, frames(0, stored([1], None, [4, 5], size=2)))
    t.handle_frames(0, frames(5, stored([2], 1, [6, 7], size=2)))  # 1..4 lost
    assert ("cleared", 0) in rec.calls
    assert t.orphans == 1  # block 1 was forgotten in the resync, so 2's path is unknown
    assert not any(c[0] == "cached" and c[2] == [4, 5, 6, 7] for c in rec.calls)
    t.handle_frames(0, frames(6, stored([3], None, [9])))
    assert rec.calls[-1] == ("cached", 0, [9])


def test_unknown_worker_is_ignored(caplog) -> None:
    rec = Recorder(1)
    t = KVEventTracker(rec, 1)
    with caplog.at_level("WARNING"):
        t.handle_frames(3, frames(0, stored([1], None, [4])))
    assert rec.calls == [] and "unknown worker 3" in caplog.text
    t.handle_frames(0, frames(0, stored([1], None, [4])))  # the known worker's stream is untouched by it
    assert rec.calls == [("cached", 0, [4])]


def test_feeds_a_real_d2lpm_index() -> None:
    router = make_router("d2lpm", 2)
    t = KVEventTracker(router, 2)
    prefix = list(range(100, 164))
    t.handle_frames(1, frames(0, stored(list(range(64)), None, prefix)))
    assert router.route("a", "c", prefix + [1, 2], 4) == 1
    t.handle_frames(1, frames(1, kv.BlockRemoved(block_hashes=list(range(64)))))
    # The prune at the first block removes every path through it for worker 1,
    # including the one the dispatch of "a" inserted.
    assert router.index.match(prefix).length == 0
