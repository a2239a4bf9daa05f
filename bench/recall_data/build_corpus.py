"""Write the recall-eval corpus and its labels from facts.py (deterministic; seed fixed).

    python bench/recall_data/build_corpus.py

Output: bench/recall_data/corpus/memory/ (MEMORY.md, HISTORY.md, daily logs from May to
mid-December 2026, laid out as clawgate writes them: each HISTORY.md entry is also copied
into its day's log) and bench/recall_data/queries.jsonl (one labelled query per line; its
`needle` is the start of the target text, which a hit must contain).

Around the ~74 facts is everyday filler on the same subjects (Lisbon, Rita, the cat, the
dentist, Tidewater billing, money, Chinese family chat) so that the right answer competes
with near misses, as in a real memory.
"""

from __future__ import annotations

import json
import random
import shutil
import sys
from datetime import date, timedelta
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from facts import FACTS, NOW  # noqa: E402

START = date(2026, 5, 1)
SESSION = "telegram:1001"

EN = {
    "items": [
        "eggs, bread and tomatoes",
        "rice, tofu and spinach",
        "coffee beans and oat milk",
        "cat litter and salmon",
        "apples, yoghurt and granola",
        "pasta, basil and parmesan",
    ],
    "place": ["Douro river", "Foz promenade", "Parque da Cidade", "Matosinhos beach"],
    "task": [
        "invoice export",
        "tax rounding bug",
        "migration scripts",
        "PDF templates",
        "retry queue",
        "customer import",
    ],
    "topic": [
        "her new flat in Lisbon",
        "the weekend plans",
        "mum's visit",
        "work stress",
        "the Lisbon weather",
        "old photos from Hangzhou",
    ],
    "cat": [
        "knocked a glass off the table",
        "slept on the laptop all afternoon",
        "caught a moth on the balcony",
        "refused her dinner, then ate it an hour later",
        "got her claws trimmed",
    ],
    "book": [
        "Piranesi",
        "The Overstory",
        "Designing Data-Intensive Applications",
        "A Gentleman in Moscow",
    ],
    "dish": ["mushroom risotto", "bacalhau a bras", "dumplings", "lentil soup", "tomato pasta"],
    "weather": ["heavy rain", "hot and humid", "windy and grey", "sunny but cold"],
    "bill": ["electricity", "water", "internet", "phone", "gas"],
    "who": ["Tomas", "Ines", "Marco", "Priya"],
    "component": [
        "the ledger service",
        "the billing API",
        "the invoice renderer",
        "the payments webhook",
    ],
    "work": [
        "quarterly planning",
        "the hiring pipeline",
        "the billing rewrite scope",
        "on-call pain points",
        "the Lisbon office move",
    ],
    "film": ["Perfect Days", "Past Lives", "a documentary about Lisbon trams", "Spirited Away"],
}
EN_LINES = [
    "Groceries at Continente: {items}.",
    "Went for a {n} km run along the {place}.",
    "Worked on the Tidewater billing {task}.",
    "Call with Rita about {topic}.",
    "Miso {cat}.",
    "Read {n} pages of {book}.",
    "Cooked {dish} for dinner.",
    "Weather: {weather}; stayed in most of the day.",
    "Paid the {bill} bill, {m} euros.",
    "Code review for {who} on {component}.",
    "Meeting with Priya about {work}.",
    "Watched {film}.",
    "Reminder: reply to the dentist's email about moving the appointment.",
    "Looked at train times between Porto and Lisbon.",
    "Cleaned the car and checked the tyre pressure.",
]
ZH = {
    "act": ["看书", "整理衣柜", "打扫卫生", "练吉他", "追剧"],
    "topic": ["爸爸的身体", "杭州的天气", "表妹考研", "过年的安排", "家里的装修"],
    "cat": ["一直在窗台晒太阳", "把花盆打翻了", "半夜跑酷", "今天特别黏人"],
    "items": ["牛奶、鸡蛋和青菜", "豆腐、米和酱油", "水果和酸奶", "猫砂和罐头"],
    "dish": ["番茄炒蛋", "酸辣土豆丝", "饺子", "清蒸鱼", "麻婆豆腐"],
    "work": ["计费系统的会议开了两个小时", "修了一个发票的bug", "写季度总结", "面试了一个候选人"],
}
ZH_LINES = [
    "今天下雨，在家{act}。",
    "和妈妈视频聊天，聊了{topic}。",
    "Miso{cat}。",
    "去超市买了{items}。",
    "晚饭做了{dish}。",
    "工作上{work}。",
]


