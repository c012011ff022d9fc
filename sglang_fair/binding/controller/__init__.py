"""The data-parallel controller process (``--dp N``; a thread of the main process under ``--use-ray``).

What of ours runs here: ``router_binding`` holds the hooks that put a router
of ``sglang_fair.router`` in place of the controller's dispatch (AROUND
``DataParallelController.__init__`` and ``event_loop``,
``LoadBalanceMethod.from_str``); ``controller_binding.RouterBinding`` composes
one manager per concern: ``dispatch`` (requests placed and held),
``worker_feedback`` (the workers' reports), ``worker_health`` (liveness and a
worker's death), ``tokenizer_replies`` (the controller's own answers) and
``event_loop`` (the loop feeding them). ``router_sockets`` binds the workers'
report channel and KV event sockets; ``kv_events`` turns SGLang's KV events
into the router's cache feedback; ``worker_liveness`` and ``worker_sockets``
notice dead workers and keep them from blocking the controller;
``dead_rank_answers`` answers control calls for dead workers;
``router_metrics`` exports the router's state to Prometheus.
"""
