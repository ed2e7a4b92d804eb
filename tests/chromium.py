"""A minimal Chrome DevTools Protocol client over --remote-debugging-pipe, for driving the
HTML report in the system's headless Chromium: load a file, type, move the mouse, read the DOM,
take a screenshot. No port is opened and nothing is downloaded (no playwright/selenium needed).

The pipe protocol: Chromium reads JSON messages from fd 3 and writes to fd 4, each ended by NUL.
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--mute-audio",
)


def find_chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "/usr/bin/chromium"):
        found = shutil.which(name)
        if found:
            return found
    return None


def _above_4(fd: int) -> int:
    moved = fcntl.fcntl(fd, fcntl.F_DUPFD, 10)
    os.close(fd)
    return moved


class Browser:
    def __init__(self, profile: Path, width: int = 1280, height: int = 900, timeout: float = 60.0):
        binary = find_chromium()
        if binary is None:
            raise RuntimeError("Chromium not installed (apt-get install chromium)")
        to_child, self._out = os.pipe()  # we write, Chromium reads on fd 3
        self._in, from_child = os.pipe()  # Chromium writes on fd 4, we read
        # In a fresh interpreter the pipe ends can be fd 3 or 4 themselves, and the redirections below
        # would then close them before Chromium starts; moved to 10 and up, they never clash.
        to_child, from_child = (_above_4(fd) for fd in (to_child, from_child))
        # bash moves the two pipe ends onto fd 3 and 4 before exec'ing Chromium.
        script = f'exec "$0" "$@" 3<&{to_child} 4>&{from_child} {to_child}<&- {from_child}>&-'
        self.proc = subprocess.Popen(
            [
                "bash",
                "-c",
                script,
                binary,
                *FLAGS,
                "--remote-debugging-pipe",
                f"--user-data-dir={profile}",
                f"--window-size={width},{height}",
                "about:blank",
            ],
            pass_fds=(to_child, from_child),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        os.close(to_child)
        os.close(from_child)
        self.timeout = timeout
        self._id = 0
        self._buf = b""
        self.events: list[dict] = []
        target = self.call("Target.createTarget", url="about:blank")["targetId"]
        self.session = self.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        self.send("Page.enable")
        self.send("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1, mobile=False)

    # ---- protocol ----------------------------------------------------------------
    def _read_message(self, deadline: float) -> dict:
        while b"\0" not in self._buf:
            if time.monotonic() > deadline:
                raise TimeoutError("no answer from Chromium")
            chunk = os.read(self._in, 1 << 16)
            if not chunk:
                raise RuntimeError("Chromium closed the pipe")
            self._buf += chunk
        raw, self._buf = self._buf.split(b"\0", 1)
        return json.loads(raw)

    def call(self, method: str, session: str | None = None, **params: Any) -> dict:
        self._id += 1
        msg = {"id": self._id, "method": method, "params": params}
        if session:
            msg["sessionId"] = session
        os.write(self._out, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + self.timeout
        while True:
            reply = self._read_message(deadline)
            if reply.get("id") == self._id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def send(self, method: str, **params: Any) -> dict:
        """A command to the page's session."""
        return self.call(method, self.session, **params)

    # ---- what a test needs -------------------------------------------------------
    def open(self, url: str) -> None:
        self.events.clear()
        self.send("Page.navigate", url=url)
        deadline = time.monotonic() + self.timeout
        while self.eval("document.readyState") != "complete":
            if time.monotonic() > deadline:
                raise TimeoutError(f"{url} did not finish loading")
            time.sleep(0.05)

    def eval(self, expression: str) -> Any:
        res = self.send("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in res:
            raise RuntimeError(f"{expression}: {res['exceptionDetails'].get('exception', {}).get('description')}")
        return res["result"].get("value")

    def type_into(self, selector: str, text: str) -> None:
        """Focus the element and type as a user would: one key at a time, each firing `input`."""
        self.eval(f"document.querySelector({json.dumps(selector)}).focus()")
        for ch in text:
            self.send("Input.dispatchKeyEvent", type="keyDown", text=ch, unmodifiedText=ch, key=ch)
            self.send("Input.dispatchKeyEvent", type="keyUp", key=ch)

    def mouse_move(self, x: float, y: float) -> None:
        self.send("Input.dispatchMouseEvent", type="mouseMoved", x=x, y=y)

    def screenshot(self, path: Path, full_page: bool = False) -> Path:
        params: dict[str, Any] = {"format": "png"}
        if full_page:
            params["captureBeyondViewport"] = True
            size = self.send("Page.getLayoutMetrics")["cssContentSize"]
            params["clip"] = {"x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1}
        path.write_bytes(base64.b64decode(self.send("Page.captureScreenshot", **params)["data"]))
        return path

    def close(self) -> None:
        try:
            self.call("Browser.close")
        except Exception:  # noqa: BLE001 - it may already be gone
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self._out)
        os.close(self._in)

    def __enter__(self) -> "Browser":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
