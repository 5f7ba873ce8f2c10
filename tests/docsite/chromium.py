"""A headless Chromium driven over the Chrome DevTools Protocol, for the docs-site tests.

Debian's ``chromium`` package is started with ``--remote-debugging-port=0``; it writes the port it
chose into ``DevToolsActivePort`` in its profile folder, and the page target's websocket is found
through ``/json/list``. The client is deliberately small: numbered commands, their replies, and
every event kept so that console messages and uncaught exceptions can be checked afterwards.
"""

from __future__ import annotations

import base64
import itertools
import json
import os
import shutil
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import websocket

INSTALL_HINT = (
    "chromium is not installed: apt-get install --no-install-recommends chromium "
    "(./dev test installs it when it runs as root)"
)


def chromium_binary() -> str:
    """The browser's path, or a failed test with one line saying how to install it (never a skip)."""
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    pytest.fail(INSTALL_HINT, pytrace=False)


class Browser:
    """One headless Chromium process with one page; ``close`` ends the process."""

    def __init__(self, profile: Path, width: int = 1400, height: int = 1000) -> None:
        args = [
            chromium_binary(),
            "--headless",
            "--disable-gpu",
            "--no-first-run",
            "--no-default-browser-check",
            "--disable-extensions",
            "--remote-debugging-port=0",
            "--remote-allow-origins=*",
            f"--user-data-dir={profile}",
            f"--window-size={width},{height}",
            "about:blank",
        ]
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            args.insert(1, "--no-sandbox")  # Chromium refuses to run as root with its sandbox
        self.process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.events: list[dict[str, Any]] = []
        self._ids = itertools.count(1)
        try:
            port = self._port(profile / "DevToolsActivePort")
            self.socket = websocket.create_connection(self._page_socket(port), timeout=30)
        except BaseException:
            self.process.kill()
            self.process.wait()
            raise
        for domain in ("Page", "Runtime", "Log"):
            self.send(f"{domain}.enable")

    def _port(self, marker: Path) -> int:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"chromium exited with code {self.process.returncode} before listening")
            if marker.is_file():
                lines = marker.read_text().splitlines()
                if lines and lines[0].isdigit():
                    return int(lines[0])
            time.sleep(0.05)
        raise RuntimeError("chromium did not open its DevTools port within 30 s")

    @staticmethod
    def _page_socket(port: int) -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as response:
            targets = json.load(response)
        return next(t["webSocketDebuggerUrl"] for t in targets if t.get("type") == "page")

    def send(self, method: str, **params: Any) -> dict[str, Any]:
        """Send one command and return its result; events that arrive meanwhile are kept."""
        number = next(self._ids)
        self.socket.send(json.dumps({"id": number, "method": method, "params": params}))
        while True:
            message = json.loads(self.socket.recv())
            if message.get("id") == number:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result", {})
            self.events.append(message)

    def wait_for(self, event: str, timeout: float = 30) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for message in self.events:
                if message.get("method") == event:
                    self.events.remove(message)
                    return message
            self.socket.settimeout(max(deadline - time.monotonic(), 0.01))
            try:
                self.events.append(json.loads(self.socket.recv()))
            except websocket.WebSocketTimeoutException:
                break
        raise TimeoutError(f"no {event} within {timeout} s")

    def open(self, url: str) -> None:
        """Load ``url`` as a fresh document (a URL differing only in its #fragment would not reload)."""
        self.send("Page.navigate", url="about:blank")
        self.wait_for("Page.loadEventFired")
        self.events.clear()  # what follows is this page's own: errors() reports from here
        self.send("Page.navigate", url=url)
        self.wait_for("Page.loadEventFired")

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page (awaited if it is a promise)."""
        result = self.send("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            raise AssertionError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def settled(self, expression: str, expected: Any, timeout: float = 10) -> Any:
        """The value of ``expression`` once it equals ``expected``, or its last value after ``timeout``.

        A page reacts to a click or a new ``location.hash`` in event handlers that run after the
        browser has queued them (``hashchange`` is a task of its own), so what a user sees a moment
        later is asked again until it settles, instead of being read in the same instant.
        """
        deadline = time.monotonic() + timeout
        value = self.evaluate(expression)
        while value != expected and time.monotonic() < deadline:
            time.sleep(0.05)
            value = self.evaluate(expression)
        return value

    def click(self, x: float, y: float) -> None:
        """A real mouse click at page coordinates (what a user does, not a synthetic DOM event)."""
        for kind in ("mousePressed", "mouseReleased"):
            self.send("Input.dispatchMouseEvent", type=kind, x=x, y=y, button="left", clickCount=1)

    def type_text(self, text: str) -> None:
        self.send("Input.insertText", text=text)

    def press_enter(self) -> None:
        for kind in ("keyDown", "keyUp"):
            self.send(
                "Input.dispatchKeyEvent",
                type=kind,
                key="Enter",
                code="Enter",
                windowsVirtualKeyCode=13,
                text="\r",
            )

    def errors(self) -> list[str]:
        """Console errors, uncaught exceptions and browser log errors (a CSP violation is one) so far."""
        self._drain()
        found = []
        for message in self.events:
            method, params = message.get("method"), message.get("params", {})
            if method == "Runtime.exceptionThrown":
                found.append(params["exceptionDetails"].get("text", "exception"))
            elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
                found.append(
                    " ".join(str(a.get("value", a.get("description"))) for a in params.get("args", []))
                )
            elif method == "Log.entryAdded" and params["entry"].get("level") == "error":
                found.append(params["entry"].get("text", ""))
        return found

    def _drain(self) -> None:
        self.socket.settimeout(0.2)
        try:
            while True:
                self.events.append(json.loads(self.socket.recv()))
        except websocket.WebSocketTimeoutException:
            pass
        finally:
            self.socket.settimeout(30)

    def screenshot(self, path: Path) -> Path:
        data = self.send("Page.captureScreenshot", format="png", captureBeyondViewport=False)["data"]
        path.write_bytes(base64.b64decode(data))
        return path

    def close(self) -> None:
        try:
            self.socket.close()
        finally:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
