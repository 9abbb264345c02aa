"""Certificates and broker settings the TLS and SASL tests share: `kafka-sim certs` writes them once
per test session."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest

from broker.security.certs import write_certificates


@pytest.fixture(scope="session")
def certs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return write_certificates(tmp_path_factory.mktemp("certs"))


def tls_settings(certs: dict[str, Path], client_auth: str = "none") -> dict[str, str]:
    return {"ssl.keystore.location": str(certs["broker.pem"]),
            "ssl.truststore.location": str(certs["ca.pem"]), "ssl.client.auth": client_auth}


def client_ssl_context(certs: dict[str, Path], *, with_cert: bool = True) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(certs["ca.pem"]))
    if with_cert:
        context.load_cert_chain(str(certs["client-cert.pem"]), str(certs["client-key.pem"]))
    return context
