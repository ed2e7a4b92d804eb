"""The local Gemini-shaped test server as a process of its own, for checks that run the installed
`taxonomy` from outside the checkout (.ci/run): prints its URL on the first line, serves until killed."""

from __future__ import annotations

import signal
import sys
import threading

from tests import responders
from tests.fake_gemini import FakeGeminiServer


def main() -> None:
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    with FakeGeminiServer(responder=responders.model) as srv:
        print(srv.url, flush=True)
        try:
            stop.wait()
        except KeyboardInterrupt:
            pass
        print(
            f"served {srv.count('generate')} generate and {srv.count('embed')} embed requests",
            file=sys.stderr,
            flush=True,
        )


if __name__ == "__main__":
    main()
