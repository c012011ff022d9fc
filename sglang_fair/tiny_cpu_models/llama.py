"""The tiny CPU model's architecture (``LlamaForCausalLM``), SGLang's own class."""

from sglang.srt.models.llama import LlamaForCausalLM

EntryClass = LlamaForCausalLM
