"""Canonical host forms for web rules: one spelling per IP address, and what a name resolves to.

An IP address has many spellings the resolver accepts (`127.1`, `2130706433`, `0x7f.1`,
`0177.0.0.1`, `[::ffff:127.0.0.1]`); rules and `web_fetch.denied_hosts` compare the one form
`canonical_host` gives, so no spelling slips past a rule written with another. Names are
lower-cased without a trailing dot; `resolve` adds the addresses a name stands for, so a name
that points at a denied address is denied too.
"""

from __future__ import annotations

import fnmatch
import ipaddress
import socket
import threading


def canonical_ip(text: str) -> str | None:
    """The address in its usual form (`127.0.0.1`, `::1`), or None when `text` is no IP
    literal. IPv4 is read the way the C resolver reads it (inet_aton: short, decimal, hex and
    octal parts), and an IPv4-mapped IPv6 address is its IPv4 address."""
    t = text.strip().lower()
    if t.startswith("[") and t.endswith("]"):
        t = t[1:-1]
    t = t.split("%", 1)[0]  # an IPv6 zone id names the interface, not another address
    if not t:
        return None
    if ":" in t:
        try:
            v6 = ipaddress.IPv6Address(t)
        except ValueError:
            return None
        mapped = v6.ipv4_mapped
        return str(mapped) if mapped is not None else str(v6)
    if not all(c in "0123456789abcdefx." for c in t) or (t.endswith(".") and t.count(".") > 3):
        return None
    try:
        return socket.inet_ntoa(socket.inet_aton(t.rstrip(".") if t.count(".") <= 3 else t))
    except OSError:
        return None


def canonical_host(host: str) -> str:
    """The host as rules see it: an IP literal in its usual form, else the lower-cased name
    without brackets or the trailing dot of a fully qualified name."""
    h = host.strip()
    if ip := canonical_ip(h):
        return ip
    return h.lower().rstrip(".")


class LookupTimeout(OSError):
    """The resolver did not answer in time: the host cannot be judged, so it is refused."""


def _getaddrinfo(name: str, timeout: float | None) -> list[tuple[object, ...]]:
    """getaddrinfo bounded by `timeout`: the C call cannot be cancelled, so it runs in a
    daemon thread that is left to finish on its own when it overruns."""
    if timeout is None:
        return list(socket.getaddrinfo(name, None, proto=socket.IPPROTO_TCP))

    box: list[list[tuple[object, ...]] | BaseException] = []

    def look() -> None:
        try:
            box.append([tuple(i) for i in socket.getaddrinfo(name, None, proto=socket.IPPROTO_TCP)])
        except (OSError, UnicodeError) as e:
            box.append(e)

    worker = threading.Thread(target=look, name="nanohermes-resolve", daemon=True)
    worker.start()
    worker.join(timeout)
    if not box:
        raise LookupTimeout(f"looking up {name} took longer than {timeout:g} s")
    got = box[0]
    if isinstance(got, BaseException):
        raise got
    return got


def resolve(host: str, timeout: float | None = None) -> tuple[str, ...]:
    """The canonical addresses `host` resolves to (itself for an IP literal); () when the
    lookup fails: the fetch then fails with the resolver's own error. A lookup that takes
    longer than `timeout` raises LookupTimeout (a host that cannot be judged is refused)."""
    if ip := canonical_ip(host):
        return (ip,)
    name = host.strip().strip("[]")
    if not name:
        return ()
    try:
        infos = _getaddrinfo(name, timeout)
    except LookupTimeout:
        raise
    except (OSError, UnicodeError):
        return ()
    out: list[str] = []
    for info in infos:
        ip = canonical_ip(str(info[4][0]))  # type: ignore[index]
        if ip and ip not in out:
            out.append(ip)
    return tuple(out)


def plain_name(pattern: str) -> bool:
    """A host pattern that is one DNS name (no wildcard, network or IP literal): the only kind
    whose addresses can be looked up."""
    p = pattern.strip()
    return bool(p) and not canonical_ip(p) and "/" not in p and not any(c in p for c in "*?[")


def host_matches(host: str, addresses: tuple[str, ...], pattern: str, *, by_address: bool) -> bool:
    """Does a host pattern (`example.com` with its subdomains, `*.example.com`, an IP in any
    spelling, a network such as `10.0.0.0/8`) name this host? With `by_address`, an address
    the name resolves to counts too (for denials: a name is no way around a denied address)."""

    pat = pattern.strip()
    if "/" in pat:
        try:
            net = ipaddress.ip_network(pat, strict=False)
        except ValueError:
            return False
        candidates = [host, *addresses] if by_address else [host]
        return any(_in_network(c, net) for c in candidates)
    canon = canonical_host(pat)
    if canonical_ip(pat):
        return canon == host or (by_address and canon in addresses)
    return fnmatch.fnmatchcase(host, canon) or host.endswith("." + canon)


def _in_network(ip: str, net: ipaddress.IPv4Network | ipaddress.IPv6Network) -> bool:
    try:
        return ipaddress.ip_address(ip) in net
    except ValueError:
        return False
