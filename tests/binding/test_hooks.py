"""The hook table is the single source: what the plugin registers, what SGLang applies, what docs list."""

from __future__ import annotations

import pkgutil
from pathlib import Path

import pytest

pytestmark = pytest.mark.engine

DOCS = Path(__file__).resolve().parents[2] / "docs"


def test_every_hook_is_applied_in_a_process_with_the_plugin(sglang_runtime):
    from sglang_fair.binding.common.applied_hooks import unapplied
    from sglang_fair.binding.hooks import hook_table

    assert unapplied(hook_table()) == []


def test_the_plugin_records_what_it_registered_for_the_scheduler_check(sglang_runtime):
    from sglang_fair.binding.common.applied_hooks import registered
    from sglang_fair.binding.hooks import hook_table

    scheduler = "sglang.srt.managers.scheduler."
    expected = [hook for hook in hook_table() if hook.side == "scheduler" and hook.target.startswith(scheduler)]
    assert expected and registered("scheduler", scheduler) == expected


def test_unapplied_names_a_target_sglang_did_not_wrap(sglang_runtime):
    from sglang.srt.plugins.hook_registry import HookType

    from sglang_fair.binding.common.applied_hooks import Hook, unapplied
    from sglang_fair.binding.scheduler.charging import note_queued

    stray = Hook("sglang.srt.managers.scheduler.Scheduler.get_next_batch_to_run", note_queued, HookType.AFTER,
                 "scheduler")
    gone = Hook("sglang.srt.managers.scheduler.Scheduler.renamed_in_a_later_release", note_queued, HookType.AFTER,
                "scheduler")
    assert unapplied([stray, gone]) == [stray.target, gone.target]


def test_a_patched_sglang_gets_exactly_the_hooks_no_patch_carries(sglang_runtime):
    from sglang_fair.binding.hooks import hook_table, hooks_to_register

    table = hook_table()
    assert hooks_to_register(False) == table
    registered = hooks_to_register(True)
    assert registered == [hook for hook in table if hook.patched_in is None]
    # Not carried by the series, so still hooked on a patched build (where they work the same).
    assert {hook.function.__name__ for hook in registered} >= {
        "refresh_when_idle", "gate_prefill_admission", "init_controller", "install_admin_routes"}
    # Carried by 0004: FairServe's throttle and the vocabulary check are in the patched source instead.
    carried = {(hook.target.rsplit(".", 1)[-1], hook.function.__name__) for hook in table if hook.patched_in}
    assert carried >= {("_abort_on_queued_limit", "throttle_arrivals"),
                       ("_handle_abort_finish_reason", "retry_after_header"),
                       ("launch_server", "install_throttle_handler"),
                       ("_create_tokenized_object", "refuse_out_of_vocab_ids")}
    assert not any(hook.function.__name__ in {"throttle_arrivals", "retry_after_header", "refuse_out_of_vocab_ids"}
                   for hook in registered)


def test_every_patched_in_names_a_function_of_the_pinned_release(sglang_runtime):
    from sglang_fair.binding.hooks import hook_table

    for hook in hook_table():
        if hook.patched_in:
            assert callable(pkgutil.resolve_name(hook.patched_in)), hook


def test_the_docs_list_every_hook_with_its_target(sglang_runtime):
    from sglang_fair.binding.hooks import hook_table

    text = "".join(path.read_text() for path in (DOCS / "architecture.md", DOCS / "router.md"))
    rows = [line for line in text.splitlines() if line.startswith("|")]
    for hook in hook_table():
        target = hook.target.rsplit(".", 1)[-1]
        assert any(f"{hook.function.__name__}`" in row and target in row for row in rows), hook
