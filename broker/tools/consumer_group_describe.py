"""ConsumerGroupDescribe and ShareGroupDescribe for `kafka-sim groups`: kafka-python has no
KIP-848 or KIP-932 requests, so the tool asks the group's coordinator itself (FindCoordinator,
then ConsumerGroupDescribe, else ShareGroupDescribe, over a plain socket) and gives the answer
the shape of kafka-python's describe_groups."""

from __future__ import annotations

import socket
import struct

from protocol import decode_response, encode_request
from protocol.api import response_header_version
from protocol.framing import encode_frame
from protocol.headers import decode_response_header, encode_request_header

FIND_COORDINATOR, CONSUMER_GROUP_DESCRIBE, SHARE_GROUP_DESCRIBE = 10, 69, 77
DESCRIBE_SHARE_GROUP_OFFSETS = 90
GROUP_ID_NOT_FOUND = 69
_SIZE = struct.Struct(">i")


def _request(address: tuple[str, int], api_key: int, version: int, body: dict,
             timeout_s: float, client_id: str):
    with socket.create_connection(address, timeout_s) as sock:
        header = encode_request_header(api_key, version, 1, client_id)
        sock.sendall(encode_frame(header + encode_request(api_key, version, body)))
        size = _SIZE.unpack(_read(sock, 4))[0]
        frame = _read(sock, size)
    _, offset = decode_response_header(frame, response_header_version(api_key, version))
    return decode_response(api_key, version, frame, offset)


def _read(sock: socket.socket, n: int) -> bytes:
    data = bytearray()
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("the broker closed the connection")
        data += chunk
    return bytes(data)


def _ask_coordinator(bootstrap: list[str], group_id: str, timeout_s: float, client_id: str,
                     ask) -> object | None:
    """`ask(address)` at the group's coordinator (found through the first server that
    answers); None when none could be asked."""
    for server in bootstrap:
        host, _, port = server.strip().rpartition(":")
        try:
            found = _request((host.strip("[]"), int(port)), FIND_COORDINATOR, 3,
                             {"key": group_id, "key_type": 0}, timeout_s, client_id)
            if found.error_code != 0:
                return None
            return ask((found.host, found.port))
        except (OSError, ValueError):
            continue
    return None


def describe_consumer_groups(bootstrap: list[str], group_ids: list[str], timeout_s: float,
                             client_id: str) -> dict[str, dict]:
    """The KIP-848 and share groups among `group_ids`, each as describe_groups gives a classic
    one (group_id, group_state, protocol_data: the assignor, members with their assignment,
    and `type`); other groups, or those whose coordinator cannot be asked, are left out."""
    out: dict[str, dict] = {}
    for group_id in group_ids:
        body = {"group_ids": [group_id], "include_authorized_operations": False}

        def ask(address: tuple[str, int], body: dict = body) -> tuple[str, object]:
            answer = _request(address, CONSUMER_GROUP_DESCRIBE, 0, body, timeout_s, client_id)
            if answer.groups[0].error_code != GROUP_ID_NOT_FOUND:
                return "consumer", answer
            return "share", _request(address, SHARE_GROUP_DESCRIBE, 1, body, timeout_s,
                                     client_id)

        asked = _ask_coordinator(bootstrap, group_id, timeout_s, client_id, ask)
        if asked is None:
            continue
        kind, answer = asked
        (group,) = answer.groups
        if group.error_code != 0:
            continue
        out[group_id] = {
            "group_id": group_id, "group_state": group.group_state, "type": kind,
            "protocol_data": group.assignor_name, "members": [{
                "member_id": m.member_id, "client_host": m.client_host, "client_id": m.client_id,
                "member_assignment": {"assigned_partitions": [
                    {"topic": tp.topic_name, "partitions": list(tp.partitions)}
                    for tp in m.assignment.topic_partitions]}}
                for m in group.members]}
    return out


def share_group_start_offsets(bootstrap: list[str], group_id: str, timeout_s: float,
                              client_id: str) -> dict[tuple[str, int], int]:
    """A share group's start offset per partition (DescribeShareGroupOffsets; -1: not read
    yet); empty when the coordinator cannot be asked."""
    answer = _ask_coordinator(bootstrap, group_id, timeout_s, client_id, lambda address: _request(
        address, DESCRIBE_SHARE_GROUP_OFFSETS, 0,
        {"groups": [{"group_id": group_id, "topics": None}]}, timeout_s, client_id))
    if answer is None or answer.groups[0].error_code != 0:
        return {}
    return {(t.topic_name, p.partition_index): p.start_offset
            for t in answer.groups[0].topics for p in t.partitions if p.error_code == 0}
