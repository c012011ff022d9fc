"""SimBackend end to end: conservation, determinism, SGLang mechanics
(prefix reuse, chunked prefill, retraction), router feedback, bad input."""

from __future__ import annotations

import random

import pytest

from sglang_fair.bench.backends import make_backend
from sglang_fair.sim.backend import SimBackend
from sglang_fair.sim.cluster import SimCluster
from sglang_fair.sim.costmodel import ProfileError
from sglang_fair.workloads.model import Call, Program, Workload


def tree_workload(seed: int = 0, programs: int = 6, clients: int = 3, prefix: int = 300, out: int = 64) -> Workload:
    """Small ToT-like trees: root shares a per-client prefix, children extend the parent."""
    rng = random.Random(seed)
    progs = []
    for c in range(clients):
        shared = tuple(rng.randrange(1000) for _ in range(prefix))
        for k in range(programs):
            calls = [Call(shared + tuple(rng.randrange(1000) for _ in range(20)), out)]
            for parent in (0, 0, 1, 1, 2, 2):
                calls.append(Call(tuple(rng.randrange(1000) for _ in range(8)), out, parents=(parent,),
                                  extends_parent=True))
            progs.append(Program(f"c{c}/p{k}", f"client{c}", arrival=0.05 * k + 0.01 * c, calls=tuple(calls)))
    return Workload("trees", progs, seed=seed)


def _ok(result):
    return [r for r in result.records if r.ok]


@pytest.mark.parametrize("policy", ["fcfs", "lpm", "vtc", "dlpm"])
def test_every_call_finishes_once_with_consistent_times(policy):
    wl = tree_workload()
    result = SimBackend(policy=policy, seed=1, num_workers=2).run(wl, progress=False)
    assert not result.partial and not result.errors
    assert len(result.records) == wl.num_calls()
    assert len({r.rid for r in result.records}) == wl.num_calls()
    by_call = {(r.program_id, r.call_index): r for r in result.records}
    for prog in wl.programs:
        for i, call in enumerate(prog.calls):
            rec = by_call[(prog.program_id, i)]
            assert rec.output_tokens == call.max_new_tokens
            assert rec.t_sent <= rec.t_first_token <= rec.t_done
            assert rec.worker in (0, 1)
            for p in call.parents:  # a call is sent once its parent finished
                assert rec.t_sent >= by_call[(prog.program_id, p)].t_done
                assert rec.prompt_tokens == by_call[(prog.program_id, p)].prompt_tokens + call.max_new_tokens + 8
    assert result.meta["policy"] == policy and result.meta["sim_time_s"] > 0


def test_shared_prefixes_hit_the_cache():
    result = SimBackend(policy="lpm", num_workers=1).run(tree_workload(), progress=False)
    children = [r for r in result.records if r.call_index > 0]
    # A child's prompt is its parent's prompt + output: all but the last output token is cached.
    assert all(r.cached_tokens >= r.prompt_tokens - 8 - 1 for r in children)
    later_roots = [r for r in result.records if r.call_index == 0 and not r.program_id.endswith("/p0")]
    assert all(r.cached_tokens >= 300 for r in later_roots)


def test_same_seed_same_run_different_seed_same_shape(monkeypatch):
    sent: list[tuple[str, tuple[int, ...]]] = []
    submit = SimCluster.submit

    def recording_submit(self, t, req):
        sent.append((req.rid, req.prompt))
        return submit(self, t, req)

    monkeypatch.setattr(SimCluster, "submit", recording_submit)

    def run(seed: int):
        sent.clear()
        result = SimBackend(policy="dlpm", seed=seed, num_workers=2, router="round_robin").run(wl, progress=False)
        return [r.to_dict() for r in result.records], dict(sent)

    wl = tree_workload(seed=3)
    a_records, a_prompts = run(7)
    b_records, b_prompts = run(7)
    assert a_records == b_records and a_prompts == b_prompts
    # Another seed synthesizes other output tokens, so the prompts that extend a parent differ
    # in content; the run has the same shape: the same calls, lengths and token counts.
    c_records, c_prompts = run(8)
    assert c_prompts.keys() == a_prompts.keys()
    assert {rid: len(prompt) for rid, prompt in c_prompts.items()} == {rid: len(p) for rid, p in a_prompts.items()}
    extended = [rid for rid in a_prompts if not rid.endswith("/0")]
    assert extended and all(c_prompts[rid] != a_prompts[rid] for rid in extended)
    assert all(c_prompts[rid] == a_prompts[rid] for rid in a_prompts if rid.endswith("/0"))  # roots: the workload's
    shape = ("rid", "client", "program_id", "call_index", "prompt_tokens", "output_tokens", "error")
    assert [{k: r[k] for k in shape} for r in c_records] == [{k: r[k] for k in shape} for r in a_records]


