"""The pods' network: one private network namespace with loopback alone, shared by every pod.

Why: Ray rewrites a node address of 127.0.0.1 to the machine's network address and then listens
on every interface, unless RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0, with which `ray start` refuses to
start a worker node (ray/scripts/scripts.py, `start`). In a namespace with loopback alone, Ray's
own address lookup (`node_ip_address_from_perspective`) finds no route and keeps 127.0.0.1, and
nothing a pod opens is reachable from the machine's network. A `sleep` process created with
`unshare --net` holds the namespace; pods enter it with `nsenter --net`.

Crossing over, as kube-proxy and the pod network would: `Relay` listens inside the namespace and
connects outside (the pods reach the API server), `connect_inside` opens a socket inside it for a
caller outside (the operator and the tests reach a Ray dashboard through service_proxy.py). A
socket keeps the namespace it was created in, so one thread may switch (setns) to create it.
Needs root and util-linux's unshare/nsenter, as tests/test_read_only_root.py does.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import select
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

CLONE_NEWNET = 0x40000000
_libc = ctypes.CDLL(None, use_errno=True)
_switch = threading.Lock()


@contextlib.contextmanager
def inside(netns: Path) -> Iterator[None]:
    """This thread in the namespace at `netns` for the block (sockets made there stay there)."""
    with _switch, open("/proc/thread-self/ns/net") as home, open(netns) as target:
        if _libc.setns(target.fileno(), CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), f"setns into {netns}")
        try:
            yield
        finally:
            if _libc.setns(home.fileno(), CLONE_NEWNET) != 0:
                raise OSError(ctypes.get_errno(), "setns back")


class PodNetwork:
    def __init__(self) -> None:
        self.holder = subprocess.Popen(
            ["unshare", "--net", "sh", "-c", "ip link set lo up && exec sleep 2147483647"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self.path = Path(f"/proc/{self.holder.pid}/ns/net")
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError), open(self.path) as ns, open("/proc/self/ns/net") as own:
                if os.stat(ns.fileno()).st_ino != os.stat(own.fileno()).st_ino and self._lo_up():
                    return
            time.sleep(0.05)
        self.stop()
        raise RuntimeError("the pods' network namespace did not come up (needs root and unshare)")

    def _lo_up(self) -> bool:
        out = subprocess.run(["nsenter", f"--net={self.path}", "ip", "-o", "link", "show", "lo"],
                             capture_output=True, text=True)  # fmt: skip
        return "UP" in out.stdout.split(">")[0]

    def prefix(self) -> list[str]:
        """The argv prefix that runs a command inside the namespace."""
        return ["nsenter", f"--net={self.path}", "--"]

    def connect_inside(self, port: int, timeout: float = 5.0) -> socket.socket:
        with inside(self.path):
            return socket.create_connection(("127.0.0.1", port), timeout=timeout)

    def stop(self) -> None:
        if self.holder.poll() is None:
            self.holder.terminate()
            self.holder.wait(timeout=10)


def _pump(a: socket.socket, b: socket.socket) -> None:
    try:
        while True:
            ready, _, _ = select.select([a, b], [], [], 60)
            if not ready:
                continue
            for src in ready:
                data = src.recv(65536)
                if not data:
                    return
                (b if src is a else a).sendall(data)
    except OSError:
        return
    finally:
        a.close()
        b.close()


class Relay:
    """Listens on 127.0.0.1:`port` inside the namespace; each connection goes to 127.0.0.1:`target` outside."""

    def __init__(self, network: PodNetwork, port: int, target: int):
        with inside(network.path):
            self.listener = socket.create_server(("127.0.0.1", port))
        self.target = target
        threading.Thread(target=self._serve, name=f"relay-{port}", daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            try:
                out = socket.create_connection(("127.0.0.1", self.target), timeout=10)
            except OSError:
                conn.close()
                continue
            threading.Thread(target=_pump, args=(conn, out), daemon=True).start()

    def stop(self) -> None:
        self.listener.close()
