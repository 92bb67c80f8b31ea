"""Keeps a generated token's validity window and address condition valid (imported by hooks.py and
admin_hooks.py).

A token's `expires_on` must lie in the future, and its `not_before` before its `expires_on`: rules
between a value and the clock, or between two values, that the schema cannot state (it says only
"RFC 3339 date-time"). Generated times land anywhere from year 1 to 9999, so a schema-valid body would
often be refused with 400. A well-formed time that breaks a rule is moved by whole 400-year cycles (the
calendar repeats every 400 years, so the date stays valid and keeps its month, day, time, fraction and
offset): `expires_on` into the years 2100-2499, `not_before` into 1600-1999. A time that is not
well-formed (the invalid cases) is left as generated. Likewise a generated string in
`condition.request_ip.in`/`not_in` must be a network or an address, which the schema does not state: a
string that is not becomes 198.51.100.0/24.
"""

import ipaddress

import re
from datetime import datetime, timedelta, timezone

# RFC 3339 date-time, as the server reads it (chrono's parse_from_rfc3339).
_RFC3339 = re.compile(
    r"^(?P<year>\d{4})-(?P<month>\d{2})-(?P<day>\d{2})[Tt ](?P<hour>\d{2}):(?P<minute>\d{2}):(?P<second>\d{2})"
    r"(?:\.\d+)?(?:[Zz]|(?P<sign>[+-])(?P<off_hour>\d{2}):(?P<off_minute>\d{2}))$"
)
# Times beyond these years are moved as well: the server shows times in UTC, and an offset can carry year
# 9999 past 9999 or year 1 back to year 0, which an RFC 3339 checker refuses in the answer.
_EARLIEST_YEAR, _LATEST_YEAR = 1000, 9000
_MARGIN = timedelta(days=1)


def _instant(value):
    """(year, UTC instant or None when out of datetime's range) of a well-formed time; None otherwise."""
    match = _RFC3339.match(value) if isinstance(value, str) else None
    if match is None:
        return None
    part = {k: int(v) for k, v in match.groupdict().items() if v is not None and k != "sign"}
    try:
        local = datetime(part["year"], part["month"], part["day"], part["hour"], part["minute"], part["second"])
    except ValueError:
        return None  # e.g. February 30th, or a leap second: not a time the server reads either
    offset = timedelta(hours=part.get("off_hour", 0), minutes=part.get("off_minute", 0))
    if offset >= timedelta(days=1):
        return None
    if match.group("sign") == "-":
        offset = -offset
    try:
        utc = (local - offset).replace(tzinfo=timezone.utc)
    except OverflowError:
        utc = None
    return part["year"], utc


def _moved(value, year, first_year):
    """`value` with its year moved by whole 400-year cycles into first_year..first_year+399."""
    return f"{first_year + (year - first_year) % 400:04d}{value[4:]}"


def _in_range(year, utc):
    return utc is not None and _EARLIEST_YEAR <= year < _LATEST_YEAR


def keep_token_window_valid(body):
    """Moves a well-formed `expires_on` into the future and a well-formed `not_before` before it."""
    if not isinstance(body, dict):
        return
    now = datetime.now(timezone.utc)
    expires = _instant(body.get("expires_on"))
    if expires is not None:
        year, utc = expires
        if not (_in_range(year, utc) and utc > now + _MARGIN):
            body["expires_on"] = _moved(body["expires_on"], year, 2100)
            expires = _instant(body["expires_on"])
    start = _instant(body.get("not_before"))
    if start is not None:
        year, utc = start
        too_late = expires is not None and utc is not None and utc >= expires[1] - _MARGIN
        if not _in_range(year, utc) or too_late:
            body["not_before"] = _moved(body["not_before"], year, 1600)


def _network(text):
    if not isinstance(text, str):
        return text
    # Python reads netmasks (/255.0.0.0) and IPv6 zones (%eth0) too; the server reads neither.
    prefix = text.split("/", 1)[1] if "/" in text else "0"
    if "%" in text or not (prefix.isascii() and prefix.isdigit()):
        return "198.51.100.0/24"
    try:
        ipaddress.ip_network(text, strict=False)
        return text
    except ValueError:
        pass
    try:
        ipaddress.ip_address(text)
        return text
    except ValueError:
        return "198.51.100.0/24"


def keep_token_condition_valid(body):
    """Makes each generated entry of a token's `condition.request_ip` lists a network or an address."""
    condition = body.get("condition") if isinstance(body, dict) else None
    request_ip = condition.get("request_ip") if isinstance(condition, dict) else None
    if not isinstance(request_ip, dict):
        return
    for side in ("in", "not_in"):
        if isinstance(request_ip.get(side), list):
            request_ip[side] = [_network(n) for n in request_ip[side]]
