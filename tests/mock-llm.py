#!/usr/bin/env python3
"""A scripted stand-in for an LLM API on loopback, for the llm agent's tests.

    mock-llm.py --script S.json --port-file PORT [--log LOG] [--idle 120]

Listens on 127.0.0.1 on an ephemeral port and writes the port number to
PORT once it accepts connections.  Each request is answered by the next
entry of the script (a JSON list, or {"responses": [...]}); when the script
runs out, with HTTP 500 "mock script exhausted".  An entry:

    status      HTTP status (200)
    headers     {"Retry-After": "0", ...}
    delay       seconds to wait before answering
    body        the raw body, sent as it is (malformed JSON, HTML, ...)
    json        a body as JSON
    reply       the model's text, wrapped in the wire format of the path
                asked (/chat/completions or /messages) with token usage
    reply_file  the same, read from a file when the request comes
    pad         N bytes of filler appended to the reply (huge replies)
    finish      "length" (or "max_tokens"): the model hit its token limit
    usage       [input_tokens, output_tokens] ([1200, 340])
    repeat      serve this entry N times (1)

A new script file (written elsewhere and renamed over the old one) is
picked up by the next request and starts from its first entry, so one
server serves a whole test file.  LOG gets one JSON line per request: path, headers, body (parsed).  The
server exits after --idle seconds without a request, so a test that dies
leaves nothing running.
"""
import argparse
import json
import os
import socketserver
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Script:
    def __init__(self, path):
        self.path = path
        self.stamp = None
        self.lock = threading.Lock()
        self.last = time.time()
        self.load()

    def load(self):
        st = os.stat(self.path)
        stamp = (st.st_ino, st.st_mtime_ns, st.st_size)
        if stamp == self.stamp:
            return
        with open(self.path) as f:
            data = json.load(f)
        if isinstance(data, dict):
            data = data.get("responses", [])
        self.entries = []
        for e in data:
            self.entries += [e] * int(e.get("repeat", 1))
        self.stamp = stamp
        self.n = 0

    def next(self):
        with self.lock:
            self.last = time.time()
            self.load()
            self.n += 1
            if self.n <= len(self.entries):
                return self.n, self.entries[self.n - 1]
            return self.n, {"status": 500, "json": {
                "error": {"message": "mock script exhausted"}}}


def wrap(path, req, text, e):
    usage = e.get("usage", [1200, 340])
    model = (req or {}).get("model", "mock-model") if isinstance(req, dict) \
        else "mock-model"
    finish = e.get("finish")
    if path.endswith("/messages"):
        return {
            "id": "msg_mock", "type": "message", "role": "assistant",
            "model": model,
            "content": [{"type": "text", "text": text}],
            "stop_reason": "max_tokens" if finish else "end_turn",
            "usage": {"input_tokens": usage[0], "output_tokens": usage[1]},
        }
    return {
        "id": "chatcmpl-mock", "object": "chat.completion", "model": model,
        "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": text},
            "finish_reason": "length" if finish else "stop",
        }],
        "usage": {"prompt_tokens": usage[0], "completion_tokens": usage[1],
                  "total_tokens": usage[0] + usage[1]},
    }


def make_handler(script, log):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, fmt, *args):
            pass

        def do_POST(self):
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            try:
                req = json.loads(raw)
            except ValueError:
                req = raw.decode("utf-8", "replace")
            n, e = script.next()
            if log:
                with script.lock, open(log, "a") as f:
                    f.write(json.dumps({"n": n, "path": self.path,
                                        "headers": dict(self.headers),
                                        "body": req}) + "\n")
            time.sleep(float(e.get("delay", 0)))
            if "body" in e:
                body = e["body"].encode()
            elif "json" in e:
                body = json.dumps(e["json"]).encode()
            else:
                text = e.get("reply", "")
                if "reply_file" in e:
                    with open(e["reply_file"]) as f:
                        text = f.read()
                text += "x" * int(e.get("pad", 0))
                body = json.dumps(wrap(self.path, req, text, e)).encode()
            try:
                self.send_response(int(e.get("status", 200)))
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                for k, v in e.get("headers", {}).items():
                    self.send_header(k, str(v))
                self.end_headers()
                self.wfile.write(body)
            except (BrokenPipeError, ConnectionResetError):
                pass        # the client gave up (a timeout test)

    return Handler


class Server(ThreadingHTTPServer):
    daemon_threads = True

    def server_bind(self):
        # HTTPServer's own asks DNS for our name: seconds without a network
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = self.server_address[:2]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--script", required=True)
    ap.add_argument("--port-file", required=True)
    ap.add_argument("--log")
    ap.add_argument("--idle", type=float, default=120)
    a = ap.parse_args()
    script = Script(a.script)
    server = Server(("127.0.0.1", 0), make_handler(script, a.log))
    tmp = a.port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write("%d\n" % server.server_address[1])
    os.replace(tmp, a.port_file)

    def watchdog():
        while time.time() - script.last < a.idle:
            time.sleep(1)
        os._exit(0)

    threading.Thread(target=watchdog, daemon=True).start()
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
