from sglang_fair.workloads.tokens import SyntheticTokenizer


def test_synthetic_ids_are_stable_in_vocab_and_prefix_preserving():
    tok = SyntheticTokenizer(vocab_size=50)
    a = tok.encode("The quick brown fox, jumping!")
    assert a == tok.encode("The quick brown fox, jumping!")
    assert all(0 <= t < 50 for t in a)
    # "The quick brown fox" (3 short words + "quic","k" + "brow","n") then "," ...
    assert tok.pieces("The quick brown fox, jumping!") == ["The", "quic", "k", "brow", "n", "fox", ",", "jump",
                                                           "ing", "!"]
    longer = tok.encode("The quick brown fox, jumping! And more words.")
    assert longer[: len(a)] == a
    assert tok.count("one two three") == 4  # "thre" + "e"