def _fill(rng: random.Random, template: str, pool: dict[str, list[str]]) -> str:
    values = {key: rng.choice(options) for key, options in pool.items()}
    values.update(n=rng.randint(3, 40), m=rng.randint(20, 90))
    return template.format(**values)


def _filler(rng: random.Random) -> str:
    if rng.random() < 0.22:
        return _fill(rng, rng.choice(ZH_LINES), ZH)
    return _fill(rng, rng.choice(EN_LINES), EN)


def main() -> None:
    rng = random.Random(7)
    out = HERE / "corpus" / "memory"
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    now = date.fromisoformat(NOW)

    daily: dict[date, list[tuple[str, str]]] = {}  # day -> [(HH:MM, text)]
    history: list[tuple[date, str, str]] = []  # (day, HH:MM, text)
    memory_lines: list[str] = []

    day = START
    while day < now:
        if rng.random() < 0.7:
            for _ in range(rng.randint(2, 6)):
                stamp = f"{rng.randint(7, 22):02d}:{rng.choice(['05', '20', '35', '50'])}"
                daily.setdefault(day, []).append((stamp, _filler(rng)))
        if rng.random() < 0.35:
            text = f"Talked with Ann: {_filler(rng)} Also: {_filler(rng)}"
            history.append((day, f"{rng.randint(8, 22):02d}:{rng.choice(['10', '40'])}", text))
        day += timedelta(days=1)

    for _fid, where, when, text, _queries in FACTS:
        if where == "memory":
            memory_lines.append(f"- {text}")
            continue
        day = date.fromisoformat(when)
        stamp = f"{rng.randint(8, 22):02d}:{rng.choice(['00', '15', '30', '45'])}"
        if where == "daily":
            daily.setdefault(day, []).append((stamp, text))
        else:
            history.append((day, stamp, text))

    # MEMORY.md: the facts grouped loosely under headings, with some ordinary lines.
    memory = ["# Memory", "", "## About Ann", ""]
    memory += memory_lines[:5]
    memory += [
        "- Ann works remotely for Tidewater, a billing software company.",
        "",
        "## People and places",
        "",
    ]
    memory += memory_lines[5:]
    memory += [
        "- Best friend in Porto: Ines (also at Tidewater).",
        "- Rita's phone: ask before sharing it.",
        "",
        "## Preferences",
        "",
        "- Prefers short answers, metric units, 24-hour times.",
        "- Likes sci-fi and slow cinema; dislikes horror.",
    ]
    (out / "MEMORY.md").write_text("\n".join(memory) + "\n", encoding="utf-8")

    history.sort(key=lambda item: (item[0], item[1]))
    parts = []
    for day, stamp, text in history:
        parts.append(f"[{day.isoformat()} {stamp}] ({SESSION}) {text}\n\n")
        # As MemoryStore.append_history does: the entry is copied into the day's log.
        daily.setdefault(day, []).append((stamp, f"({SESSION}) {text}"))
    (out / "HISTORY.md").write_text("".join(parts), encoding="utf-8")

    for day, lines in sorted(daily.items()):
        rng.shuffle(lines)
        lines.sort(key=lambda item: item[0])
        body = "".join(f"- {stamp} {text}\n" for stamp, text in lines)
        (out / f"{day.isoformat()}.md").write_text(body, encoding="utf-8")

    with (HERE / "queries.jsonl").open("w", encoding="utf-8") as handle:
        number = 0
        for fid, _where, when, text, queries in FACTS:
            for kind, lang, query in queries:
                number += 1
                record = {
                    "id": f"q{number:03d}",
                    "query": query,
                    "kind": kind,
                    "lang": lang,
                    "target": fid,
                    "target_date": when,
                    "target_text": text,
                    "needle": text[:40],
                }
                handle.write(json.dumps(record, ensure_ascii=False) + "\n")
    print(f"{len(daily)} daily logs, {len(history)} history entries, {number} queries -> {out}")


if __name__ == "__main__":
    main()
