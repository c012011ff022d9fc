"""Per-client record of the service actually received (for metrics and tests).

Separate from the policies' counters: a VTC counter is lifted and a DLPM
deficit is refilled, but the ledger only ever adds what was delivered.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class ClientService:
    input_tokens: int = 0  # prompt tokens of admitted requests
    cached_tokens: int = 0  # of which served from the prefix cache
    output_tokens: int = 0
    service: float = 0.0  # cost-weighted, before client weights
    admitted: int = 0
    finished: int = 0
    # Waste, not service: prefill redone after a retraction or preemption.
    recomputed_tokens: int = 0
    preempted: int = 0  # running requests whose slot latency isolation took

    @property
    def extend_tokens(self) -> int:
        return self.input_tokens - self.cached_tokens


class ServiceLedger:
    def __init__(self) -> None:
        self._clients: dict[str, ClientService] = {}

    def _get(self, client: str) -> ClientService:
        entry = self._clients.get(client)
        if entry is None:
            entry = self._clients[client] = ClientService()
        return entry

    def record_admission(self, client: str, input_tokens: int, cached_tokens: int, cost: float) -> None:
        entry = self._get(client)
        entry.input_tokens += input_tokens
        entry.cached_tokens += min(cached_tokens, input_tokens)
        entry.service += cost
        entry.admitted += 1

    def record_correction(self, client: str, cached_delta: int, cost: float) -> None:
        """An admission's cached tokens turned out ``cached_delta`` different, costing ``cost`` more."""
        entry = self._get(client)
        entry.cached_tokens += cached_delta
        entry.service += cost

    def record_output(self, client: str, tokens: int, cost: float) -> None:
        entry = self._clients.get(client) or self._get(client)  # once per progress report: one call less
        entry.output_tokens += tokens
        entry.service += cost

    def record_recompute(self, client: str, tokens: int) -> None:
        self._get(client).recomputed_tokens += tokens

    def record_preemption(self, client: str) -> None:
        self._get(client).preempted += 1

    def record_finish(self, client: str) -> None:
        self._get(client).finished += 1

    def service(self, client: str) -> float:
        entry = self._clients.get(client)
        return entry.service if entry else 0.0

    def get(self, client: str) -> ClientService | None:
        return self._clients.get(client)

    def forget(self, client: str) -> None:
        self._clients.pop(client, None)

    def snapshot(self) -> dict[str, ClientService]:
        return dict(self._clients)
