"""The Kafka wire protocol, sans-I/O: frames, headers and bodies, bytes in, Containers out, and back."""

from protocol.api import (
    API_NAMES,
    ProtocolEncodeError,
    api_name,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    is_flexible,
    precompile,
    request_header_version,
    response_header_version,
    valid_versions,
)
from protocol.errors import ErrorCode, KafkaError, ProtocolDecodeError
from protocol.framing import FrameDecoder, FrameTooLarge, InvalidFrame, encode_frame
from protocol.headers import (
    RequestHeader,
    decode_request_header,
    decode_response_header,
    encode_request_header,
    encode_response_header,
)

__all__ = [
    "API_NAMES",
    "ErrorCode",
    "FrameDecoder",
    "FrameTooLarge",
    "InvalidFrame",
    "KafkaError",
    "ProtocolDecodeError",
    "ProtocolEncodeError",
    "RequestHeader",
    "api_name",
    "decode_request",
    "decode_request_header",
    "decode_response",
    "decode_response_header",
    "encode_frame",
    "encode_request",
    "encode_request_header",
    "encode_response",
    "encode_response_header",
    "is_flexible",
    "precompile",
    "request_header_version",
    "response_header_version",
    "valid_versions",
]
