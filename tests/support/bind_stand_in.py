"""A server whose HTTP port is taken, behaving as SGLang then does: uvicorn logs the bind
error and the process hangs on. Run as ``python -m tests.support.bind_stand_in --host H --port P``."""

import argparse
import socket
import time



def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    args, _ = parser.parse_known_args()  # the rest is a server's command line, ignored
    try:
        socket.create_server((args.host, args.port)).close()
    except OSError as error:  # the real EADDRINUSE, in uvicorn's words
        print(f"ERROR:    [Errno {error.errno}] error while attempting to bind on address "
              f"({args.host!r}, {args.port}): {error.strerror.lower()}", flush=True)
    time.sleep(600)


if __name__ == "__main__":
    main()
