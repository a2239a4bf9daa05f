"""Fresh questions over the pooled corpus, written before the multi-hop work was tuned.

    python bench/recall_eval.py --pooled --fresh

The labelled pooled questions (bench/recall_pooled/) are the ones the ranking was tuned on;
these ask about the same twelve people in other words and, above all, through other bridges
(a pet, an employer, a relative's city; English and Chinese), so a change that only learnt
the pooled set's two multi-hop phrasings shows here. Same fields as the pooled questions;
each question's date is read from the corpus (the HISTORY.md entry holding its answer).
"""

from __future__ import annotations

import re
from pathlib import Path

from corpus import EN_DATED, EN_PEOPLE, ZH_DATED, ZH_PEOPLE


def _dated(memory: Path) -> dict[str, str]:
    """Each HISTORY.md entry's text -> its date."""
    found = {}
    for line in (memory / "HISTORY.md").read_text(encoding="utf-8").splitlines():
        match = re.match(r"\[(\d{4}-\d{2}-\d{2}) [\d:]+\] \([^)]*\) (.*)", line)
        if match:
            found[match.group(2)] = match.group(1)
    return found


def fresh_queries(memory: Path) -> list[dict]:
    dated = _dated(memory)
    out: list[dict] = []

    def ask(query: str, kind: str, lang: str, needle: str, person: str) -> None:
        out.append(
            {
                "query": query,
                "kind": kind if lang == "en" else "zh",
                "sub": kind,
                "lang": lang,
                "target_date": dated.get(needle),
                "needle": needle,
                "person": person,
            }
        )

    for i, (n, _s, employer, relative, city, blood, allergy, _pet, pet_name) in enumerate(
        EN_PEOPLE
    ):
        facts = {key: tmpl.format(n=n, x=xs[i], y=ys[i]) for key, tmpl, _q, xs, ys in EN_DATED}
        ask(f"Does {n} have any allergies?", "fact", "en", f"{n} is allergic to {allergy}.", n)
        ask(f"Who looks after {n}'s spare key?", "fact", "en", facts["password"], n)
        ask(f"Which dentist does {n} see?", "fact", "en", facts["dentist"], n)
        ask(f"Which network is {n}'s mobile on?", "fact", "en", facts["phone"], n)
        ask(
            f"What is the person who adopted {pet_name} allergic to?",
            "multihop",
            "en",
            f"{n} is allergic to {allergy}.",
            n,
        )
        ask(
            f"What blood type does the {employer} employee have?",
            "multihop",
            "en",
            f"{n}'s blood type is {blood}.",
            n,
        )
        ask(f"What car did the owner of {pet_name} buy?", "multihop", "en", facts["car"], n)
        ask(
            f"Which course did the person whose {relative} lives in {city} sign up for?",
            "multihop",
            "en",
            facts["course"],
            n,
        )
        ask(
            f"Which mobile provider does the {employer} employee use?",
            "multihop",
            "en",
            facts["phone"],
            n,
        )
    for i, (n, _s, employer, relative, city, _pet, pet_name) in enumerate(ZH_PEOPLE):
        facts = {key: tmpl.format(n=n, x=xs[i]) for key, tmpl, _q, xs in ZH_DATED}
        ask(f"{n}的{relative}在哪个城市？", "fact", "zh", f"{n}的{relative}住在{city}。", n)
        ask(
            f"养{pet_name}的人，{relative}住在哪里？",
            "multihop",
            "zh",
            f"{n}的{relative}住在{city}。",
            n,
        )
        ask(f"在{employer}上班的人最喜欢哪家餐厅？", "multihop", "zh", facts["restaurant"], n)
        ask(f"在{employer}上班的人买了什么车？", "multihop", "zh", facts["car"], n)
    for number, q in enumerate(out, 1):
        q["id"] = f"f{number:03d}"
    return out