def test_small_pool_retracts_and_still_finishes_everything():
    wl = tree_workload(programs=8, out=200)
    result = SimBackend(policy="vtc", num_workers=1, kv_pool_tokens=3000).run(wl, progress=False)
    assert not result.partial
    assert len(_ok(result)) == wl.num_calls()
    stats = result.meta["workers"][0]
    assert stats["retractions"] > 0 and stats["evicted_tokens"] > 0


def test_long_prompt_is_prefilled_in_chunks():
    long = Workload("long", [Program("p", "a", 0.0, (Call(tuple(range(5000)), 4),)),
                             Program("q", "b", 0.0, (Call(tuple(range(10000, 10100)), 4),))])
    short_chunks = SimBackend(policy="fcfs", chunked_prefill_size=1024).run(long, progress=False)
    one_chunk = SimBackend(policy="fcfs", chunked_prefill_size=8192).run(long, progress=False)
    assert short_chunks.meta["workers"][0]["prefill_batches"] >= 5
    assert one_chunk.meta["workers"][0]["prefill_batches"] == 1  # both fit one batch
    assert all(r.ok and r.output_tokens == 4 for r in short_chunks.records)


def test_request_too_big_for_the_pool_is_an_error_and_children_follow():
    calls = (Call(tuple(range(900)), 200), Call((1, 2), 8, parents=(0,), extends_parent=True))
    wl = Workload("big", [Program("p", "a", 0.0, calls), Program("q", "a", 0.0, (Call((5, 6, 7), 8),))])
    result = SimBackend(policy="fcfs", kv_pool_tokens=1000).run(wl, progress=False)
    errors = {r.call_index: r.error for r in result.records if r.program_id == "p"}
    assert "do not fit the simulated KV pool of 1000 tokens" in errors[0]
    assert errors[1] == "parent failed"
    assert result.partial and [r.ok for r in result.records if r.program_id == "q"] == [True]


def test_invalid_dependencies_are_reported_not_dropped():
    calls = (Call((1, 2), 4, parents=(1,)), Call((3, 4), 4, parents=(0,)), Call((5,), 4, parents=(7,)))
    result = SimBackend().run(Workload("cycle", [Program("p", "a", 0.0, calls)]), progress=False)
    assert len(result.records) == 3 and all(not r.ok for r in result.records)
    assert "invalid parents [7]" in result.records[2].error
    assert "never sent" in result.records[0].error


def test_router_gets_completion_cache_and_eviction_feedback(monkeypatch):
    from sglang_fair.router.round_robin import RoundRobinRouter

    seen = {"finish": 0, "cached": 0, "evicted": 0}

    class Watching(RoundRobinRouter):
        def on_finish(self, rid, worker, output_tokens):
            seen["finish"] += 1
            super().on_finish(rid, worker, output_tokens)

        def on_cached(self, worker, tokens):
            seen["cached"] += 1

        def on_evicted(self, worker, tokens):
            seen["evicted"] += 1
            assert len(tokens) > 0

    # The cluster's own gate decides which feedback a router gets: the hooks it overrides, only.
    wl = tree_workload(programs=8, out=200)
    backend = SimBackend(policy="fcfs", num_workers=2, kv_pool_tokens=3000, feedback_delay_s=0.01)
    monkeypatch.setattr("sglang_fair.router.make_router", lambda name, n, **kw: Watching(n))
    result = backend.run(wl, progress=False)
    assert not result.partial
    assert seen["finish"] == wl.num_calls()
    assert seen["cached"] >= 2 * wl.num_calls() and seen["evicted"] > 0

    # A router that overrides neither hook is not sent that feedback (nor made to pay for it).
    told = []
    feedback = SimCluster._feedback
    monkeypatch.setattr(SimCluster, "_feedback", lambda self, delay, fn, *args: (told.append(fn.__name__),
                                                                                  feedback(self, delay, fn, *args)))
    monkeypatch.setattr("sglang_fair.router.make_router", lambda name, n, **kw: RoundRobinRouter(n))
    plain = backend.run(wl, progress=False)
    assert not plain.partial and len(_ok(plain)) == wl.num_calls()
    assert told.count("on_finish") == wl.num_calls()
    assert "on_cached" not in told and "on_evicted" not in told


