"""A local HTTP server on 127.0.0.1 for download tests: in-memory files and failure modes.

Nothing here contacts any other address.
"""

from __future__ import annotations

import http.server
import threading
import time
from pathlib import Path


class LocalFileServer:
    """An HTTP server on 127.0.0.1 serving in-memory files, with failure modes for download tests.

    ``add(path, body, *, failures=0, mode="ok")``: the first ``failures`` requests answer HTTP 500.
    Modes: ``ok``; ``truncate`` announces the full Content-Length, sends half the body and closes;
    ``error500`` always answers 500; ``close`` drops the connection without an answer; ``trickle`` sends
    the body one byte every ``interval`` seconds (a server that never times a read out, but never finishes).
    ``requests`` counts hits per path; ``add_directory`` serves every file below a folder.
    """

    def __init__(self) -> None:
        self.files: dict[str, dict] = {}
        self.requests: dict[str, int] = {}
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:  # keep test output clean
                pass

            def do_GET(self) -> None:
                server.requests[self.path] = server.requests.get(self.path, 0) + 1
                spec = server.files.get(self.path)
                if spec is None:
                    self.send_error(404)
                    return
                if spec["mode"] == "close":
                    self.close_connection = True
                    self.connection.shutdown(2)
                    return
                if spec["mode"] == "error500" or server.requests[self.path] <= spec["failures"]:
                    self.send_error(500)
                    return
                body = spec["body"]
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if spec["mode"] == "trickle":
                    try:
                        for index in range(len(body)):
                            self.wfile.write(body[index : index + 1])
                            self.wfile.flush()
                            time.sleep(spec["interval"])
                    except OSError:  # the client gave up: what the test expects
                        pass
                    self.close_connection = True
                    return
                if spec["mode"] == "truncate":
                    self.wfile.write(body[: len(body) // 2])
                    self.wfile.flush()
                    self.close_connection = True
                    return
                self.wfile.write(body)

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def add(self, path: str, body: bytes, *, failures: int = 0, mode: str = "ok", interval: float = 0.5) -> str:
        self.files[path] = {"body": body, "failures": failures, "mode": mode, "interval": interval}
        return self.url + path

    def add_directory(self, directory: Path, *, mode: str = "ok") -> None:
        for path in sorted(p for p in directory.rglob("*") if p.is_file()):
            self.add("/" + path.relative_to(directory).as_posix(), path.read_bytes(), mode=mode)

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
