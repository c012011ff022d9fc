"""Binding of the engine-agnostic core to SGLang 0.5.21-0.5.23 (the only package that imports sglang).

Everything is installed through SGLang's own plugin entry point
(``sglang.srt.plugins``, see ``plugin.register``) so it is active in every
process SGLang spawns; ``hooks.py`` is the one table of every hook. The code
is laid out by the process it runs in:

* ``http/``: the main process (command line, HTTP server, TokenizerManager);
* ``scheduler/``: each scheduler process, one per rank;
* ``controller/``: the data-parallel controller (``--dp N``);
* ``ray/``: SGLang's Ray backend (``--use-ray``);
* ``common/``: what they share (settings, supported releases, message and
  file formats); it imports none of the others, and they import each other
  only through it.

docs/architecture.md maps each process and each hook.
"""
