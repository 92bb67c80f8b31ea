"""Keeps a generated usage period valid (imported by hooks.py and admin_hooks.py).

`GET /client/v4/accounts/{account_id}/usage` and `GET /admin/v1/usage` take `since` and `until`, each an
RFC 3339 time or a date (YYYY-MM-DD), which the schema states; but `since` must come before `until` (by
default the start of this month, UTC, and now), and on the tenant API at most 31 days before it by the hour
and 400 days by the day or the month: rules between two values, and between a value and the clock, that the
schema cannot state. Generated times land anywhere from year 1 to 9999, so a schema-valid query would nearly
always be refused with 400. When every given value is well-formed and together they break a rule, each
given one is moved by whole days (its time of day, fraction and offset kept, so that it stays the form it
was generated in) to near a target that keeps the rules: `since` about 5 days ago, and `until` about a day
ago, or, when `since` is left to its default, about a day and a half after the start of this month. A value
that is not well-formed, or a granularity other than hour, day or month (the invalid cases), leaves the
query as generated, for the server to refuse.
"""

import re
from datetime import date, datetime, timedelta, timezone

# An RFC 3339 time, as the server reads it (chrono's parse_from_rfc3339), and a date (YYYY-MM-DD).
_TIME = re.compile(
    r"^(?P<year>\d{4})-(?P<month>\d{2})-(?P<day>\d{2})[Tt ](?P<hour>\d{2}):(?P<minute>\d{2}):(?P<second>\d{2})"
    r"(?:\.\d+)?(?:[Zz]|(?P<sign>[+-])(?P<off_hour>\d{2}):(?P<off_minute>\d{2}))$"
)
_DATE = re.compile(r"^(?P<year>\d{4})-(?P<month>\d{2})-(?P<day>\d{2})$")

# The tenant API's longest period, in days, by granularity (src/api/usage.rs).
TENANT_CAP_DAYS = {"hour": 31, "day": 400, "month": 400}
GRANULARITIES = ("hour", "day", "month")


def _read(value):
    """(local date and time, offset) of a well-formed time or date; None otherwise."""
    if not isinstance(value, str):
        return None
    match = _TIME.match(value)
    if match:
        part = {k: int(v) for k, v in match.groupdict().items() if v is not None and k != "sign"}
        try:
            local = datetime(part["year"], part["month"], part["day"], part["hour"], part["minute"], part["second"])
        except ValueError:
            return None  # February 30th, a leap second: not a time the server reads either
        offset = timedelta(hours=part.get("off_hour", 0), minutes=part.get("off_minute", 0))
        if offset >= timedelta(days=1):
            return None
        return local, (-offset if match.group("sign") == "-" else offset)
    match = _DATE.match(value)
    if match:
        try:
            day = date(int(match["year"]), int(match["month"]), int(match["day"]))
        except ValueError:
            return None
        return datetime(day.year, day.month, day.day), timedelta(0)
    return None


def _moved(value: str, local: datetime, offset: timedelta, target: datetime) -> str:
    """`value` moved by whole days to within half a day of `target` (naive UTC)."""
    # The instant is local - offset; how far it is from the target, in days, rounded.
    days = round(((target - local) + offset) / timedelta(days=1))
    moved = (local + timedelta(days=days)).date().isoformat()
    return moved + value[10:]


def keep_usage_period_valid(query, cap_days=None, now=None):
    """Moves a well-formed `since` and `until` of `query` that break the rules (see the docstring);
    `cap_days`: the longest period by granularity (the tenant API), or None (the operator's export)."""
    if not isinstance(query, dict):
        return
    granularity = query.get("granularity", "day")
    if granularity not in GRANULARITIES:
        return
    given = {key: _read(query[key]) for key in ("since", "until") if key in query}
    if any(read is None for read in given.values()):
        return
    now = (now or datetime.now(timezone.utc)).replace(tzinfo=None)
    month_start = datetime(now.year, now.month, 1)

    def instant(key, default):
        if key not in given:
            return default
        local, offset = given[key]
        try:
            return local - offset
        except OverflowError:
            return None

    since, until = instant("since", month_start), instant("until", now)
    longest = timedelta(days=cap_days[granularity]) if cap_days else None
    if since is not None and until is not None and since < until and (longest is None or until - since <= longest):
        return
    targets = {
        "since": now - timedelta(days=5),
        "until": now - timedelta(days=1) if "since" in given else month_start + timedelta(days=1, hours=12),
    }
    for key, (local, offset) in given.items():
        query[key] = _moved(query[key], local, offset, targets[key])
