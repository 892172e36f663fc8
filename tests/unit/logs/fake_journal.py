"""A stand-in for journald's native socket in a temporary directory: it receives
datagrams (and memfds passed over it) and parses the native protocol as journald does
(systemd's src/journal/journald-native.c)."""

from __future__ import annotations

import array
import os
import socket
import struct
from pathlib import Path


class FakeJournal:
    def __init__(self, directory: Path) -> None:
        self.path = str(directory / "journal.socket")
        self.socket = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.socket.bind(self.path)
        self.socket.settimeout(5)
        # Room for an entry that does not fit a datagram, so the sender passes a memfd.
        self.socket.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)

    def entry(self) -> dict[str, str]:
        """The next entry's fields."""
        fds = array.array("i")
        data, ancillary, _, _ = self.socket.recvmsg(1 << 17, socket.CMSG_LEN(4 * fds.itemsize))
        for level, kind, blob in ancillary:
            if (level, kind) == (socket.SOL_SOCKET, socket.SCM_RIGHTS):
                fds.frombytes(blob[: len(blob) - len(blob) % fds.itemsize])
        if fds:
            assert data == b"", "a memfd comes alone"
            (fd,) = fds
            try:
                data = os.pread(fd, os.fstat(fd).st_size, 0)
            finally:
                os.close(fd)
        return parse(data)

    def empty(self) -> bool:
        self.socket.settimeout(0.05)
        try:
            self.socket.recv(1, socket.MSG_PEEK)
        except TimeoutError:
            return True
        finally:
            self.socket.settimeout(5)
        return False

    def close(self) -> None:
        self.socket.close()


def parse(data: bytes) -> dict[str, str]:
    fields: dict[str, str] = {}
    i = 0
    while i < len(data):
        end = data.index(b"\n", i)
        line = data[i:end]
        if b"=" in line:
            key, _, value = line.partition(b"=")
            i = end + 1
        else:  # KEY\n, 64-bit little-endian length, value, \n
            key = line
            (size,) = struct.unpack("<Q", data[end + 1:end + 9])
            value = data[end + 9:end + 9 + size]
            assert data[end + 9 + size:end + 10 + size] == b"\n"
            i = end + 10 + size
        assert key and key.upper() == key and not key.startswith(b"_"), key
        fields[key.decode()] = value.decode()
    return fields
