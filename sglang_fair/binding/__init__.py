"""Binding of the engine-agnostic core to SGLang 0.5.23 (the only package that imports sglang).

Everything is installed through SGLang's own plugin entry point
(``sglang.srt.plugins``, see ``plugin.register``) so it is active in every
process SGLang spawns. Each hook is named after what it changes and documents
the SGLang function it wraps; docs/architecture.md lists them all.
"""
