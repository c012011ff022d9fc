"""SGLang KV events -> router cache feedback (``on_cached`` / ``on_evicted``).

Each DP rank's scheduler publishes ``[topic, seq (8 bytes), msgpack
KVEventBatch]`` frames (``--kv-events-config``, ZMQ). ``BlockStored`` carries a
chain of block hashes, the parent block's hash and the tokens;
``BlockRemoved`` carries hashes only, so the tracker keeps, per worker, a map
from block hash to where the block sits in a token path.

Paths are stored as shared segments (one per stored chain, linked to its
parent segment), so a block costs one dict entry and rebuilding a path walks
radix nodes, not blocks.

Bad input never raises: a malformed frame or a batch out of sequence (a gap
or a publisher restart) makes the tracker *resync* that worker: forget its
blocks, tell the router its cache is unknown (``on_cache_cleared``) and
rebuild from the next events; chains stored under a parent it never saw are
skipped (counted in ``orphans``). Routing continues meanwhile from the
router's own dispatch history.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import msgspec
from sglang.srt.disaggregation.kv_events import AllBlocksCleared, BlockRemoved, BlockStored, KVEventBatch

from sglang_fair.router.base import Router

logger = logging.getLogger(__name__)

_GPU_MEDIA = (None, "GPU")  # lower tiers (host, disk) do not make a worker fast for a prefix


@dataclass(eq=False)
class _Segment:
    """Tokens stored by one chain, continuing ``parent`` after its first ``parent_end`` tokens."""

    parent: _Segment | None
    parent_end: int
    tokens: list[int]

    def path(self, end: int) -> list[int]:
        parts = [self.tokens[:end]]
        seg, cut = self.parent, self.parent_end
        while seg is not None:
            parts.append(seg.tokens[:cut])
            seg, cut = seg.parent, seg.parent_end
        out: list[int] = []
        for part in reversed(parts):
            out.extend(part)
        return out


@dataclass
class _Block:
    segment: _Segment
    start: int  # tokens of the segment before this block
    end: int
    parent_hash: int | None


@dataclass
class WorkerBlocks:
    """What one worker's cache holds, as the event stream told it."""

    blocks: dict[int, _Block] = field(default_factory=dict)
    next_seq: int | None = None  # None: accept whatever comes first
    resyncs: int = 0


class KVEventTracker:
    """Turns each rank's KV event frames into router feedback."""

    def __init__(self, router: Router, num_workers: int) -> None:
        self.router = router
        self.workers = [WorkerBlocks() for _ in range(num_workers)]
        self._decoder = msgspec.msgpack.Decoder(KVEventBatch)
        self.events = 0
        self.bad_frames = 0
        self.orphans = 0

    def handle_frames(self, worker: int, frames: list[bytes]) -> None:
        """One message from ``worker``'s publisher: ``[topic, seq, payload]``."""
        if not 0 <= worker < len(self.workers):
            logger.warning("sglang-fair router: KV events from unknown worker %s ignored", worker)
            return
        state = self.workers[worker]
        if len(frames) != 3 or len(frames[1]) != 8:
            self._resync(worker, f"malformed frame ({len(frames)} parts)")
            return
        seq = int.from_bytes(frames[1], "big")
        if state.next_seq is not None and seq != state.next_seq:
            self._resync(worker, f"sequence {seq}, expected {state.next_seq}")
        try:
            batch = self._decoder.decode(frames[2])
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            self._resync(worker, f"undecodable batch: {exc}")
            state.next_seq = seq + 1
            return
        state.next_seq = seq + 1
        self.handle_batch(worker, batch)

    def handle_batch(self, worker: int, batch: KVEventBatch) -> None:
        for event in batch.events:
            self.events += 1
            if isinstance(event, BlockStored):
                if event.medium in _GPU_MEDIA:
                    self._stored(worker, event)
            elif isinstance(event, BlockRemoved):
                if event.medium in _GPU_MEDIA:
                    self._removed(worker, event.block_hashes)
            elif isinstance(event, AllBlocksCleared):
                self.workers[worker].blocks.clear()
                self.router.on_cache_cleared(worker)

    def forget_worker(self, worker: int) -> None:
        """The worker died: drop its blocks and stop expecting a sequence."""
        self.workers[worker] = WorkerBlocks()

    # ---- internals ----------------------------------------------------------------

    def _stored(self, worker: int, event: BlockStored) -> None:
        blocks = self.workers[worker].blocks
        tokens = list(event.token_ids)
        if not event.block_hashes or not tokens or event.block_size < 1:
            return
        if any(not isinstance(t, int) for t in tokens):
            return  # bigram (tuple) pages: not token ids the router can match
        if event.parent_block_hash is None:
            parent, parent_end = None, 0
        else:
            known = blocks.get(event.parent_block_hash)
            if known is None:
                # Its parent was stored before we subscribed or resynced: the
                # path is unknown, so this chain cannot be indexed.
                self.orphans += 1
                return
            parent, parent_end = known.segment, known.end
        segment = _Segment(parent, parent_end, tokens)
        size = event.block_size
        prev = event.parent_block_hash
        for i, block_hash in enumerate(event.block_hashes):
            start = i * size
            if start >= len(tokens):
                break
            blocks[block_hash] = _Block(segment, start, min(start + size, len(tokens)), prev)
            prev = block_hash
        self.router.on_cached(worker, segment.path(len(tokens)))

    def _removed(self, worker: int, hashes: list[int]) -> None:
        blocks = self.workers[worker].blocks
        gone = set(hashes)
        for block_hash in hashes:
            block = blocks.get(block_hash)
            if block is None:
                continue
            # Only the shallowest removed block of a chain matters: the worker
            # keeps the path up to its start and loses everything below.
            if block.parent_hash not in gone or block.parent_hash not in blocks:
                self.router.on_evicted(worker, block.segment.path(block.start + 1))
        for block_hash in hashes:
            blocks.pop(block_hash, None)

    def _resync(self, worker: int, why: str) -> None:
        state = self.workers[worker]
        state.resyncs += 1
        self.bad_frames += 1
        logger.warning("sglang-fair router: KV events of worker %d: %s; forgetting its cache and resyncing", worker, why)
        state.blocks.clear()
        state.next_seq = None
        self.router.on_cache_cleared(worker)