def test_bad_options_are_refused_clearly():
    with pytest.raises(ValueError, match="unknown simulator option.*warp"):
        SimBackend(warp=9)
    with pytest.raises(ValueError, match="num_workers must be a positive integer"):
        SimBackend(num_workers=0)
    with pytest.raises(ValueError, match="unknown policy 'nope'"):
        SimBackend(policy="nope")
    with pytest.raises(ProfileError, match="unknown simulator profile"):
        SimBackend(profile="nope")
    with pytest.raises(ValueError, match="unknown router 'nope'"):
        SimBackend(router="nope")


def test_bench_registry_resolves_sim():
    backend = make_backend("sim", policy="vtc", seed=4, sim_options={"num_workers": 2})
    assert isinstance(backend, SimBackend) and backend.options.policy == "vtc"
    assert len(backend.run(tree_workload(programs=1), progress=False).records) == 21


def random_dag_workload(seed: int) -> Workload:
    """Random programs: DAGs of 1-8 calls, shared and private prefixes, varied lengths."""
    rng = random.Random(seed)
    shared = [tuple(rng.randrange(500) for _ in range(rng.randint(10, 400))) for _ in range(3)]
    progs = []
    for k in range(40):
        calls = []
        for i in range(rng.randint(1, 8)):
            own = tuple(rng.randrange(500) for _ in range(rng.randint(1, 300)))
            parents = tuple(sorted(rng.sample(range(i), rng.randint(0, min(i, 2))))) if i else ()
            extends = bool(parents) and rng.random() < 0.7
            head = rng.choice(shared) if not extends and rng.random() < 0.5 else ()
            calls.append(Call(head + own, rng.randint(1, 120), parents=parents, extends_parent=extends))
        progs.append(Program(f"p{k}", f"client{rng.randrange(4)}", rng.uniform(0, 3), tuple(calls)))
    return Workload("random", progs, seed=seed)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("policy,router", [("fcfs", "round_robin"), ("lpm", "shortest_queue"),
                                           ("vtc", "per_client_round_robin"), ("dlpm", "d2lpm"),
                                           ("fairserve", "preble"), ("justitia", "cache_aware")])
@pytest.mark.parametrize("mixed", [False, True])
def test_conservation_under_memory_pressure(seed, policy, router, mixed):
    """Tiny pools and chunks force eviction, retraction and chunked prefill (with and without
    decode rows mixed into prefills); nothing is lost or leaked."""
    wl = random_dag_workload(seed)
    result = SimBackend(policy=policy, router=router, seed=seed, num_workers=3, kv_pool_tokens=2500,
                        chunked_prefill_size=256, max_prefill_tokens=512,
                        enable_mixed_chunk=mixed).run(wl, progress=False)
    assert result.errors == []  # includes the drained-worker check (no KV or lock leaks)
    assert len(result.records) == wl.num_calls() and all(r.ok for r in result.records)
    assert len({(r.program_id, r.call_index) for r in result.records}) == wl.num_calls()


def test_arrival_during_decode_is_admitted_at_the_next_step():
    """New requests join between decode steps; they do not wait for the batch to drain."""
    wl = Workload("late", [Program("a", "a", 0.0, (Call(tuple(range(100)), 2000),)),
                           Program("b", "b", 1.0, (Call(tuple(range(500, 600)), 4),))])
    records = {r.program_id: r for r in SimBackend(policy="fcfs").run(wl, progress=False).records}
    assert records["a"].t_done > 10  # ~2000 decode steps of ~7 ms
    assert records["b"].t_first_token - 1.0 < 0.05
    assert records["b"].t_done < 1.1


