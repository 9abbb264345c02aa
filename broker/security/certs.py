"""`kafka-sim certs DIR`: a throwaway CA and, signed by it, a broker certificate (for 127.0.0.1 and
localhost) and a client certificate, in PEM — for tests and trying TLS out, never for production.

Files: ca.pem (the trust store of brokers and clients), broker.pem (the broker's key and chain:
its ssl.keystore.location), client.pem / client-cert.pem / client-key.pem (a client's key and
certificate, for mutual TLS; its principal is `User:CN=client,O=kafka-sim`)."""

from __future__ import annotations

import datetime
import ipaddress
from pathlib import Path

VALID_DAYS = 365


def _require_cryptography():
    try:
        import cryptography  # noqa: F401
    except ImportError:
        raise SystemExit("kafka-sim certs needs the cryptography package: "
                         "pip install 'kafka-sim[certs]' (or pip install cryptography)") from None


def write_certificates(directory: Path, *, client_cn: str = "client") -> dict[str, Path]:
    _require_cryptography()
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    directory.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.UTC)

    def name(cn: str) -> x509.Name:
        return x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "kafka-sim"),
                          x509.NameAttribute(NameOID.COMMON_NAME, cn)])

    def key_pem(key) -> bytes:
        return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                 serialization.NoEncryption())

    def cert_pem(cert) -> bytes:
        return cert.public_bytes(serialization.Encoding.PEM)

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (x509.CertificateBuilder().subject_name(name("kafka-sim test CA"))
          .issuer_name(name("kafka-sim test CA")).public_key(ca_key.public_key())
          .serial_number(x509.random_serial_number())
          .not_valid_before(now - datetime.timedelta(minutes=5))
          .not_valid_after(now + datetime.timedelta(days=VALID_DAYS))
          .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                       content_commitment=False, key_encipherment=False,
                                       data_encipherment=False, key_agreement=False,
                                       encipher_only=False, decipher_only=False), critical=True)
          .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()),
                         critical=False)
          .sign(ca_key, hashes.SHA256()))

    def issue(cn: str, usage, san: list | None = None):
        key = ec.generate_private_key(ec.SECP256R1())
        builder = (x509.CertificateBuilder().subject_name(name(cn)).issuer_name(ca.subject)
                   .public_key(key.public_key()).serial_number(x509.random_serial_number())
                   .not_valid_before(now - datetime.timedelta(minutes=5))
                   .not_valid_after(now + datetime.timedelta(days=VALID_DAYS))
                   .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
                   .add_extension(x509.ExtendedKeyUsage(usage), critical=False)
                   .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(
                       ca_key.public_key()), critical=False))
        if san:
            builder = builder.add_extension(x509.SubjectAlternativeName(san), critical=False)
        return key, builder.sign(ca_key, hashes.SHA256())

    # The broker's certificate also serves as a client one: brokers present it to each other.
    broker_key, broker_cert = issue(
        "localhost", [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH],
        [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
         x509.IPAddress(ipaddress.ip_address("::1"))])
    client_key, client_cert = issue(client_cn, [ExtendedKeyUsageOID.CLIENT_AUTH])
    files = {
        "ca.pem": cert_pem(ca),
        "broker.pem": key_pem(broker_key) + cert_pem(broker_cert) + cert_pem(ca),
        "client.pem": key_pem(client_key) + cert_pem(client_cert),
        "client-cert.pem": cert_pem(client_cert),
        "client-key.pem": key_pem(client_key),
    }
    out = {}
    for filename, data in files.items():
        path = directory / filename
        path.write_bytes(data)
        if filename.endswith(("key.pem", "broker.pem", "client.pem")):
            path.chmod(0o600)
        out[filename] = path
    return out
