"""Cluster-wide DLPM with late binding: D²LPM made fair across workers.

Why not Algorithm 2 alone: D²LPM places a request on a worker when it
arrives, and each worker's DLPM is then fair only among the clients queued on
*that* worker. A client queued on three workers gets three workers' worth of
service while a client whose one request waits on a fourth gets one; with
closed-loop programs (ToT, chat) this is the normal case, not a corner, and
no per-worker counter can repair it once the placement is made.

So the router keeps the queue that matters. A request waits in the router
until some worker has room in a short local queue (at most
``local_queue_requests`` requests and ``local_queue_tokens`` uncached prompt
tokens dispatched there and not yet admitted into a batch; at most
``queue_beyond_free_slots`` more than its free running slots). Which waiting
request goes where is decided by one DLPM instance (``sglang_fair.core``, the
code every worker runs) over the whole cluster's waiting requests:

* candidates are (request, worker with room) pairs in longest-prefix-match
  order, the match read from the global prefix index for that worker; among
  equal matches the request that loses least cache by going there comes
  first (its longest match anywhere minus its match here);
* one deficit counter per client, refilled by ``quantum`` only when no
  waiting client has a positive one (Algorithm 1's CHECKREFILL), gates them;
* a dispatch charges w_e x the part of the prompt *not* cached on the chosen
  worker, and every output token w_q as the workers report progress;
* a client running more than its share of the dispatched requests is not
  spread for latency (Preble's rebalance and exploit rules): a room that does
  not cache most of its prompt, while another worker does, goes to another
  candidate if one may take it; recomputing a prefix there would come out of
  everyone's throughput, to shorten the wait of the client that has most;
* when the workers mix chunks and the router knows their chunk size, a worker
  prefilling a prompt of several chunks takes only requests that share it
  until that prompt's first token (``prefill_waits.PrefillWaits.bound``);
* with ``lane_workers`` (off by default), the last workers are lanes: the
  clients over their share hold at most ``lane_tokens`` there, and while they
  flood the others, the clients under their share go to a lane when one has
  room (``router/lanes.py``).

A worker with room always receives work while any request waits (DLPM's walk
is work-conserving; a worker the second-to-last rule passes over is busy
prefilling), so the cluster is work-conserving up to the feedback delay; the
local queues keep each worker's next batch ready meanwhile. Lanes are the
exception, by design: a lane's unused room is the price of short decode steps.

With ``reserve_for_newcomers`` (on under ``--fair-isolation``) each local
queue keeps one more place for a client with nothing dispatched anywhere: a
light tenant's request then reaches a worker at once instead of waiting,
behind full local queues, for the flood's next batch to leave one, and the
worker's latency isolation can give it a running slot; and a client new to
the router starts with one quantum instead of 0, so that the place is not
left empty while the flood spends its deficit. Theorem G holds with
``R + 1`` in place of ``R``.
docs/fairness.md proves the resulting bound (Theorem G),
2 (Q + w_q |W| M_G + w_e |W| (B + L + R L)) between any two clients that both
have a request waiting anywhere, in the router or in a local queue
(B, R = ``local_queue_tokens``, ``local_queue_requests``; M_G = output a
worker's batch and local queue can still produce), and
tests/router/test_global_dlpm.py checks it on randomized traces.

The package, one manager per concern, composed by ``router.GlobalDLPMRouter``:

* ``options``: ``GlobalDLPMOptions``, every option, checked once;
* ``held``: the held requests, and every client's candidates kept ranked for each worker;
* ``order``: the order DLPM's walk reads them in;
* ``placement``: one placement pass (the candidates in order for its rooms, the first no rule passes over);
* ``local_queues``: what each worker was sent and has not admitted, its slots about to free, its load;
* ``prefill_waits``: the shared-prefill wait and the chunked-prefill bound;
* ``locality``: Preble's rules (best room, rebalance, exploit) and who is over their share;
* ``router``: route, feedback, and the placement pass (``_pick``) that asks each of them.
"""

from __future__ import annotations

from sglang_fair.router.global_dlpm.options import (
    DEFAULT_AFFINITY_RATIO,
    DEFAULT_CANDIDATES_PER_CLIENT,
    DEFAULT_FINISHING_TOKENS,
    DEFAULT_LOCAL_QUEUE_REQUESTS,
    DEFAULT_LOCAL_QUEUE_TOKENS,
    DEFAULT_QUEUE_BEYOND_FREE_SLOTS,
    GlobalDLPMOptions,
)
from sglang_fair.router.global_dlpm.router import GlobalDLPMRouter, PlacementObserver

__all__ = [
    "DEFAULT_AFFINITY_RATIO",
    "DEFAULT_CANDIDATES_PER_CLIENT",
    "DEFAULT_FINISHING_TOKENS",
    "DEFAULT_LOCAL_QUEUE_REQUESTS",
    "DEFAULT_LOCAL_QUEUE_TOKENS",
    "DEFAULT_QUEUE_BEYOND_FREE_SLOTS",
    "GlobalDLPMOptions",
    "GlobalDLPMRouter",
    "PlacementObserver",
]
