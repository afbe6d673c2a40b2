"""The names a node certificate is issued for (`cellab tls --host`): an IP address or a DNS name of ASCII labels
(letters, digits, '-'), as the certificate library takes them; anything else is refused naming the option and,
for a name in another script, its ASCII (IDNA) form, rather than a traceback from the library (issue 42)."""

from __future__ import annotations

import ipaddress
import re

from cellab.errors import InputError

_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_DNS_NAME = re.compile(rf"^(?=.{{1,253}}$){_LABEL}(?:\.{_LABEL})*\.?$")
ALLOWED = ["an IP address", "a DNS name of letters, digits, '-' and '.' (labels of 1..63, up to 253 in all)"]


def check_cert_host(host: str, source: str = "cellab tls", option: str = "--host") -> str:
    try:
        ipaddress.ip_address(host)
        return host
    except ValueError:
        pass
    if _DNS_NAME.fullmatch(host):
        return host
    hint = ""
    if host and not host.isascii():
        try:
            hint = f"; its ASCII form is {host.encode('idna').decode()!r}"
        except UnicodeError:
            hint = "; it has no ASCII (IDNA) form"
    raise InputError(source, option, f"{host!r} is not a host name a certificate can name{hint}", ALLOWED)
