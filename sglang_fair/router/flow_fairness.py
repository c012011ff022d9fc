"""Which client's queue a flow controller serves next: the Gateway API Inference Extension's fairness policies.

Each policy picks one of the backlogged clients of ``HeldQueues``; the
controller then dispatches that client's oldest request and tells the policy
(``dispatched``). They follow the plugins under
``pkg/epp/framework/plugins/flowcontrol/fairness/`` of
kubernetes-sigs/gateway-api-inference-extension (the endpoint picker now
lives on in llm-d/llm-d-router under the same path):

* ``vtc``: a virtual token counter per client (GIE pull request #2822's
  ``vtc/vtc.go``, closed unmerged; the only VTC written for the extension).
  The backlogged client with the smallest counter goes first, ties by client
  id; a client without a counter starts at the smallest counter kept (over
  every client not yet forgotten, backlogged or not); a dispatch advances
  the counter by the request's size over the client's weight. GIE sizes a
  request by its HTTP body in bytes; here it is the prompt in tokens, the
  same up to a factor for text prompts, without the body's constant
  overhead. Counters are forgotten with the client, after its idle timeout
  (GIE collects an idle flow after 5 minutes).
* ``round_robin``: backlogged clients in turn, in order of client id, starting
  after the last one served (``roundrobin/roundrobin.go``).
* ``global_strict``: the oldest head request of any client, i.e. first come,
  first served across clients (``globalstrict/global_strict.go``).
"""

from __future__ import annotations

from collections.abc import Mapping

from sglang_fair.router.held import Held, HeldQueues

FAIRNESS_POLICIES = ("vtc", "round_robin", "global_strict")


class FlowFairness:
    def pick(self, queues: HeldQueues) -> str:
        """The backlogged client to serve next (``queues`` holds at least one request)."""
        raise NotImplementedError

    def dispatched(self, held: Held) -> None:
        """``held``, the head of the picked client's queue, was dispatched."""

    def forget(self, client: str) -> None:
        """``client`` has been idle past the router's timeout."""


class VirtualTokenCounter(FlowFairness):
    def __init__(self, weights: Mapping[str, float]) -> None:
        self.weights = dict(weights)
        self.counters: dict[str, float] = {}

    def pick(self, queues: HeldQueues) -> str:
        counters = self.counters
        floor = min(counters.values()) if counters else 0.0
        best, best_key = None, None
        for client in queues.clients():
            value = counters.setdefault(client, floor)
            key = (value, client)
            if best_key is None or key < best_key:
                best, best_key = client, key
        return best  # type: ignore[return-value]

    def dispatched(self, held: Held) -> None:
        self.counters[held.client] = (self.counters.get(held.client, 0.0)
                                      + len(held.tokens) / self.weights.get(held.client, 1.0))

    def forget(self, client: str) -> None:
        self.counters.pop(client, None)


class RoundRobin(FlowFairness):
    def __init__(self) -> None:
        self.last: str | None = None

    def pick(self, queues: HeldQueues) -> str:
        clients = sorted(queues.clients())
        if self.last is not None:
            for client in clients:
                if client > self.last:
                    return client
        return clients[0]

    def dispatched(self, held: Held) -> None:
        self.last = held.client


class GlobalStrict(FlowFairness):
    def pick(self, queues: HeldQueues) -> str:
        return min(queues.clients(), key=lambda c: queues.head(c).seq)


def make_fairness(name: str, weights: Mapping[str, float]) -> FlowFairness:
    if name == "vtc":
        return VirtualTokenCounter(weights)
    if name == "round_robin":
        return RoundRobin()
    if name == "global_strict":
        return GlobalStrict()
    raise ValueError(f"unknown flow fairness policy {name!r}; choose one of {', '.join(FAIRNESS_POLICIES)}")
