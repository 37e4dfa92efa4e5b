"""Which process holds which TCP socket of a server, read from /proc (Linux): which worker
listens, and which worker a client's connection was accepted by."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

LISTEN, ESTABLISHED, TIME_WAIT = "0A", "01", "06"


@dataclass(frozen=True)
class TcpSocket:
    """One row of /proc/net/tcp: ports, state and the socket's inode."""

    local_port: int
    remote_port: int
    state: str
    inode: int


def tcp_sockets() -> list[TcpSocket]:
    rows = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        if not os.path.exists(table):
            continue
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            local, remote = fields[1].rpartition(":")[2], fields[2].rpartition(":")[2]
            rows.append(TcpSocket(int(local, 16), int(remote, 16), fields[3], int(fields[9])))
    return rows


def socket_inodes(pid: int) -> set[int]:
    """Inodes of the sockets process `pid` has open."""
    found = set()
    fd_dir = Path(f"/proc/{pid}/fd")
    for fd in fd_dir.iterdir() if fd_dir.exists() else ():
        try:
            target = os.readlink(fd)
        except OSError:  # closed meanwhile
            continue
        if target.startswith("socket:["):
            found.add(int(target[8:-1]))
    return found


def children(pid: int) -> list[int]:
    path = Path(f"/proc/{pid}/task/{pid}/children")
    return [int(child) for child in path.read_text().split()] if path.exists() else []


def listeners_by_pid(port: int, pids: list[int]) -> dict[int, set[int]]:
    """For each pid, the inodes of the sockets it holds listening on `port`."""
    listening = {s.inode for s in tcp_sockets() if s.state == LISTEN and s.local_port == port}
    return {pid: socket_inodes(pid) & listening for pid in pids}


def accepted_by(port: int, client_ports: list[int], pids: list[int]) -> dict[int, int | None]:
    """For each client port, the pid holding the server side of its connection to `port`."""
    sockets = tcp_sockets()
    inodes = {pid: socket_inodes(pid) for pid in pids}
    found: dict[int, int | None] = {}
    for client in client_ports:
        served = {
            s.inode
            for s in sockets
            if s.state == ESTABLISHED and s.local_port == port and s.remote_port == client
        }
        found[client] = next((pid for pid, own in inodes.items() if own & served), None)
    return found
