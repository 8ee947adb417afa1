#!/usr/bin/python3
# agent-call.py SOCKET COMMAND [TIMEOUT_MS]: one command to a guest's hotmig-agent through the
# host side of its virtio-serial channel (hotmig-lab channel NAME): the 0xFF sync handshake,
# then {"execute": COMMAND, "arguments": {"timeout_ms": TIMEOUT_MS}}; prints the reply line and
# exits 0 when it holds "return". For the baselines of tests/bench/migration.sh, which quiesce
# and resume the workload around a VF moved by hand (docs/protocol.md).
import json
import random
import socket
import sys
import time


def main():
    if len(sys.argv) not in (3, 4):
        sys.exit("usage: agent-call.py SOCKET COMMAND [TIMEOUT_MS]")
    path, command = sys.argv[1], sys.argv[2]
    timeout_ms = int(sys.argv[3]) if len(sys.argv) == 4 else 30000
    deadline = time.monotonic() + timeout_ms / 1000 + 30
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(path)
    buf = b""

    def line():
        nonlocal buf
        while b"\n" not in buf:
            s.settimeout(max(deadline - time.monotonic(), 0.01))
            chunk = s.recv(65536)
            if not chunk:
                sys.exit("agent-call: the channel closed")
            buf += chunk
        out, buf = buf.split(b"\n", 1)
        return out

    sync_id = random.randint(1, 2**31 - 1)
    s.sendall(b"\xff" + json.dumps({"execute": "sync", "arguments": {"id": sync_id}}).encode() + b"\n")
    while True:
        raw = line()
        if b"\xff" in raw:
            raw = raw[raw.rindex(b"\xff") + 1:]
        try:
            if json.loads(raw).get("return") == sync_id:
                break
        except ValueError:
            pass
    args = {"timeout_ms": timeout_ms} if command in ("prepare", "resume") else {}
    s.sendall(json.dumps({"execute": command, "arguments": args}).encode() + b"\n")
    raw = line()
    print(raw.decode(errors="replace"))
    sys.exit(0 if "return" in json.loads(raw) else 1)


if __name__ == "__main__":
    main()
