"""Wrapping one route of SGLang's HTTP app, where the route function is the only seam.

SGLang 0.5.21 handles ``/generate`` and ``/server_info`` in the route
functions themselves (later releases call ``serve_generate_request`` and
``build_server_info``, which the hook table wraps). Hooking such a module
function is too late: FastAPI kept the function object when SGLang's module
was imported. So at launch (BEFORE ``http_server.launch_server``) the route is
rebuilt around a wrapper, in the same place in the app's route list, with the
same methods and response class. The wrapper keeps the route function's
signature (``functools.wraps``), so FastAPI parses the request as before.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable

_WRAPPED = "sglang_fair_wrapped"  # set on our endpoints: a second launch in one process wraps once

Endpoint = Callable[..., Awaitable]


def wrap_route(app, path: str, before: Callable | None = None, after: Callable | None = None) -> None:
    """Run ``before(*route_args)`` ahead of ``path``'s route function, and answer
    ``after(result)`` instead of its result."""
    from fastapi.routing import APIRoute

    routes = app.router.routes
    index = next((i for i, route in enumerate(routes) if isinstance(route, APIRoute) and route.path == path), None)
    if index is None:
        raise RuntimeError(f"sglang-fair: SGLang's HTTP app has no route {path} to hook")
    route = routes[index]
    if getattr(route.endpoint, _WRAPPED, False):
        return
    endpoint = _wrapped(route.endpoint, before, after)
    app.router.add_api_route(path, endpoint, methods=sorted(route.methods), response_class=route.response_class,
                             name=route.name, dependencies=route.dependencies)
    routes[index] = routes.pop()


def _wrapped(function: Endpoint, before: Callable | None, after: Callable | None) -> Endpoint:
    @functools.wraps(function)
    async def endpoint(*args, **kwargs):
        if before is not None:
            before(*args, **kwargs)
        result = await function(*args, **kwargs)
        return after(result) if after is not None else result

    setattr(endpoint, _WRAPPED, True)
    return endpoint
