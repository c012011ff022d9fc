from sglang_fair.bench.records import RequestRecord


def rec(client, t_sent, t_first, t_done, prompt=10, out=5, cached=None, program=None, call=0, wb=True, error=None):
    return RequestRecord(rid=f"{program or client}-{call}-{t_sent}", client=client, program_id=program or f"{client}/p",
                         call_index=call, well_behaved=wb, t_sent=t_sent, t_first_token=t_first, t_done=t_done,
                         prompt_tokens=prompt, cached_tokens=cached, output_tokens=out, error=error)
