"""sglang-fair: fair, prefix-locality-aware scheduling for multi-tenant LLM serving.

`sglang_fair.core` holds the engine-agnostic algorithms (no SGLang import);
`sglang_fair.binding` binds them to SGLang's scheduler through its plugin
entry point.
"""

__version__ = "0.1.0"
