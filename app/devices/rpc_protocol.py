"""Ask a ``ggml-rpc-server`` what its devices' buffers allow, in llama.cpp's own RPC protocol.

``llama-server --list-devices`` names an RPC host's devices and their memory, but not the two figures of each
remote buffer type that change the memory llama.cpp allocates there: its alignment (32 for a CPU server,
``minStorageBufferOffsetAlignment`` for Vulkan, 128 for CUDA) and its largest buffer (unlimited for CPU and
CUDA, 1 GiB for Vulkan: compute buffers above it are split into chunks, ``ggml_dyn_tallocr``). The client
asks for both (``ggml_backend_rpc_get_alignment``, ``ggml_backend_rpc_get_max_size`` in
``ggml/src/ggml-rpc/ggml-rpc.cpp``); so does this module, with the same messages:

    request:  | cmd (1 byte) | size (u64) | payload |
    response: | size (u64) | payload |

``HELLO`` (14) first, with 24 zero capability bytes (no transport upgrade), then ``DEVICE_COUNT`` (15),
then per device ``GET_ALIGNMENT`` (1), ``GET_MAX_SIZE`` (2) and ``GET_DEVICE_MEMORY`` (11), each with the
device index as a u32. The server serves one client at a time, so a host busy with a running llama.cpp
accepts the connection and never answers: that is a timeout here, reported, never a guess.
"""

from __future__ import annotations

import socket
import struct
import time
from dataclasses import dataclass

from app.errors import DetectError

CMD_GET_ALIGNMENT = 1
CMD_GET_MAX_SIZE = 2
CMD_GET_DEVICE_MEMORY = 11
CMD_HELLO = 14
CMD_DEVICE_COUNT = 15
CONN_CAPS_SIZE = 24
PROTOCOL_MAJOR = 7  # RPC_PROTO_MAJOR_VERSION of the pinned llama.cpp (ggml/include/ggml-rpc.h)
#: More devices than this on one server is not a real answer.
MAX_DEVICES = 64
#: A largest buffer at or above this is "unlimited" (``SIZE_MAX`` from a CPU or CUDA buffer type).
UNLIMITED = 1 << 62
TIMEOUT_S = 3.0


class RpcProtocolError(DetectError):
    """The server did not answer as a ``ggml-rpc-server`` does (or not in time); the message says what."""


@dataclass(frozen=True)
class RemoteBuffer:
    """One remote device's buffer type: alignment and largest buffer (0 = unlimited), and its memory."""

    index: int
    alignment: int
    max_size: int
    free: int
    total: int


@dataclass(frozen=True)
class ServerLimits:
    version: tuple[int, int, int]
    devices: tuple[RemoteBuffer, ...]


class _Conn:
    def __init__(self, sock: socket.socket, what: str, deadline: float) -> None:
        self.sock = sock
        self.what = what
        self.deadline = deadline

    def _left(self) -> float:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise RpcProtocolError(f"{self.what} did not answer in time (busy serving another llama.cpp?)")
        return left

    def _recv(self, n: int) -> bytes:
        out = bytearray()
        while len(out) < n:
            self.sock.settimeout(self._left())
            try:
                chunk = self.sock.recv(n - len(out))
            except TimeoutError:
                raise RpcProtocolError(
                    f"{self.what} did not answer in time (busy serving another llama.cpp?)"
                ) from None
            if not chunk:
                raise RpcProtocolError(f"{self.what} closed the connection (not a ggml-rpc-server of this protocol?)")
            out += chunk
        return bytes(out)

    def call(self, cmd: int, payload: bytes, expect: int) -> bytes:
        self.sock.settimeout(self._left())
        self.sock.sendall(struct.pack("<BQ", cmd, len(payload)) + payload)
        (size,) = struct.unpack("<Q", self._recv(8))
        if size != expect:
            raise RpcProtocolError(
                f"{self.what} answered command {cmd} with {size} bytes, not {expect} "
                "(a ggml-rpc-server of another protocol version?)"
            )
        return self._recv(size)


def query_limits(host: str, port: int, timeout: float = TIMEOUT_S) -> ServerLimits:
    """The version and every device's buffer limits of the ``ggml-rpc-server`` at ``host:port``.

    Raises :class:`RpcProtocolError` (or ``OSError`` for a refused connection) with what went wrong."""
    what = f"the RPC server {host}:{port}"
    deadline = time.monotonic() + timeout
    try:  # over IPv4, resolved first, as the llama.cpp client connects (gethostbyname, AF_INET)
        infos = socket.getaddrinfo(host, port, socket.AF_INET, socket.SOCK_STREAM)
    except (OSError, UnicodeError, ValueError) as exc:
        raise RpcProtocolError(f"{what}: cannot resolve {host!r} to an IPv4 address ({exc})") from None
    if not infos:
        raise RpcProtocolError(f"{what}: {host!r} has no IPv4 address")
    with socket.create_connection((str(infos[0][4][0]), port), timeout=timeout) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        c = _Conn(sock, what, deadline)
        major, minor, patch, _ = struct.unpack_from("<4B", c.call(CMD_HELLO, bytes(CONN_CAPS_SIZE), 4 + CONN_CAPS_SIZE))
        if major != PROTOCOL_MAJOR:
            raise RpcProtocolError(
                f"{what} speaks RPC protocol {major}.{minor}.{patch}; this llama.cpp speaks {PROTOCOL_MAJOR}.x "
                "(llama.cpp refuses a server of another major version): run the same llama.cpp version on both"
            )
        (n,) = struct.unpack("<I", c.call(CMD_DEVICE_COUNT, b"", 4))
        if not 0 < n <= MAX_DEVICES:
            raise RpcProtocolError(f"{what} reports {n} devices")
        devices = []
        for i in range(n):
            idx = struct.pack("<I", i)
            (align,) = struct.unpack("<Q", c.call(CMD_GET_ALIGNMENT, idx, 8))
            (max_size,) = struct.unpack("<Q", c.call(CMD_GET_MAX_SIZE, idx, 8))
            free, total = struct.unpack("<QQ", c.call(CMD_GET_DEVICE_MEMORY, idx, 16))
            if align == 0 or align & (align - 1) or align > 1 << 20:
                raise RpcProtocolError(f"{what} reports an alignment of {align} for device {i}")
            devices.append(RemoteBuffer(i, align, 0 if max_size >= UNLIMITED else max_size, free, total))
    return ServerLimits((major, minor, patch), tuple(devices))
