"""A headless Debian chromium driven over the Chrome DevTools Protocol with aiohttp's websocket
client: navigate, evaluate (awaiting the page's promises), click, screenshot. For browser tests."""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import aiohttp
import pytest

CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update",
                  "--disable-sync", "--disable-dev-shm-usage"]


class CdpError(Exception):
    """The browser answered a command with an error, or a page script threw."""


class Browser:
    """`async with Browser(tmp_path) as page:` a chromium with one page target to drive."""

    def __init__(self, profile: Path, width: int = 1280, height: int = 900) -> None:
        self.profile = profile
        self.size = (width, height)
        self._process: subprocess.Popen | None = None
        self._http: aiohttp.ClientSession | None = None
        self._ws: aiohttp.ClientWebSocketResponse | None = None
        self._ids = itertools.count(1)
        self._calls: dict[int, asyncio.Future] = {}
        self._events: dict[str, list[asyncio.Future]] = {}
        self._reader: asyncio.Task | None = None

    async def __aenter__(self) -> Browser:
        if shutil.which("chromium") is None:  # `make test` installs it; never a silent skip
            pytest.fail("this test needs Debian's chromium: apt-get install chromium",
                        pytrace=False)
        self.profile.mkdir(parents=True, exist_ok=True)
        self._process = subprocess.Popen(
            ["chromium", *CHROMIUM_FLAGS, f"--user-data-dir={self.profile}",
             "--remote-debugging-port=0", f"--window-size={self.size[0]},{self.size[1]}",
             "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        port = await self._devtools_port()
        self._http = aiohttp.ClientSession()
        async with self._http.get(f"http://127.0.0.1:{port}/json/list") as response:
            targets = await response.json()
        [target] = [t for t in targets if t["type"] == "page"][:1]
        self._ws = await self._http.ws_connect(target["webSocketDebuggerUrl"], max_msg_size=0)
        self._reader = asyncio.create_task(self._read())
        await self.send("Page.enable")
        await self.send("Runtime.enable")
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._reader is not None:
            self._reader.cancel()
        if self._ws is not None:
            await self._ws.close()
        if self._http is not None:
            await self._http.close()
        if self._process is not None:
            self._process.terminate()
            try:
                await asyncio.to_thread(self._process.wait, 10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                await asyncio.to_thread(self._process.wait, 10)

    async def _devtools_port(self) -> int:
        """chromium writes its port to <profile>/DevToolsActivePort once it listens."""
        port_file = self.profile / "DevToolsActivePort"
        for _ in range(600):  # up to 30 s: a file, not an event we could await
            if port_file.exists() and port_file.read_text().strip():
                return int(port_file.read_text().split()[0])
            assert self._process is not None
            if self._process.poll() is not None:
                raise CdpError(f"chromium exited with {self._process.returncode}")
            await asyncio.sleep(0.05)
        raise CdpError("chromium never wrote DevToolsActivePort")

    async def _read(self) -> None:
        assert self._ws is not None
        async for message in self._ws:
            data = json.loads(message.data)
            if "id" in data:
                future = self._calls.pop(data["id"], None)
                if future is not None and not future.done():
                    if "error" in data:
                        future.set_exception(CdpError(data["error"].get("message")))
                    else:
                        future.set_result(data.get("result", {}))
            else:
                for future in self._events.pop(data.get("method"), []):
                    if not future.done():
                        future.set_result(data.get("params", {}))

    async def send(self, method: str, **params: Any) -> dict:
        assert self._ws is not None
        call_id = next(self._ids)
        future = asyncio.get_running_loop().create_future()
        self._calls[call_id] = future
        await self._ws.send_str(json.dumps({"id": call_id, "method": method, "params": params}))
        return await asyncio.wait_for(future, 30)

    def expect(self, event: str) -> asyncio.Future:
        """A future for the next `event` (ask before the command that causes it)."""
        future = asyncio.get_running_loop().create_future()
        self._events.setdefault(event, []).append(future)
        return future

    async def navigate(self, url: str) -> None:
        loaded = self.expect("Page.loadEventFired")
        result = await self.send("Page.navigate", url=url)
        if result.get("errorText"):
            raise CdpError(f"{url}: {result['errorText']}")
        await asyncio.wait_for(loaded, 30)

    async def evaluate(self, expression: str, timeout_s: float = 30) -> Any:
        """The expression's value (a promise is awaited in the page)."""
        result = await asyncio.wait_for(self.send(
            "Runtime.evaluate", expression=expression, awaitPromise=True, returnByValue=True,
            timeout=int(timeout_s * 1000)), timeout_s + 5)
        if "exceptionDetails" in result:
            details = result["exceptionDetails"]
            raise CdpError(details.get("exception", {}).get("description") or details.get("text"))
        return result["result"].get("value")

    async def wait_for(self, condition: str, timeout_s: float = 15) -> Any:
        """Await, in the page, the first truthy value of `condition` (checked every 20 ms by the
        page itself: one round trip, and a value the page's events set is seen when drawn)."""
        return await self.evaluate(f"""new Promise((resolve, reject) => {{
            const deadline = performance.now() + {timeout_s * 1000};
            const check = () => {{
                let value;
                try {{ value = ({condition}); }} catch (err) {{ value = undefined; }}
                if (value) resolve(value);
                else if (performance.now() > deadline)
                    reject(new Error("timed out waiting for: " + {json.dumps(condition)}));
                else setTimeout(check, 20);
            }};
            check();
        }})""", timeout_s + 5)

    async def screenshot(self, path: Path) -> Path:
        """The page as a PNG, its full height."""
        metrics = await self.send("Page.getLayoutMetrics")
        height = int(metrics["cssContentSize"]["height"])
        shot = await self.send("Page.captureScreenshot", format="png", captureBeyondViewport=True,
                               clip={"x": 0, "y": 0, "width": self.size[0],
                                     "height": max(height, 200), "scale": 1})
        path.write_bytes(base64.b64decode(shot["data"]))
        return path