@pytest.mark.parametrize("limit,first", [(128, "y"), (2, "x0")])
def test_lpm_sorts_only_short_queues_like_sglang(limit, first):
    """Beyond ``lpm_queue_limit`` waiting requests SGLang's LPM (and so the binding) is FCFS."""
    shared = tuple(range(300))
    progs = [Program("warm", "a", 0.0, (Call(shared, 2),)),
             Program("blocker", "a", 1.0, (Call(tuple(range(1000, 1200)), 300),))]
    progs += [Program(f"x{k}", "b", 1.001 + 0.001 * k, (Call(tuple(range(2000 + 400 * k, 2300 + 400 * k)), 5),))
              for k in range(3)]
    progs.append(Program("y", "c", 1.01, (Call(shared + (7, 8, 9), 5),)))
    result = SimBackend(policy="lpm", max_running_requests=1, lpm_queue_limit=limit).run(
        Workload("lpm", progs), progress=False)
    after_blocker = sorted((r for r in result.records if r.program_id not in ("warm", "blocker")),
                           key=lambda r: r.t_first_token)
    assert after_blocker[0].program_id == first


def test_eviction_feedback_says_what_the_worker_still_holds(monkeypatch):
    from sglang_fair.router.round_robin import RoundRobinRouter

    evicted = []

    class Watching(RoundRobinRouter):
        def on_evicted(self, worker, tokens):
            evicted.append(tuple(tokens))

    monkeypatch.setattr("sglang_fair.router.make_router", lambda name, n, **kw: Watching(n))
    s, x, y = tuple(range(200)), tuple(range(1000, 1100)), tuple(range(2000, 2100))
    progs = [Program("a", "a", 0.0, (Call(s + x, 2),)), Program("b", "a", 1.0, (Call(s + y, 2),)),
             Program("c", "a", 2.0, (Call(tuple(range(5000, 5600)), 2),))]
    result = SimBackend(policy="fcfs", kv_pool_tokens=1000).run(Workload("evict", progs), progress=False)
    assert not result.partial
    # a's cached tokens are two nodes, x (inserted after its prefill, split from s by b) and its
    # first output token (inserted at finish). The LRU leaf goes first, then x; s stays.
    assert len(evicted) == 2
    assert len(evicted[0]) == 301 and evicted[0][:300] == s + x  # keeps s + x
    assert evicted[1] == s + x[:1]  # keeps s


def test_duplicate_program_ids_are_refused():
    progs = [Program("p", "a", 0.0, (Call((1,), 2),)), Program("p", "b", 0.0, (Call((2,), 2),))]
    with pytest.raises(ValueError, match="program id 'p' is used more than once"):
        SimBackend().run(Workload("dup", progs), progress=False)


def test_policy_refusals_become_error_records():
    """A policy that throttles arrivals (FairServe's per-user limit) is asked before enqueue, as the
    binding does; a refused call is answered at once (HTTP 429 in a live run, with Retry-After) and
    its children fail. Calls pass their interaction (the program), so FairServe refuses only the
    first call of a new interaction, never one inside an interaction it accepted."""
    config = {"fairserve": {"user_limit": 3, "window_s": 600, "overload_kv_usage": 0.0}}
    wl = tree_workload(programs=6, clients=1)  # 6 programs x 7 calls of one client
    result = SimBackend(policy="fairserve", fair={"policy_config": config}).run(wl, progress=False)
    assert len(result.records) == wl.num_calls() and result.partial
    refused = [r for r in result.records if r.error and r.error.startswith("refused by policy (HTTP 429")]
    assert refused and all(r.t_done is None for r in refused)
    assert all(r.throttled and r.retry_after_s >= 1 and r.call_index == 0 for r in refused)
    assert all(r.ok or r.error == "parent failed" or r in refused for r in result.records)
    # An accepted interaction runs to its end.
    for pid in {r.program_id for r in result.records if r.call_index == 0 and r.ok}:
        assert all(r.ok for r in result.records if r.program_id == pid)
    assert sum(r.ok for r in result.records) >= 7


