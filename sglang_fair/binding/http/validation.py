"""Refuse request input that would take the whole server down.

In SGLang 0.5.23 an ``input_ids`` value outside the vocabulary reaches the
embedding, raises there, and the scheduler process dies, failing every other
client's requests. One tenant must not be able to do that, so such a request
is refused up front with HTTP 400.

Hook: ``refuse_out_of_vocab_ids`` BEFORE
``sglang.srt.managers.tokenizer_manager.TokenizerManager._create_tokenized_object``
(called once per request, after batches are split, on every endpoint).
"""

from __future__ import annotations


def refuse_out_of_vocab_ids(manager, obj, input_text, input_ids, *args, **kwargs):
    if not input_ids:
        return None
    vocab_size = manager.model_config.vocab_size
    for position, token_id in enumerate(input_ids):
        if not 0 <= token_id < vocab_size:
            # ValueError is SGLang's own "bad request" signal: HTTP 400, server unharmed.
            raise ValueError(
                f"input_ids[{position}] = {token_id} is outside the model's vocabulary [0, {vocab_size})"
            )
    return None
