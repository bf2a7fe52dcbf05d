"""Run an app on a real uvicorn server in a background thread (loopback, a free port): for
integration tests and load runs with real HTTP clients."""

from __future__ import annotations

import socket
import threading
import time
from typing import Any


class BackgroundServer:
    """``with BackgroundServer(app) as server: httpx.get(server.url + "/health")``."""

    def __init__(
        self, app: Any, host: str = "127.0.0.1", log_level: str = "warning", **uvicorn_options: Any
    ) -> None:
        import uvicorn

        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind((host, 0))
        self.host, self.port = self._sock.getsockname()[:2]
        self.url = f"http://{host}:{self.port}"
        options = {"access_log": False, "timeout_graceful_shutdown": 10, **uvicorn_options}
        self.server = uvicorn.Server(uvicorn.Config(app, log_level=log_level, **options))
        self._thread = threading.Thread(
            target=self.server.run,
            kwargs={"sockets": [self._sock]},
            name="minicache-test-server",
            daemon=True,
        )

    def start(self, timeout: float = 20.0) -> BackgroundServer:
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self.server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the uvicorn server did not start")
            time.sleep(0.01)
        return self

    def stop(self, timeout: float = 15.0) -> None:
        self.server.should_exit = True
        self._thread.join(timeout)
        self._sock.close()

    def __enter__(self) -> BackgroundServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
