"""Latency isolation: a waiting client may take a running slot back from a client holding more.

DLPM and VTC decide who is admitted next, never who keeps running. Once a
flooding client holds every running slot (or the KV pool), a light client's
short request waits for flood requests to finish, however positive its
deficit. With isolation on, a client with requests waiting and **none
running** (it is starved, not merely queued behind its own requests) is
offered room first (``FairScheduler.walk``), and when the batch is full it
may have one running request of another client preempted for it, under two
rules:

* **Share rule**: the running batch's fair share per unit of weight is
  ``R / W`` (``R`` requests running, ``W`` the summed weight of the clients
  with requests queued or running). Client ``c`` may take a slot from client
  ``v`` only if ``v`` stays at or above its share and ``c`` gets at most its
  own: ``(running(v) - 1) / w(v) >= R / W >= (running(c) + 1) / w(c)``. So
  clients within their share never preempt each other, and (what stops
  thrashing) each preemption strictly lowers ``sum(running(x)^2 / w(x))``
  over clients (for equal weights by at least 2): preemptions cannot
  ping-pong; only admissions and completions can undo one.
* **Bounded waste**: a request is preempted at most ``max_preemptions`` times;
  its recomputation is recorded as waste, never as the client's service
  (``FairScheduler.admit``).

Victims, best first: the client holding the most slots per weight, then the
one that received the most service per weight, then the request with the
least output (the least work to recompute), then the one that arrived last.

Every admission is still one the policy's walk yields on its own counters,
and preemption neither charges nor refunds, so DLPM's bound holds unchanged
(docs/latency_isolation.md).

A running request needs decode steps too, and SGLang runs a prefill whenever
one can be admitted: while a flood's prompts keep arriving, a light client's
running request may wait through many prefills for each token. With
isolation on, a worker gives its running batch a decode turn
(``DecodeTurns``) once it has prefilled a chunk's worth of tokens (SGLang's
``--chunked-prefill-size``) since the batch last decoded, while a *light*
client is running and a client over its share has prompts waiting
(``LatencyIsolation.decode_first``). A light client has requests running,
none queued, and room for one more within its share:
``(running(c) + 1) / w(c) <= R / W``. Its running requests then wait for at
most about one chunk of prefill between two tokens. The decode step serves
every running request, so no work is added, only moved forward; backends
skip the turn when mixed chunks already decode the batch in each prefill.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from sglang_fair.core.ledger import ServiceLedger
from sglang_fair.core.options import FairOptions
from sglang_fair.core.requests import ClientActivity, RequestState, TrackedRequest


def fair_share(activity: Mapping[str, ClientActivity], weight_of: Callable[[str], float],
               now: float | None = None, recent_s: float = 0.0) -> float:
    """``R / W``: running requests per unit of weight of the clients with requests queued or running
    (given ``now``, also those idle for at most ``recent_s``)."""
    running = weight = 0.0
    for client, act in activity.items():
        if not act.idle or (now is not None and now - act.last_active <= recent_s):
            running += act.running
            weight += weight_of(client)
    return running / weight if weight else 0.0


def above_fair_share(activity: Mapping[str, ClientActivity], weight_of: Callable[[str], float],
                     now: float | None = None, recent_s: float = 0.0) -> set[str]:
    """The clients running more than their share ``R / W`` per unit of their weight (``fair_share``)."""
    fair = fair_share(activity, weight_of, now, recent_s)
    return {c for c, act in activity.items() if act.running / weight_of(c) > fair}


class LatencyIsolation:
    def __init__(self, options: FairOptions, activity: Mapping[str, ClientActivity], ledger: ServiceLedger) -> None:
        self.options = options
        self.activity = activity  # live per-client counts, owned by FairScheduler
        self.ledger = ledger
        self.max_preemptions = options.max_preemptions

    def _share(self, client: str, extra: int = 0) -> float:
        act = self.activity.get(client)
        return ((act.running if act else 0) + extra) / self.options.weight_of(client)

    def fair_share(self) -> float:
        """``R / W``: running requests per unit of weight of the active clients."""
        return fair_share(self.activity, self.options.weight_of)

    def may_take_from(self, client: str, victim_client: str, fair: float | None = None) -> bool:
        """The share rule: ``client`` may take one slot of ``victim_client``."""
        fair = self.fair_share() if fair is None else fair
        return client != victim_client and self._share(victim_client, -1) >= fair >= self._share(client, 1)

    def starved_clients(self) -> set[str]:
        """Clients with requests queued and none running whose share is at least one
        more slot, while some client holds more than its share (a possible victim).

        Empty when isolation can do nothing (a backend then keeps its usual pass).
        """
        fair = self.fair_share()
        # The largest holder decides whether anyone may be preempted at all.
        top = max((self._share(c, -1) for c, a in self.activity.items() if a.running > 0), default=None)
        if top is None or top < fair:
            return set()
        return {c for c, a in self.activity.items() if a.queued > 0 and a.running == 0 and self._share(c, 1) <= fair}

    def decode_first(self) -> bool:
        """Whether the running batch should decode before the next prefill: a light client (requests
        running, none queued, room for one more within its share) is running while a client over its
        share has prompts waiting, which that prefill would serve."""
        fair = self.fair_share()
        light = flood_waiting = False
        for client, act in self.activity.items():
            if act.queued:
                flood_waiting = flood_waiting or self._share(client) > fair
            elif act.running and self._share(client, 1) <= fair:
                light = True
        return light and flood_waiting

    def next_victim(self, candidate: TrackedRequest, running: Iterable[TrackedRequest]) -> TrackedRequest | None:
        """The running request to preempt for ``candidate``, or None if none may be
        (its client has a request running already, or the share rule allows no victim).

        ``running``: the backend's running requests (tracked views). Call again
        after each preemption while the candidate still does not fit (more KV tokens).
        """
        act = self.activity.get(candidate.client)
        if act is not None and act.running > 0:
            return None
        best, best_key = None, None
        fair = self.fair_share()
        for req in running:
            if req.state is not RequestState.RUNNING or req.preemptions >= self.max_preemptions:
                continue
            if not self.may_take_from(candidate.client, req.client, fair):
                continue
            weight = self.options.weight_of(req.client)
            key = (self._share(req.client), self.ledger.service(req.client) / weight, -req.output_charged, req.seq)
            if best_key is None or key > best_key:
                best, best_key = req, key
        return best


class DecodeTurns:
    """One worker's decode turns: due once it has prefilled ``chunk_tokens`` since its running batch last
    decoded, while ``isolation`` finds a light client running (``LatencyIsolation.decode_first``)."""

    def __init__(self, isolation: LatencyIsolation, chunk_tokens: int) -> None:
        if chunk_tokens < 1:
            raise ValueError(f"chunk_tokens must be positive, got {chunk_tokens}")
        self.isolation = isolation
        self.chunk_tokens = chunk_tokens
        self.prefilled = 0  # tokens prefilled since the running batch last decoded
        self.taken = 0  # turns taken

    def after_prefill(self, tokens: int) -> None:
        """A prefill of ``tokens`` ran without decoding the running batch."""
        self.prefilled += tokens

    def after_decode(self) -> None:
        """The running batch decoded (a decode step, or a mixed prefill)."""
        self.prefilled = 0

    def due(self) -> bool:
        """Whether the next step should decode rather than prefill."""
        return self.prefilled >= self.chunk_tokens and self.isolation.decode_first()

    def take(self) -> None:
        """The next step decodes for a turn that was due."""
        self.taken += 1
        self.after_decode()
