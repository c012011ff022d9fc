"""The main process: SGLang parses the command line here, then serves HTTP and runs the TokenizerManager.

What of ours runs here:

* ``fair_options``, ``router_options``: the ``--fair-*`` and router options on
  SGLang's parser (AFTER ``ServerArgs.add_cli_args``, ``ServerArgs.from_cli_args``),
  validated and exported before any other process starts;
* ``identity``, ``client_keys``: which client a request is charged to (BEFORE
  ``http_server.serve_generate_request``, ``OpenAIServingBase.handle_request``;
  AROUND ``OpenAIServingBase.extract_routing_key``, ``http_server._wait_and_warmup``);
* ``validation``: out-of-vocabulary token ids refused with 400 (BEFORE
  ``TokenizerManager._create_tokenized_object``);
* ``throttle_response``: a throttled request's 429 keeps ``Retry-After``;
* ``admin_routes``: ``/fair/settings``; ``health``, ``server_info``: ``/health``
  and ``/server_info`` under ``--dp``;
* ``routes``: wrapping one route function (SGLang 0.5.21).

Under ``--use-ray`` this process also runs the data-parallel controller, as a thread.
"""
