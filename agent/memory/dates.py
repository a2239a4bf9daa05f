"""Dates named in a question, English or Chinese, as ranges of calendar days.

    find_dates("what did James do on March 16?", today)   -> [March 16 (the last one)]
    find_dates("上周王芳做了什么菜", today)                  -> [Monday..Sunday of last week]

Explicit dates ("2026-03-16", "March 16", "16 March 2026", "3月16日", "2025年10月"), months
("in October 2023", "in October", "去年十月"), years ("in 2025", "去年") and relative days
("yesterday", "3 days ago", "last Monday", "昨天", "前天", "三天前"), weeks ("last week",
"this week", "上周", "本周") and months ("last month", "上个月"). "today" is the owner's
local date (agent.timezone), which the caller passes in. A day or month given without a
year is its latest occurrence not after today: asked in January, "in October" is last
October. Weeks run Monday to Sunday.

Month names that are also words ("may", "march") count only next to a day, a year or a
preposition ("in May", "May 3"), so "may I ask" names no date.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, timedelta

MONTHS = {
    name: number
    for number, names in enumerate(
        (
            "january jan",
            "february feb",
            "march mar",
            "april apr",
            "may",
            "june jun",
            "july jul",
            "august aug",
            "september sep sept",
            "october oct",
            "november nov",
            "december dec",
        ),
        1,
    )
    for name in names.split()
}
WEEKDAYS = {
    name: number
    for number, names in enumerate(
        (
            "monday mon",
            "tuesday tue tues",
            "wednesday wed",
            "thursday thu thur thurs",
            "friday fri",
            "saturday sat",
            "sunday sun",
        ),
    )
    for name in names.split()
}
_ZH_DIGITS = {
    "〇": 0,
    "零": 0,
    "一": 1,
    "二": 2,
    "两": 2,
    "三": 3,
    "四": 4,
    "五": 5,
    "六": 6,
    "七": 7,
    "八": 8,
    "九": 9,
}
_ZH_NUMBER = "[0-9〇零一二两三四五六七八九十]{1,3}"
_MONTH_NAME = "|".join(sorted(MONTHS, key=len, reverse=True))
_WEEKDAY_NAME = "|".join(sorted(WEEKDAYS, key=len, reverse=True))
_DAY = r"(?P<day>[0-3]?\d)(?:st|nd|rd|th)?"
_YEAR = r"(?P<year>(?:19|20)\d\d)"

_PATTERNS: list[tuple[str, re.Pattern[str]]] = [
    ("iso", re.compile(r"\b(?P<year>\d{4})-(?P<month>\d{1,2})-(?P<day>\d{1,2})\b")),
    (
        "month_day",
        re.compile(rf"\b(?P<mname>{_MONTH_NAME})\.?\s+{_DAY}\b(?:,?\s+{_YEAR}\b)?", re.I),
    ),
    (
        "day_month",
        re.compile(rf"\b{_DAY}\s+(?:of\s+)?(?P<mname>{_MONTH_NAME})\b\.?(?:,?\s+{_YEAR}\b)?", re.I),
    ),
    ("month_year", re.compile(rf"\b(?P<mname>{_MONTH_NAME})\.?,?\s+{_YEAR}\b", re.I)),
    (
        "month",
        re.compile(
            rf"\b(?:in|during|of|since|until|from|through|last|this)\s+(?P<mname>{_MONTH_NAME})\b",
            re.I,
        ),
    ),
    ("year", re.compile(rf"\b(?:in|during|of|since|until|from)\s+{_YEAR}\b", re.I)),
    (
        "ago",
        re.compile(
            r"\b(?P<n>\d{1,3}|a|an|one|two|three|four|five|six|seven|eight|nine|ten)\s+"
            r"(?P<unit>day|week|month|year)s?\s+ago\b",
            re.I,
        ),
    ),
    ("weekday", re.compile(rf"\b(?:(?P<last>last)\s+|on\s+)(?P<wname>{_WEEKDAY_NAME})\b", re.I)),
    (
        "relative",
        re.compile(
            r"\b(?P<rel>the day before yesterday|yesterday|today|tonight|this morning|"
            r"(?:last|this|past|previous) (?:week|month|year))\b",
            re.I,
        ),
    ),
    (
        "zh_ymd",
        re.compile(
            rf"(?:(?P<zyear>\d{{4}}|去|今|前)年)?(?P<zmonth>{_ZH_NUMBER})月份?(?:(?P<zday>{_ZH_NUMBER})[日号])?"
        ),
    ),
    ("zh_year", re.compile(r"(?P<zyear>\d{4}|去|今|前)年")),
    ("zh_ago", re.compile(rf"(?P<zn>{_ZH_NUMBER})(?P<zunit>天|周|个星期|个月)前")),
    (
        "zh_relative",
        re.compile(
            r"(?P<zrel>大前天|前天|昨天|昨晚|今天|今晚|上上周|上周|上个星期|上星期|上个礼拜|本周|这周|"
            r"这个星期|上个月|上月|这个月|本月)"
        ),
    ),
]
_WORD_NUMBERS = {
    "a": 1,
    "an": 1,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
}


@dataclass(frozen=True)
class DateRange:
    """Calendar days from `start` to `end`, both included; `text` is what named them."""

    start: date
    end: date
    text: str = ""

    def __contains__(self, day: date) -> bool:
        return self.start <= day <= self.end


def zh_number(text: str) -> int | None:
    """ "3", "十", "十六", "二十一", "三十" -> the number (1-99); None if it is not one."""
    if text.isdigit():
        return int(text)
    if "十" in text:
        tens, _, ones = text.partition("十")
        high = _ZH_DIGITS.get(tens, -1) if tens else 1
        low = _ZH_DIGITS.get(ones, -1) if ones else 0
        return None if high < 0 or low < 0 else high * 10 + low
    if len(text) == 1 and text in _ZH_DIGITS:
        return _ZH_DIGITS[text]
    return None


def _month_range(year: int, month: int) -> tuple[date, date]:
    first = date(year, month, 1)
    following = date(year + month // 12, month % 12 + 1, 1)
    return first, following - timedelta(days=1)


def _latest(today: date, month: int, day: int | None) -> tuple[date, date] | None:
    """The month (or day) in the current year, or the year before if that is still ahead."""
    for year in (today.year, today.year - 1):
        try:
            start, end = _month_range(year, month) if day is None else (date(year, month, day),) * 2
        except ValueError:
            return None
        if start <= today:
            return start, end
    return None


def _week(today: date, weeks_back: int) -> tuple[date, date]:
    monday = today - timedelta(days=today.weekday() + 7 * weeks_back)
    return monday, monday + timedelta(days=6)


def _months_back(today: date, back: int) -> tuple[date, date]:
    index = today.year * 12 + today.month - 1 - back
    return _month_range(index // 12, index % 12 + 1)


def _zh_year(token: str | None, today: date) -> int | None:
    if token is None:
        return None
    return {"去": today.year - 1, "今": today.year, "前": today.year - 2}.get(token) or int(token)


def _resolve(kind: str, m: re.Match[str], today: date) -> tuple[date, date] | None:
    g = m.groupdict()
    if kind == "iso":
        try:
            exact = date(int(g["year"]), int(g["month"]), int(g["day"]))
        except ValueError:
            return None
        return exact, exact
    if kind in ("month_day", "day_month", "month_year", "month"):
        month = MONTHS[g["mname"].lower()]
        number = int(g["day"]) if g.get("day") else None
        if g.get("year"):
            try:
                if number is None:
                    return _month_range(int(g["year"]), month)
                return (date(int(g["year"]), month, number),) * 2
            except ValueError:
                return None
        return _latest(today, month, number)
    if kind == "year":
        year = int(g["year"])
        return date(year, 1, 1), date(year, 12, 31)
    if kind == "ago":
        n = _WORD_NUMBERS.get(g["n"].lower()) or int(g["n"])
        return _back(today, g["unit"].lower(), n)
    if kind == "weekday":
        target = WEEKDAYS[g["wname"].lower()]
        back = (today.weekday() - target) % 7 or 7
        if g.get("last") is None and today.weekday() == target:
            back = 0
        weekday = today - timedelta(days=back)
        return weekday, weekday
    if kind == "relative":
        return _relative(g["rel"].lower(), today)
    if kind == "zh_ymd":
        zh_month = zh_number(g["zmonth"])
        zh_day = zh_number(g["zday"]) if g.get("zday") else None
        if zh_month is None or not 1 <= zh_month <= 12:
            return None
        zh_year = _zh_year(g.get("zyear"), today)
        if zh_year is None:
            return _latest(today, zh_month, zh_day)
        try:
            if zh_day is None:
                return _month_range(zh_year, zh_month)
            return (date(zh_year, zh_month, zh_day),) * 2
        except ValueError:
            return None
    if kind == "zh_year":
        whole = _zh_year(g["zyear"], today)
        return (date(whole, 1, 1), date(whole, 12, 31)) if whole else None
    if kind == "zh_ago":
        count = zh_number(g["zn"])
        unit = {"天": "day", "周": "week", "个星期": "week", "个月": "month"}[g["zunit"]]
        return _back(today, unit, count) if count else None
    return _relative(g["zrel"], today)


def _back(today: date, unit: str, n: int) -> tuple[date, date]:
    if unit == "day":
        day = today - timedelta(days=n)
        return day, day
    if unit == "week":
        return _week(today, n)
    if unit == "month":
        return _months_back(today, n)
    return date(today.year - n, 1, 1), date(today.year - n, 12, 31)


_RELATIVE = {
    "today": 0,
    "tonight": 0,
    "this morning": 0,
    "yesterday": 1,
    "the day before yesterday": 2,
    "今天": 0,
    "今晚": 0,
    "昨天": 1,
    "昨晚": 1,
    "前天": 2,
    "大前天": 3,
}


def _relative(word: str, today: date) -> tuple[date, date]:
    if word in _RELATIVE:
        day = today - timedelta(days=_RELATIVE[word])
        return day, day
    if word in ("this week", "本周", "这周", "这个星期"):
        return _week(today, 0)
    if word in ("last week", "previous week", "上周", "上个星期", "上星期", "上个礼拜"):
        return _week(today, 1)
    if word == "上上周":
        return _week(today, 2)
    if word == "past week":
        return today - timedelta(days=7), today
    if word in ("this month", "这个月", "本月"):
        return _months_back(today, 0)
    if word in ("last month", "previous month", "上个月", "上月"):
        return _months_back(today, 1)
    if word == "past month":
        return today - timedelta(days=30), today
    if word == "this year":
        return date(today.year, 1, 1), date(today.year, 12, 31)
    if word == "past year":
        return today - timedelta(days=365), today
    return date(today.year - 1, 1, 1), date(today.year - 1, 12, 31)  # last/previous year


def find_dates(text: str, today: date) -> list[DateRange]:
    """Every date or period named in `text`, in order; overlapping mentions count once (the
    longest: "March 16, 2026" is one date, not a month and a year)."""
    found: list[tuple[int, int, DateRange]] = []
    for kind, pattern in _PATTERNS:
        for m in pattern.finditer(text):
            if any(m.start() < end and start < m.end() for start, end, _ in found):
                continue
            span = _resolve(kind, m, today)
            if span is not None and span[0] <= span[1]:
                found.append((m.start(), m.end(), DateRange(span[0], span[1], m.group(0))))
    return [r for _, _, r in sorted(found, key=lambda item: item[0])]


def query_range(text: str, today: date) -> DateRange | None:
    """The days a question asks about: the span of every date it names, or None."""
    found = find_dates(text, today)
    if not found:
        return None
    text_names = " ".join(r.text for r in found)
    return DateRange(min(r.start for r in found), max(r.end for r in found), text_names)


def strip_dates(text: str, today: date) -> str:
    """The text without its date phrases (they are not words to look for)."""
    for found in find_dates(text, today):
        text = text.replace(found.text, " ", 1)
    return text


def parse_bound(value: str, today: date, *, end: bool) -> date:
    """A since/until argument: an ISO date, or any phrase find_dates reads ("last week");
    a period gives its first day for `since` and its last for `until`."""
    value = value.strip()
    try:
        return date.fromisoformat(value)
    except ValueError:
        pass
    found = query_range(value, today)
    if found is None:
        raise ValueError(f"not a date: {value!r} (use YYYY-MM-DD)")
    return found.end if end else found.start