def test_calls_carry_application_identity_to_the_scheduler(monkeypatch):
    """app = Program.kind, interaction = Program.program_id, stage = call index, prompt = token ids,
    as the live bench sends them in headers (check_arrival gets app and interaction too)."""
    from sglang_fair.core import FairScheduler

    seen, arrivals = [], []
    enqueue, check = FairScheduler.enqueue, FairScheduler.check_arrival

    def spy_enqueue(self, rid, client, input_len, payload=None, **kw):
        seen.append((rid, kw))
        return enqueue(self, rid, client, input_len, payload, **kw)

    def spy_check(self, client, kv_usage, app=None, interaction=None):
        arrivals.append((client, app, interaction))
        return check(self, client, kv_usage, app, interaction)

    monkeypatch.setattr(FairScheduler, "enqueue", spy_enqueue)
    monkeypatch.setattr(FairScheduler, "check_arrival", spy_check)
    wl = tree_workload(programs=1, clients=1)
    wl.programs = [Program(p.program_id, p.client, p.arrival, p.calls, kind="tot") for p in wl.programs]
    result = SimBackend(policy="justitia").run(wl, progress=False)
    assert not result.partial and len(seen) == len(arrivals) == wl.num_calls()
    by_rid = {r.rid: r for r in result.records}
    for rid, kw in seen:
        assert kw["app"] == "tot" and kw["interaction"] == "c0/p0" and kw["stage"] == by_rid[rid].call_index
        assert len(kw["prompt"]) == by_rid[rid].prompt_tokens
    assert set(arrivals) == {("client0", "tot", "c0/p0")}


def test_the_simulated_router_charges_with_the_policy_weights():
    from sglang_fair.core import FairOptions
    from sglang_fair.sim.cluster import SimCluster, SimConfig

    for router in ("d2lpm", "d2lpm_global"):
        cluster = SimCluster(SimConfig(num_workers=2, router=router), FairOptions(input_weight=0.5, output_weight=4.0))
        weights = cluster.router.options if router == "d2lpm_global" else cluster.router
        assert (weights.input_weight, weights.output_weight) == (0.5, 4.0)


def test_the_simulated_cluster_wide_dlpm_takes_the_policy_quantum():
    from sglang_fair.core import FairOptions
    from sglang_fair.sim.cluster import SimCluster, SimConfig

    cluster = SimCluster(SimConfig(num_workers=2, router="d2lpm_global"), FairOptions(quantum=256.0))
    assert cluster.router.fair.options.quantum == 256.0
    own = SimCluster(SimConfig(num_workers=2, router="d2lpm_global", router_options={"quantum": 4096}),
                     FairOptions(quantum=256.0))
    assert own.router.fair.options.quantum == 4096
    paper = SimCluster(SimConfig(num_workers=2, router="d2lpm"), FairOptions(quantum=256.0))
    assert paper.router.quantum != 256.0  # Algorithm 2's Q^w is its own


def test_the_simulated_cluster_wide_dlpm_learns_the_chunk_size_only_of_workers_that_mix_chunks():
    from sglang_fair.core import FairOptions
    from sglang_fair.sim.cluster import SimCluster, SimConfig

    for mixed, expected in ((True, 1024), (False, None)):
        config = SimConfig(num_workers=2, router="d2lpm_global", chunked_prefill_size=1024, enable_mixed_chunk=mixed)
        assert SimCluster(config, FairOptions()).router.options.worker_chunk_tokens == expected


def test_decode_statistics_charge_each_token_the_step_it_waited_for():
    from sglang_fair.sim.costmodel import load_profile

    def run(requests: int):
        wl = Workload("batch", [Program(f"p{i}", "a", 0.0, (Call(tuple(range(i * 100, i * 100 + 50)), 40),))
                                for i in range(requests)])
        stats = SimBackend(policy="fcfs").run(wl, progress=False).meta["workers"][0]
        return stats["decode_tokens"], stats["decode_token_ms"] / stats["decode_tokens"]

    tokens, alone = run(1)
    d = load_profile("h100-llama-3.1-8b").decode  # the simulator's default profile
    assert 38 <= tokens <= 40  # every token after the prefill's first is a decode step's
    # one request's steps read its own 50-90 token context
    assert d.a + d.b + d.c * 50 <= alone <= d.a + d.b + d.c * 91
    tokens, shared = run(32)
    assert tokens >= 32 * 38 and shared > alone + d.b * 30  # a token in a batch of 32 waits for a longer step


def test_isolation_follows_the_servers_default_unless_set():
    # On for DLPM over two or more workers behind d2lpm_global, as --policy dlpm --dp N; off elsewhere.
    assert SimBackend("dlpm", num_workers=2, router="d2lpm_global").options.isolation
    assert not SimBackend("dlpm", num_workers=2, router="d2lpm_global", isolation=False).options.isolation
    assert not SimBackend("dlpm", num_workers=2, router="d2lpm").options.isolation
    assert not SimBackend("dlpm").options.isolation
    assert not SimBackend("lpm", num_workers=2, router="d2lpm_global").options.isolation
