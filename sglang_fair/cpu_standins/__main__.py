"""``python -m sglang_fair.cpu_standins [--install]``: say whether SGLang's CPU imports resolve, or make them."""

from __future__ import annotations

import argparse
import sys

from sglang_fair.cpu_standins import SITE, RealPackagesPresent, install, missing


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sglang_fair.cpu_standins", description=__doc__)
    parser.add_argument("--install", action="store_true",
                        help="add the stand-ins to this environment's import path (CPU-only environments)")
    args = parser.parse_args(argv)
    if args.install:
        try:
            path = install()
        except RealPackagesPresent as exc:
            print(f"sglang_fair.cpu_standins: not installed: {exc}", file=sys.stderr)
            return 2
        print(f"sglang_fair.cpu_standins: {path} puts {SITE} on the import path")
        return 0
    absent = missing()
    print("missing: " + ", ".join(absent) if absent else "sgl_kernel and torchvision resolve")
    return 0


if __name__ == "__main__":
    sys.exit(main())
