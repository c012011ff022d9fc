"""Fit simulator profiles from a calibration file: ``python -m sglang_fair.sim.fit``.

Input: JSON ``{"meta": {"gpu": ...}, "rows": [...]}`` where each row is
``{"model", "kind": "prefill", "cached", "new", "ms"}`` (one request's
extend of ``new`` tokens on top of ``cached``) or
``{"model", "kind": "decode", "batch", "context", "ms"}`` (one decode step of
``batch`` requests of ``context`` tokens each). Optional
``{"model", "kind": "prefill_batch", "requests": [[new, cached], ...], "ms"}``
rows (several requests extended in one forward pass) are not fitted: their
error checks how the cost model adds requests up. One profile is written per
model, named ``<gpu-tag>-<model>``.

Least squares on relative error (each row weighted by 1/ms); the prefill knee
is chosen from a grid as the one with the lowest mean relative error among
fits whose coefficients are all non-negative (so times grow with tokens).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

import numpy as np

from sglang_fair.sim.costmodel import PROFILE_DIR, CostModel, DecodeFit, PrefillFit, Profile

KNEES = (0, 64, 128, 192, 256, 320, 384, 448, 512, 640, 768, 1024)
BYTES_PER_GIB = 1 << 30


class CalibrationError(ValueError):
    """A calibration file that cannot be fitted."""


def _lstsq(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    w = 1.0 / y
    coef, *_ = np.linalg.lstsq(x * w[:, None], y * w, rcond=None)
    return coef


def fit_prefill(rows: list[dict]) -> PrefillFit:
    new = np.array([r["new"] for r in rows], float)
    cached = np.array([r["cached"] for r in rows], float)
    ms = np.array([r["ms"] for r in rows], float)
    best: tuple[float, PrefillFit] | None = None
    for knee in KNEES:
        x = np.column_stack([np.ones_like(new), np.maximum(new, knee), cached, new ** 2, new * cached])
        a, b, c, d, e = _lstsq(x, ms)
        if min(a, b, c, d, e) < 0:
            continue
        rel = np.abs(x @ np.array([a, b, c, d, e]) - ms) / ms
        fit = PrefillFit(float(a), float(b), float(c), float(d), float(e), knee,
                         int(new.max()), int(cached.max()))
        if best is None or rel.mean() < best[0]:
            best = (float(rel.mean()), fit)
    if best is None:
        raise CalibrationError("no non-negative prefill fit: the prefill rows do not grow with tokens")
    return best[1]


def fit_decode(rows: list[dict]) -> DecodeFit:
    batch = np.array([r["batch"] for r in rows], float)
    context = np.array([r["context"] for r in rows], float)
    ms = np.array([r["ms"] for r in rows], float)
    x = np.column_stack([np.ones_like(batch), batch, batch * context])
    a, b, c = _lstsq(x, ms)
    return DecodeFit(float(a), float(b), float(c), int(batch.max()), int(context.max()))


def fit_errors(profile: Profile, rows: list[dict]) -> dict:
    """Median / max relative error of the profile on each row kind."""
    model = CostModel(profile)
    out = {}
    for kind in ("prefill", "decode", "prefill_batch"):
        errs = []
        for r in rows:
            if r["kind"] != kind:
                continue
            if kind == "prefill":
                pred = model.prefill_ms([(r["new"], r["cached"])])
            elif kind == "decode":
                pred = model.decode_ms(r["batch"], r["batch"] * r["context"])
            else:
                pred = model.prefill_ms([(new, cached) for new, cached in r["requests"]])
            errs.append(abs(pred - r["ms"]) / r["ms"])
        if errs:
            out[kind] = {"median": float(np.median(errs)), "max": float(max(errs)), "rows": len(errs)}
    return out


def _check_rows(rows: object, source: str) -> list[dict]:
    need = {"prefill": ("model", "cached", "new", "ms"), "decode": ("model", "batch", "context", "ms"),
            "prefill_batch": ("model", "requests", "ms")}
    if not isinstance(rows, list) or not rows:
        raise CalibrationError(f"{source}: 'rows' must be a non-empty list")
    for i, r in enumerate(rows):
        kind = r.get("kind") if isinstance(r, dict) else None
        if kind not in need:
            raise CalibrationError(f"{source}: row {i}: 'kind' must be 'prefill', 'decode' or 'prefill_batch', "
                                   f"got {kind!r}")
        missing = [k for k in need[kind] if k not in r]
        if missing:
            raise CalibrationError(f"{source}: row {i}: missing {', '.join(missing)}")
        if kind == "prefill_batch" and not (
                isinstance(r["requests"], list) and r["requests"]
                and all(isinstance(q, list) and len(q) == 2 and all(isinstance(x, int) and x >= 0 for x in q)
                        for q in r["requests"])):
            raise CalibrationError(f"{source}: row {i}: 'requests' must be a non-empty list of [new, cached] "
                                   f"token counts")
        if not r["ms"] > 0:
            raise CalibrationError(f"{source}: row {i}: 'ms' must be positive, got {r['ms']!r}")
    return rows


def fit_calibration(raw: dict, source: str, kv_pool_tokens: dict[str, int] | None = None,
                    tag: str | None = None) -> list[Profile]:
    """One profile per model in the calibration file, named ``<tag>-<model>`` (``tag``: from the
    GPU's name unless given)."""
    rows = _check_rows(raw.get("rows"), source)
    gpu = str(raw.get("meta", {}).get("gpu", "unknown-gpu"))
    tag = tag or _gpu_tag(gpu)
    profiles = []
    for model in sorted({r["model"] for r in rows}):
        mine = [r for r in rows if r["model"] == model]
        pre = [r for r in mine if r["kind"] == "prefill"]
        dec = [r for r in mine if r["kind"] == "decode"]
        if len(pre) < 5 or len(dec) < 3:
            raise CalibrationError(f"{source}: model {model!r} needs >= 5 prefill and >= 3 decode rows "
                                   f"(has {len(pre)} and {len(dec)})")
        pool = (kv_pool_tokens or {}).get(model)
        if pool is None:
            raise CalibrationError(f"no KV pool size for model {model!r}: pass --kv-pool {model}=TOKENS")
        profile = Profile(name=f"{tag}-{model}", model=model, gpu=gpu, prefill=fit_prefill(pre),
                          decode=fit_decode(dec), kv_pool_tokens=pool, source=source)
        profile.fit_error = fit_errors(profile, mine)
        profiles.append(profile)
    return profiles


def _gpu_tag(gpu: str) -> str:
    m = re.search(r"\b([A-Z]+\d+[A-Za-z]?)\b", gpu)
    return (m.group(1) if m else gpu.split()[0]).lower()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m sglang_fair.sim.fit", description=__doc__.split("\n\n")[0])
    ap.add_argument("calibration", help="calibration JSON (see docs/simulator.md for the format)")
    ap.add_argument("--kv-pool", action="append", default=[], metavar="MODEL=TOKENS",
                    help="KV pool size in tokens of each model on that GPU (required per model)")
    ap.add_argument("--out", default=str(PROFILE_DIR), help="directory for the profile JSON files")
    ap.add_argument("--tag", help="profile names are TAG-<model> (default: from the GPU's name, e.g. h100)")
    args = ap.parse_args(argv)
    try:
        pools = {}
        for item in args.kv_pool:
            model, sep, tokens = item.partition("=")
            if not sep or not (tokens.isascii() and tokens.isdigit()) or int(tokens) <= 0:
                raise CalibrationError(f"--kv-pool: expected MODEL=TOKENS with TOKENS > 0, got {item!r}")
            pools[model] = int(tokens)
        path = Path(args.calibration)
        try:
            raw = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError) as e:
            raise CalibrationError(f"cannot read calibration file {path}: {e}") from None
        if args.tag is not None and not re.fullmatch(r"[a-z0-9][a-z0-9.-]*", args.tag):
            raise CalibrationError(f"--tag: expected lower-case letters, digits, '.' and '-', got {args.tag!r}")
        profiles = fit_calibration(raw, path.name, pools, args.tag)
    except CalibrationError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for p in profiles:
        (out / f"{p.name}.json").write_text(json.dumps(p.to_json(), indent=2) + "\n")
        errs = ", ".join(f"{k}: median {v['median']:.1%} max {v['max']:.1%} ({v['rows']} rows)"
                         for k, v in p.fit_error.items())
        print(f"{out / (p.name + '.json')}: {errs}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
