"""The workload model's derived views."""

from sglang_fair.workloads.model import Call, Program, Workload


def test_a_client_is_well_behaved_only_if_every_program_it_sends_is():
    call = (Call(tokens=(1, 2), max_new_tokens=1),)
    wl = Workload("t", [Program("a", "zed", 0.0, call), Program("b", "amy", 0.0, call, well_behaved=False),
                        Program("c", "amy", 1.0, call), Program("d", "bob", 0.0, call)])
    assert wl.well_behaved_clients() == {"amy": False, "bob": True, "zed": True}
    assert list(wl.well_behaved_clients()) == wl.clients
