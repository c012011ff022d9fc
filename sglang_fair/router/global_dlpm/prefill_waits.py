"""Two waits for a prefix being computed: the shared-prefill wait (a local queue's one request
will compute this prompt's prefix with the worker's next batch) and the chunked-prefill bound (a
worker prefilling a prompt of several chunks admits nothing else until its first token)."""

from __future__ import annotations

from collections.abc import Iterable

from sglang_fair.router.global_dlpm.held import HeldRequest
from sglang_fair.router.global_dlpm.local_queues import LocalQueues
from sglang_fair.router.global_dlpm.options import GlobalDLPMOptions
from sglang_fair.router.radix_index import PACKED_TOKEN_BYTES, common_prefix_len

# The shared-prefill wait applies from this many shared not-yet-computed prompt tokens
# (SGLang's IN_BATCH_PREFIX_CACHING thresholds).
SHARED_PREFILL_MIN_TOKENS = 32

Prompt = tuple[int, bytes]  # (prefix key, packed prompt)


class PrefillWaits:
    def __init__(self, options: GlobalDLPMOptions, queues: LocalQueues) -> None:
        self.options, self.queues = options, queues
        self.tracks_prompts = options.wait_for_shared_prefill or options.worker_chunk_tokens is not None
        # The prompts in the local queues: rid -> (prefix key, packed prompt, tokens cached at dispatch).
        self.sent: dict[str, tuple[int, bytes, int]] = {}
        # Admitted prompts of more than one chunk whose first output token is not reported
        # yet, per worker: rid -> (prefix key, packed prompt).
        self.prefilling: list[dict[str, Prompt]] = [{} for _ in queues.local]

    def dispatched(self, rid: str, key: int, packed: bytes, cached: int) -> None:
        if self.tracks_prompts:
            self.sent[rid] = (key, packed, cached)

    def admitted(self, rid: str, worker: int, cached_tokens: int | None) -> None:
        """Remember a prompt just admitted on ``worker`` whose uncached part exceeds one chunk
        (call before it leaves the local queue)."""
        sent = self.sent.get(rid)
        chunk = self.options.worker_chunk_tokens
        if chunk is None or sent is None:
            return
        key, packed, _ = sent
        uncached = (self.queues.local[worker][rid] if cached_tokens is None
                    else len(packed) // PACKED_TOKEN_BYTES - int(cached_tokens))
        if uncached > chunk:
            self.prefilling[worker][rid] = (key, packed)

    def left_local(self, rid: str) -> None:
        self.sent.pop(rid, None)

    def first_token(self, rid: str, worker: int) -> bool:
        """``rid`` produced output: whether it ended a long prefill on ``worker``."""
        return self.prefilling[worker].pop(rid, None) is not None

    # ---- the rules -------------------------------------------------------------------

    def may_pend(self, worker: int) -> bool:
        """``worker``'s next batch may compute a held prompt's prefix (``shares_pending``'s conditions)."""
        return (self.options.wait_for_shared_prefill and len(self.queues.local[worker]) == 1
                and self.queues.free_slots(worker) != 0)

    def shares_pending(self, held: HeldRequest, worker: int) -> bool:
        """The request waiting in ``worker``'s local queue will compute a prefix of this
        prompt with the worker's next batch: wait for its admission. Sent now, both
        would most likely share that batch, where SGLang computes the prefix once per
        request (its own scheduler only sorts such requests last); sent after, this
        one finds it cached. Only while that request is alone in the local queue and
        the worker has a free running slot (when ``worker_max_running`` is known), so
        that the wait ends with the next batch: a longer one can outlast the prefill it
        saves, and a held request with a positive deficit blocks every refill meanwhile.
        Like the locality wait it passes over requests without charging or refilling."""
        return self.pending_shared_tokens(held, worker) >= SHARED_PREFILL_MIN_TOKENS

    def pending_shared_tokens(self, held: HeldRequest, worker: int) -> int:
        """Tokens of this prompt that the request alone in ``worker``'s local queue will compute
        with the worker's next batch (under ``shares_pending``'s conditions), else 0."""
        if not self.may_pend(worker):
            return 0
        sent = self.sent.get(next(iter(self.queues.local[worker])))
        if sent is None or sent[0] != held.key:
            return 0
        return common_prefix_len(held.match.packed, sent[1]) - sent[2]

    def computes_prefix(self, held: HeldRequest, worker: int) -> bool:
        """``worker`` computes a long prefix of this prompt for another request: more than a
        local queue's tokens with its next batch (``pending_shared_tokens``), or in the chunks it
        is prefilling (``prefilling``). The locality rules count that request's prefill as load
        to escape, but sent elsewhere this request would compute the same tokens again, and wait
        about as long for them. Shorter prefixes are cheaper to compute again than a room left
        idle while the request waits (measured on Tree-of-Thoughts)."""
        return (self.pending_shared_tokens(held, worker) > self.options.local_queue_tokens
                or shares_prompt(held, self.prefilling[worker].values()))

    def bound(self, rooms: list[int]) -> dict[int, Iterable[Prompt]]:
        """The rooms whose worker is prefilling a prompt of several chunks, with those prompts.

        SGLang gives every prefill batch to the unfinished chunked prompt first, so
        until its last chunk nothing else is admitted there: a request sent to that
        local queue waits out the whole prefill while other workers may take it at
        once, and if its client's deficit is positive it blocks every refill (and the
        other workers' next dispatch) meanwhile. Such a room takes only requests that
        share the prompt being prefilled: they hit its cache once it is done.
        """
        if self.options.worker_chunk_tokens is None:
            return {}
        return {w: self.prefilling[w].values() for w in rooms if self.prefilling[w]}


def shares_prompt(held: HeldRequest, prompts: Iterable[Prompt]) -> bool:
    return any(key == held.key and common_prefix_len(held.match.packed, packed) >= SHARED_PREFILL_MIN_TOKENS
               for key, packed in prompts)
