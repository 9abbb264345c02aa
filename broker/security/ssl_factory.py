"""Kafka's SslFactory: the TLS context of a listener (server side) and of a broker connecting to
another broker's listener (client side), from the ssl.* settings in PEM form."""

from __future__ import annotations

import os
import ssl
import tempfile
from contextlib import suppress
from pathlib import Path

from broker.config import BrokerConfig, ConfigError

CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}


def _check_types(config: BrokerConfig, listener: str) -> None:
    for name in ("ssl.keystore.type", "ssl.truststore.type"):
        value = config.for_listener(listener, name).upper()
        if value != "PEM":
            raise ConfigError(f"listener {listener}: {name}={value} is not supported (PEM only)")


def _read(listener: str, name: str, location: str) -> str:
    try:
        return Path(location).read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"listener {listener}: {name}={location}: "
                          f"{getattr(exc, 'strerror', None) or exc}") from None


def _load_key_pair(context: ssl.SSLContext, config: BrokerConfig, listener: str, *,
                   required: bool) -> None:
    """The certificate chain and its private key: one PEM file (`ssl.keystore.location`) or the
    two inline PEM values (`ssl.keystore.certificate.chain` and `ssl.keystore.key`)."""
    location = config.for_listener(listener, "ssl.keystore.location")
    chain = config.for_listener(listener, "ssl.keystore.certificate.chain")
    key = config.for_listener(listener, "ssl.keystore.key")
    password = config.for_listener(listener, "ssl.key.password") or None
    if location:
        pem = _read(listener, "ssl.keystore.location", location)
    elif chain and key:
        pem = f"{key.strip()}\n{chain.strip()}\n"
    elif chain or key:
        raise ConfigError(f"listener {listener}: ssl.keystore.certificate.chain and ssl.keystore.key "
                          "go together")
    elif required:
        raise ConfigError(f"listener {listener} is {config.security_protocol(listener)}: set "
                          "ssl.keystore.location (a PEM file with key and certificate chain)")
    else:
        return
    # The ssl module loads a chain from files only: one private temporary file, removed at once.
    fd, path = tempfile.mkstemp(suffix=".pem")
    try:
        with os.fdopen(fd, "w") as out:
            out.write(pem)
        context.load_cert_chain(path, password=password)
    except ssl.SSLError as exc:
        what = location or "ssl.keystore.certificate.chain/ssl.keystore.key"
        raise ConfigError(f"listener {listener}: cannot load the key store {what}: "
                          f"{exc.reason or exc} (a PEM private key, then its certificate chain; "
                          "ssl.key.password if the key is encrypted)") from None
    finally:
        with suppress(OSError):
            os.unlink(path)


def _load_trust(context: ssl.SSLContext, config: BrokerConfig, listener: str) -> bool:
    location = config.for_listener(listener, "ssl.truststore.location")
    inline = config.for_listener(listener, "ssl.truststore.certificates")
    try:
        if location:
            context.load_verify_locations(cadata=_read(listener, "ssl.truststore.location", location))
        elif inline:
            context.load_verify_locations(cadata=inline)
        else:
            return False
    except ssl.SSLError as exc:
        raise ConfigError(f"listener {listener}: cannot load the trust store "
                          f"{location or 'ssl.truststore.certificates'}: {exc.reason or exc}") from None
    return True


class AlertingSSLObject(ssl.SSLObject):
    """A server-side TLS session whose failed handshake sends its alert before the connection
    closes. asyncio's and uvloop's TLS protocols close the socket on a handshake error without
    sending what OpenSSL wrote to the outgoing buffer (the alert): a client without the
    certificate `ssl.client.auth=required` asks for then sees the connection drop, and the Java
    client waits for a timeout instead of failing with SslAuthenticationException. So a refused
    client certificate is first reported as "want read": the protocol sends the outgoing bytes,
    the alert among them, and the next step of the handshake (the client's close on the alert,
    or anything it sends; at the latest the handshake timeout) raises the real error."""

    def do_handshake(self) -> None:
        failed = self.__dict__.get("failed")
        if failed is not None:
            raise failed
        try:
            super().do_handshake()
        except (ssl.SSLWantReadError, ssl.SSLWantWriteError):
            raise
        except ssl.SSLError as exc:
            if not _about_the_client_certificate(exc):
                raise  # garbage, a plaintext request: closed at once
            self.__dict__["failed"] = exc
            raise ssl.SSLWantReadError("handshake failed: its alert goes out first") from exc


# OpenSSL's reasons for refusing a client's certificate (or its absence): the failures a real
# TLS client gets an alert for, and closes its side on (other failures close at once)
_CLIENT_CERTIFICATE_REASONS = frozenset({"PEER_DID_NOT_RETURN_A_CERTIFICATE",
                                         "CERTIFICATE_VERIFY_FAILED"})


def _about_the_client_certificate(exc: ssl.SSLError) -> bool:
    return isinstance(exc, ssl.SSLCertVerificationError) or \
        getattr(exc, "reason", None) in _CLIENT_CERTIFICATE_REASONS


def server_context(config: BrokerConfig, listener: str) -> ssl.SSLContext:
    """The context an SSL or SASL_SSL listener serves with; ConfigError (one line) for settings
    that cannot work."""
    _check_types(config, listener)
    client_auth = config.for_listener(listener, "ssl.client.auth").strip().lower() or "none"
    if client_auth not in CLIENT_AUTH:
        raise ConfigError(f"listener {listener}: ssl.client.auth={client_auth} "
                          "(none, requested or required)")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    _load_key_pair(context, config, listener, required=True)
    has_trust = _load_trust(context, config, listener)
    if client_auth != "none" and not has_trust:
        raise ConfigError(f"listener {listener}: ssl.client.auth={client_auth} needs "
                          "ssl.truststore.location (the CAs client certificates are checked against)")
    context.verify_mode = CLIENT_AUTH[client_auth]
    context.sslobject_class = AlertingSSLObject
    return context


def client_context(config: BrokerConfig, listener: str) -> ssl.SSLContext:
    """The context a broker connects to another broker's `listener` with: it trusts the trust
    store's CAs (or the system's), presents its own certificate when it has one (for listeners
    with ssl.client.auth), and checks host names unless ssl.endpoint.identification.algorithm is
    empty."""
    _check_types(config, listener)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    if not _load_trust(context, config, listener):
        context.load_default_certs()
    _load_key_pair(context, config, listener, required=False)
    algorithm = config.for_listener(listener, "ssl.endpoint.identification.algorithm").strip()
    context.check_hostname = algorithm.lower() == "https"
    return context
