"""Run-time admin: read and change the fair settings without a restart.

``GET /fair/settings`` answers each data-parallel rank's settings in force;
``POST /fair/settings`` with ``{"quantum": Q, "client_weights": {"alice": 2},
"throttle": {"user_limit": 100}}`` changes them on every rank (weights and
per-client limits are merged: clients not named keep theirs; throttle limits
only where the policy throttles, FairServe) and answers the new settings.
Both need SGLang's admin key (``--admin-api-key``, sent as ``Authorization:
Bearer KEY``). Ranks come in rank order; with a dead data-parallel worker
both answer from the survivors (``null`` in the dead rank's place, and
``dead_ranks``); a rank that has not answered within the deadline
(``http/state_deadline.py``) is ``null`` too, listed in ``unanswered_ranks``. With no admin key configured they answer 403, as SGLang's
other admin-only endpoints do, saying how to configure one. A weight of
``null`` removes the client's weight (back to 1); an id the identity rule
would rewrite is refused with 400 naming it.

The change travels SGLang's own admin path, ``SetInternalStateReq``, under
the key ``fair_settings``: each scheduler validates it again and applies it
to its FairScheduler, effective from its next scheduling pass, and logs it.
Under ``--dp`` the router's cluster-wide DLPM (``d2lpm_global``) takes the
same change as the request passes the data-parallel controller. The settings
show on ``/server_info`` (``internal_states[i].fair``) and on ``/metrics``
(``sglang_fair_client_weight``, ``sglang_fair_quantum``).

Hook: ``install_admin_routes`` BEFORE ``http_server.launch_server`` (and
``ray.http_server.launch_server``). The schedulers' side is
``scheduler/admin_settings.py``.
"""

# No ``from __future__ import annotations``: FastAPI must see the handlers'
# ``Request`` annotation as the class, and it is imported inside a function.
from http import HTTPStatus

from sglang_fair.binding.common import sglang_private, worker_status
from sglang_fair.binding.common.rank_answers import NO_ANSWER
from sglang_fair.binding.common.settings import ADMIN_SETTINGS_KEY
from sglang_fair.core import SettingsUpdate

ROUTE = "/fair/settings"


def install_admin_routes(*args, **kwargs) -> None:
    from fastapi import Request
    from fastapi.responses import ORJSONResponse
    from sglang.srt.entrypoints import http_server
    from sglang.srt.managers.io_struct import SetInternalStateReq
    from sglang.srt.utils.auth import AuthLevel, auth_level

    server_args = args[0] if args else kwargs.get("server_args")
    if not getattr(server_args, "admin_api_key", None):
        async def admin_api_off() -> ORJSONResponse:
            return ORJSONResponse({"error": f"{ROUTE} is off: this server has no admin key; start it with "
                                            "--admin-api-key KEY and send Authorization: Bearer KEY"},
                                  status_code=HTTPStatus.FORBIDDEN)

        http_server.app.add_api_route(ROUTE, admin_api_off, methods=["GET", "POST", "PUT"])
        return None

    manager = sglang_private.global_tokenizer_manager

    async def current() -> tuple[list, list[int]]:
        """Each data-parallel rank's fair settings, in rank order (None for a dead worker's or one
        that did not answer in time), and the ranks that did not answer in time."""
        states = await manager().get_internal_state()
        by_rank, silent = {}, 0
        for position, state in enumerate(states):
            fair = state.get("fair")
            if state.get("dead_worker"):  # the controller answers for a dead worker
                by_rank[state["dp_rank"]] = None
            elif state.get(NO_ANSWER):  # answered for at the deadline (http/state_deadline.py): rank unknown
                silent += 1
            else:
                by_rank[fair["dp_rank"] if fair else position] = fair
        unanswered = [rank for rank in range(len(states)) if rank not in by_rank][:silent]
        return [by_rank.get(rank) for rank in range(len(states))], unanswered

    def answer(ranks: list, unanswered: list[int]) -> ORJSONResponse:
        dead = [rank for rank, state in enumerate(ranks) if state is None and rank not in unanswered]
        body: dict = {"ranks": ranks}
        if dead:
            body["dead_ranks"] = dead
        if unanswered:
            body["unanswered_ranks"] = unanswered
        return ORJSONResponse(body)

    @auth_level(AuthLevel.ADMIN_FORCE)
    async def read_settings() -> ORJSONResponse:
        return answer(*await current())

    @auth_level(AuthLevel.ADMIN_FORCE)
    async def change_settings(request: Request) -> ORJSONResponse:
        try:
            update = SettingsUpdate.parse(await request.json())
        except ValueError as exc:  # OptionError, and malformed JSON (json.JSONDecodeError)
            return ORJSONResponse({"error": str(exc)}, status_code=HTTPStatus.BAD_REQUEST)
        if update.throttle:
            unthrottled = sorted({rank["policy"] for rank in (await current())[0] if rank and "throttle" not in rank})
            if unthrottled:
                return ORJSONResponse({"error": f"throttle limits apply to fairserve; this server runs "
                                                f"{', '.join(unthrottled)}"}, status_code=HTTPStatus.BAD_REQUEST)
        applied = await manager().set_internal_state(SetInternalStateReq(server_args={ADMIN_SETTINGS_KEY: update.as_json()}))
        dead = (worker_status.read_workers() or {}).get("dead", [])
        refused = sum(not ok for ok in applied) - len(dead)  # a dead worker's answer is a refusal too
        if refused > 0:  # a rank that did not answer in time counts as refusing: it may apply it later
            return ORJSONResponse({"error": f"{refused} of {len(applied) - len(dead)} live dp ranks refused "
                                            f"the change or did not answer in time; see their logs"},
                                  status_code=HTTPStatus.CONFLICT)
        return answer(*await current())

    http_server.app.add_api_route(ROUTE, read_settings, methods=["GET"])
    http_server.app.add_api_route(ROUTE, change_settings, methods=["POST", "PUT"])
    return None
