from sglang_fair.runs.records import RequestRecord


def rec(client, t_sent, t_first, t_done, prompt=10, out=5, cached=None, program=None, call=0, wb=True, error=None):
    return RequestRecord(rid=f"{program or client}-{call}-{t_sent}", client=client, program_id=program or f"{client}/p",
                         call_index=call, well_behaved=wb, t_sent=t_sent, t_first_token=t_first, t_done=t_done,
                         prompt_tokens=prompt, cached_tokens=cached, output_tokens=out, error=error)


def admitted(client, t_sent, t_admitted, progress=(), prompt=10, cached=0, requeues=(), t_done=None, error=None):
    """A record with the audit fields: ``progress`` is [(time, cumulative output tokens)]."""
    progress = [list(p) for p in progress]
    t_done = t_done if t_done is not None else max([t_admitted] + [t for t, _ in progress])
    r = rec(client, t_sent, progress[0][0] if progress else None, None if error else t_done, prompt=prompt,
            out=int(progress[-1][1]) if progress else 0, cached=cached, error=error)
    r.rid = f"{client}-{t_sent}-{t_admitted}"
    r.t_admitted = t_admitted
    r.progress = progress
    r.requeues = [list(q) for q in requeues]
    return r
