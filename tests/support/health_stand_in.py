"""A server that is healthy at once: answers 200 on every GET. Run as
``python -m tests.support.health_stand_in --host H --port P`` (the rest of a server's command line is ignored)."""

import argparse
from http.server import BaseHTTPRequestHandler, HTTPServer


class _Healthy(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args) -> None:
        pass


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    args, _ = parser.parse_known_args()
    HTTPServer((args.host, args.port), _Healthy).serve_forever()


if __name__ == "__main__":
    main()
