"""The principal of a client certificate, as Kafka's DefaultKafkaPrincipalBuilder names it:
`User:` and the subject's distinguished name in RFC 2253 form, most specific part first
(`User:CN=alice,OU=eng,O=example,C=US`)."""

from __future__ import annotations

ANONYMOUS = "User:ANONYMOUS"
# The attribute keywords Java's X500Principal prints by name (RFC 2253); the ssl module's
# long names map to them.
KEYWORDS = {
    "commonName": "CN", "countryName": "C", "localityName": "L", "stateOrProvinceName": "ST",
    "organizationName": "O", "organizationalUnitName": "OU", "streetAddress": "STREET",
    "domainComponent": "DC", "userId": "UID",
}
_SPECIAL = ',+"\\<>;'


def _escape(value: str) -> str:
    out = "".join(f"\\{c}" if c in _SPECIAL else c for c in value)
    if out.startswith(("#", " ")):
        out = "\\" + out
    if out.endswith(" ") and not out.endswith("\\ "):
        out = out[:-1] + "\\ "
    return out


def distinguished_name(subject: tuple) -> str:
    """The ssl module's `getpeercert()['subject']` (RDNs in certificate order) in RFC 2253 form."""
    rdns = []
    for rdn in reversed(subject):
        rdns.append("+".join(f"{KEYWORDS.get(k, k)}={_escape(v)}" for k, v in rdn))
    return ",".join(rdns)


def ssl_principal(peercert: dict | None) -> str:
    """`User:<DN>` for a verified client certificate, ANONYMOUS without one."""
    if not peercert or not peercert.get("subject"):
        return ANONYMOUS
    return f"User:{distinguished_name(peercert['subject'])}"
