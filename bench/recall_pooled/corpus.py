"""The pooled recall eval: twelve people's histories over one year in one workspace.

    python bench/recall_pooled/corpus.py OUT_DIR     # writes OUT_DIR/memory/ and queries.jsonl

Deterministic (seeded); written before any ranking parameter of issue 17 was tuned, and the
only data that tuning looked at. Ten people write in English, two in Chinese; each has
undated facts in MEMORY.md, dated facts and recurring events (hikes, dinners, concerts,
purchases) in HISTORY.md entries copied into the day's log as clawgate writes them, and
everyday chatter on the same subjects, so an answer competes with near misses of every age.

Query kinds: "fact" (one fact, by name), "multihop" (the person is named only through
another fact of theirs), "temporal" (a date in the question, explicit or relative to NOW),
"paraphrase" (shares no content word with its answer but the person's name) and "zh" (a
Chinese question; its kind is kept in `sub`). A hit is a result whose lines contain the
needle (the full fact sentence).
"""

from __future__ import annotations

import json
import random
import sys
from datetime import date, timedelta
from pathlib import Path

NOW = date(2027, 1, 20)
START = NOW - timedelta(days=365)
SEED = 17
MONTHS = (
    "January February March April May June July August September October November December".split()
)
ZH_MONTHS = "一 二 三 四 五 六 七 八 九 十 十一 十二".split()

EN_PEOPLE = [
    # name, session, employer, relative, city, blood, allergy, pet kind, pet name
    (
        "Maya",
        1001,
        "Lumen Labs",
        "brother",
        "Glasgow",
        "A positive",
        "penicillin",
        "beagle",
        "Pepper",
    ),
    (
        "Tom",
        1002,
        "Harbor Freight Lines",
        "sister",
        "Valencia",
        "B negative",
        "shellfish",
        "tabby cat",
        "Biscuit",
    ),
    ("Priya", 1003, "Northwind Clinic", "cousin", "Leeds", "O positive", "latex", "parrot", "Kiwi"),
    (
        "Jonas",
        1004,
        "Copperleaf Studio",
        "aunt",
        "Hamburg",
        "AB positive",
        "wasp stings",
        "greyhound",
        "Blitz",
    ),
    (
        "Elena",
        1005,
        "Vela Robotics",
        "father",
        "Seville",
        "A negative",
        "peanuts",
        "rabbit",
        "Nube",
    ),
    (
        "Sam",
        1006,
        "Oakridge School",
        "mother",
        "Cork",
        "O negative",
        "pollen",
        "labrador",
        "Toffee",
    ),
    (
        "Nadia",
        1007,
        "Brightwater Bank",
        "uncle",
        "Marseille",
        "B positive",
        "sesame",
        "hamster",
        "Pip",
    ),
    (
        "Kofi",
        1008,
        "Sunline Solar",
        "grandmother",
        "Kumasi",
        "AB negative",
        "dust mites",
        "tortoise",
        "Sheldon",
    ),
    (
        "Lucia",
        1009,
        "Atlas Insurance",
        "niece",
        "Turin",
        "A positive",
        "ibuprofen",
        "ferret",
        "Zorro",
    ),
    (
        "Ravi",
        1010,
        "Quillpoint Press",
        "nephew",
        "Pune",
        "O positive",
        "kiwi fruit",
        "goldfish",
        "Bubbles",
    ),
]
EN_DATED = [
    (
        "dentist",
        "{n} switched dentists: now Dr {x} at the {y} practice.",
        "Who is {n}'s dentist now?",
        [
            "Okafor",
            "Lindqvist",
            "Moreau",
            "Patel",
            "Brennan",
            "Sato",
            "Ferreira",
            "Novak",
            "Quinn",
            "Abadi",
        ],
        [
            "Riverside",
            "Elm Street",
            "Old Town",
            "Harbour",
            "Central",
            "Westgate",
            "Parkview",
            "Mill Lane",
            "Kings Road",
            "Station",
        ],
    ),
    (
        "car",
        "{n} bought a used {x} in {y} colour for the commute.",
        "What car did {n} buy?",
        [
            "Skoda Octavia",
            "Toyota Yaris",
            "Mazda 3",
            "Volvo V60",
            "Honda Jazz",
            "Fiat Panda",
            "Kia Ceed",
            "Peugeot 208",
            "Ford Focus",
            "Seat Ibiza",
        ],
        [
            "dark green",
            "silver",
            "red",
            "navy",
            "white",
            "yellow",
            "grey",
            "black",
            "orange",
            "beige",
        ],
    ),
    (
        "course",
        "{n} signed up for a {x} course on {y} evenings.",
        "Which course did {n} sign up for?",
        [
            "pottery",
            "Italian",
            "salsa",
            "photography",
            "first aid",
            "woodworking",
            "Mandarin",
            "sailing",
            "bread baking",
            "watercolour",
        ],
        [
            "Monday",
            "Tuesday",
            "Wednesday",
            "Thursday",
            "Monday",
            "Tuesday",
            "Wednesday",
            "Thursday",
            "Friday",
            "Friday",
        ],
    ),
    (
        "restaurant",
        "{n}'s new favourite restaurant is {x}, a {y} place near the station.",
        "What is {n}'s favourite restaurant?",
        [
            "Casa Lupo",
            "Saffron Door",
            "Kaito",
            "El Faro",
            "Blue Lotus",
            "Nonna Rosa",
            "Tbilisi Table",
            "Mezze Yard",
            "Pho Real",
            "The Crooked Spoon",
        ],
        [
            "Tuscan",
            "Persian",
            "ramen",
            "seafood",
            "Thai",
            "Sicilian",
            "Georgian",
            "Lebanese",
            "Vietnamese",
            "gastropub",
        ],
    ),
    (
        "password",
        "{n} keeps the spare house key with the neighbour {x} at number {y}.",
        "Where is {n}'s spare key?",
        [
            "Mrs Albright",
            "Mr Okoye",
            "Greta",
            "Hamid",
            "Mrs Delaney",
            "Bruno",
            "Ines",
            "Mr Varga",
            "Chiara",
            "Mrs Nakamura",
        ],
        ["12", "7", "31", "4", "18", "22", "9", "40", "15", "3"],
    ),
    (
        "phone",
        "{n} changed mobile provider to {x} on a {y} plan.",
        "Which mobile provider is {n} with?",
        [
            "Vodafone",
            "Three",
            "Orange",
            "Lebara",
            "giffgaff",
            "O2",
            "Tesco Mobile",
            "Lycamobile",
            "EE",
            "Sky Mobile",
        ],
        [
            "20 GB",
            "unlimited",
            "pay as you go",
            "5 GB",
            "family",
            "student",
            "50 GB",
            "10 GB",
            "roaming",
            "SIM only",
        ],
    ),
]
EN_RECURRING = {
    "hike": (
        "{n} went hiking up {x} with a friend.",
        "Where did {n} go hiking {d}?",
        [
            "Ben Lomond",
            "Snowdon",
            "Pen y Fan",
            "Scafell Pike",
            "Helvellyn",
            "Mount Teide",
            "Monte Baldo",
            "Brocken",
            "Croagh Patrick",
            "Table Mountain",
            "Skiddaw",
            "Cadair Idris",
        ],
    ),
    "cook": (
        "{n} cooked {x} for dinner.",
        "What did {n} cook for dinner {d}?",
        [
            "lamb tagine",
            "mushroom risotto",
            "chicken katsu",
            "lentil dal",
            "paella",
            "beef stew",
            "shakshuka",
            "pad thai",
            "gnocchi",
            "fish pie",
            "ratatouille",
            "jollof rice",
        ],
    ),
    "concert": (
        "{n} went to a {x} concert downtown.",
        "Which concert did {n} go to {d}?",
        [
            "Radiohead",
            "Arctic Monkeys",
            "Coldplay",
            "Fontaines D.C.",
            "Florence and the Machine",
            "Khruangbin",
            "Bon Iver",
            "Massive Attack",
            "Wet Leg",
            "Nils Frahm",
            "Little Simz",
            "Burna Boy",
        ],
    ),
    "buy": (
        "{n} bought {x} at the market.",
        "What did {n} buy {d}?",
        [
            "a cast-iron pan",
            "a reading lamp",
            "running shoes",
            "a wool scarf",
            "a houseplant",
            "a toaster",
            "a rain jacket",
            "a chess set",
            "noise-cancelling headphones",
            "a bike helmet",
            "a kettle",
            "a yoga mat",
        ],
    ),
}
PARAPHRASE = [
    (
        "{n} feels drawn to serving the country and is thinking of enlisting.",
        "Would {n} be considered a patriotic person?",
    ),
    ("{n} can't stand loud crowds and prefers quiet evenings alone.", "Is {n} an introvert?"),
    (
        "{n} started piano lessons with a teacher every Tuesday.",
        "Which musical instrument is {n} learning?",
    ),
    (
        "{n}'s doctor said the cholesterol numbers were far too high.",
        "Does {n} have any cardiac health worries?",
    ),
    ("{n} gave the car away and now cycles to the office daily.", "How does {n} commute to work?"),
    ("{n} quit smoking this spring after twenty years.", "Has {n} kicked the tobacco habit?"),
    ("{n} is expecting a baby girl in the autumn.", "Is {n} going to become a parent?"),
    ("{n} moved into a small flat by the harbour.", "Where does {n} reside these days?"),
    ("{n} lost the job when the branch closed down.", "Is {n} unemployed?"),
    ("{n} ran the city marathon in under four hours.", "How athletic is {n}?"),
    (
        "{n} is vegan and never eats cheese or eggs.",
        "What diet regarding animal products does {n} follow?",
    ),
    ("{n} married Alex in a small ceremony by the lake.", "Who is {n}'s spouse?"),
    ("{n} broke an ankle skiing in the Alps.", "Has {n} suffered any sports injury?"),
    ("{n} reads mystery novels in bed every night.", "What literary genre does {n} enjoy?"),
    ("{n} volunteers at the food bank on Saturdays.", "Does {n} do charity work?"),
    ("{n} is afraid of flying and takes trains everywhere.", "Is {n} nervous about air travel?"),
    ("{n} speaks fluent Portuguese after years in Recife.", "What languages does {n} know?"),
    ("{n} is saving money for a deposit on a house.", "Is {n} planning to purchase property?"),
    ("{n} was promoted to team lead at the studio.", "Did {n} advance professionally?"),
    ("{n} grows tomatoes and basil on the balcony.", "Does {n} enjoy gardening?"),
]
EN_FILLER = [
    "{n} had a long day at {e} and felt tired.",
    "{n} said the weather was grey and wet again.",
    "{n} watched a film and went to bed early.",
    "{n} mentioned wanting to go hiking again soon.",
    "{n} asked for a quick dinner idea.",
    "{n} listened to an album while cleaning the flat.",
    "{n} needs to call the dentist's office about a bill.",
    "{n} took the {p} to the vet for a check-up.",
    "{n} was stuck in traffic on the way home.",
    "{n} talked about a course a colleague took.",
    "{n} went to the market but bought nothing.",
    "{n} had lunch with a colleague from {e}.",
    "{n} complained about the phone bill.",
    "{n} planned the week ahead.",
    "{n} thought about visiting the {r} in {c}.",
    "{n} read the news and made tea.",
]

ZH_PEOPLE = [
    # name, session, employer, relative, city, pet, pet name
    ("李伟", 2001, "星辰科技", "姐姐", "成都", "柯基", "豆豆"),
    ("王芳", 2002, "蓝海书店", "舅舅", "青岛", "橘猫", "年糕"),
]
ZH_DATED = [
    (
        "dentist",
        "{n}换了牙医，现在去{x}诊所看病。",
        "{n}现在的牙医在哪家诊所？",
        ["仁和口腔", "美齿"],
    ),
    ("car", "{n}买了一辆二手{x}，用来上下班。", "{n}买了什么车？", ["比亚迪秦", "大众朗逸"]),
    ("course", "{n}报名了{x}课，每周四晚上上课。", "{n}报名了什么课？", ["陶艺", "书法"]),
    (
        "restaurant",
        "{n}最喜欢的餐厅是{x}，在火车站附近。",
        "{n}最喜欢哪家餐厅？",
        ["蜀香阁", "海鲜小馆"],
    ),
]
ZH_RECURRING = {
    "hike": (
        "{n}去{x}爬山了。",
        "{n}{d}去哪里爬山了？",
        ["青城山", "崂山", "峨眉山", "泰山", "黄山", "华山", "武夷山", "莫干山"],
    ),
    "cook": (
        "{n}晚饭做了{x}。",
        "{n}{d}晚饭做了什么？",
        ["红烧肉", "麻婆豆腐", "清蒸鱼", "西红柿炒蛋", "宫保鸡丁", "酸菜鱼", "糖醋排骨", "回锅肉"],
    ),
    "buy": (
        "{n}在商场买了{x}。",
        "{n}{d}买了什么？",
        [
            "一台空气净化器",
            "一双登山鞋",
            "一个电饭煲",
            "一件羽绒服",
            "一盏台灯",
            "一套茶具",
            "一个行李箱",
            "一把雨伞",
        ],
    ),
}
ZH_PARAPHRASE = [
    ("{n}最近开始学弹钢琴，每周二上课。", "{n}在练哪种乐器？"),
    ("{n}戒烟已经半年了。", "{n}还碰尼古丁吗？"),
    ("{n}下个月要搬到海边的新公寓。", "{n}准备换住处吗？"),
    ("{n}对坐飞机很害怕，出门都坐高铁。", "{n}恐惧航空旅行吗？"),
]
ZH_FILLER = [
    "{n}今天加班，很累。",
    "{n}说天气又冷又湿。",
    "{n}看了一部电影，早早睡了。",
    "{n}想周末再去爬山。",
    "{n}问晚饭吃什么好。",
    "{n}带{p}去宠物医院体检。",
    "{n}在{e}开了一下午的会。",
    "{n}想去{c}看{r}。",
    "{n}去商场逛了逛，什么也没买。",
]


def _when(day: date) -> str:
    return f"on {MONTHS[day.month - 1]} {day.day}"


def _zh_when(day: date) -> str:
    return f"{day.month}月{day.day}日"


def build(out: Path) -> list[dict]:
    rng = random.Random(SEED)
    memory_dir = out / "memory"
    memory_dir.mkdir(parents=True, exist_ok=True)
    days = [START + timedelta(days=i) for i in range(365)]
    history: list[tuple[date, str, int, str]] = []  # day, HH:MM, session, text
    memory_lines: list[str] = []
    queries: list[dict] = []

    def stamp() -> str:
        return f"{rng.randint(7, 22):02d}:{rng.choice(['05', '20', '35', '50'])}"

    def fact(day: date | None, session: int, text: str) -> str | None:
        if day is None:
            memory_lines.append(f"- {text}")
            return None
        history.append((day, stamp(), session, text))
        return day.isoformat()

    def ask(query: str, kind: str, lang: str, day: str | None, text: str, name: str) -> None:
        queries.append(
            {
                "query": query,
                "kind": kind if lang == "en" else "zh",
                "sub": kind,
                "lang": lang,
                "target_date": day,
                "needle": text,
                "person": name,
            }
        )

    def recurring(name, session, templates, values_by_kind, when, relative):
        for kind, (tmpl, question, values) in templates.items():
            picks = rng.sample(values, 6)
            dates = sorted(rng.sample(days[:-8], 6))
            events = list(zip(dates, picks, strict=True))
            for day, value in events:
                fact(day, session, tmpl.format(n=name, x=value))
            day, value = rng.choice(events)
            text = tmpl.format(n=name, x=value)
            ask(
                question.format(n=name, d=when(day)),
                "temporal",
                "en" if when is _when else "zh",
                day.isoformat(),
                text,
                name,
            )
            values_by_kind[kind] = (tmpl, question, [v for v in values if v not in picks])
        # One event at a date named relative to NOW: yesterday or last week.
        kind = rng.choice(sorted(values_by_kind))
        tmpl, question, spare = values_by_kind[kind]
        label, day = rng.choice(relative)
        text = tmpl.format(n=name, x=spare[0])
        fact(day, session, text)
        ask(
            question.format(n=name, d=label),
            "temporal",
            "en" if when is _when else "zh",
            day.isoformat(),
            text,
            name,
        )

    last_monday = NOW - timedelta(days=NOW.weekday() + 7)
    en_relative = [
        ("yesterday", NOW - timedelta(days=1)),
        ("last week", last_monday + timedelta(days=2)),
    ]
    zh_relative = [("昨天", NOW - timedelta(days=1)), ("上周", last_monday + timedelta(days=3))]
    paraphrases = list(PARAPHRASE)
    rng.shuffle(paraphrases)
    for i, (n, session, employer, relative, city, blood, allergy, pet, pet_name) in enumerate(
        EN_PEOPLE
    ):
        for text, q in (
            (f"{n}'s blood type is {blood}.", f"What is {n}'s blood type?"),
            (f"{n} is allergic to {allergy}.", f"What is {n} allergic to?"),
            (f"{n}'s {relative} lives in {city}.", f"Where does {n}'s {relative} live?"),
        ):
            fact(None, session, text)
            ask(q, "fact", "en", None, text, n)
        employer_text = f"{n} started a new job at {employer}."
        fact(rng.choice(days), session, employer_text)
        ask(f"Where does {n} work now?", "fact", "en", None, employer_text, n)
        queries[-1]["target_date"] = history[-1][0].isoformat()
        pet_text = f"{n} adopted a {pet} named {pet_name} from the shelter."
        fact(rng.choice(days), session, pet_text)
        ask(
            f"What kind of animal is {pet_name}?",
            "fact",
            "en",
            history[-1][0].isoformat(),
            pet_text,
            n,
        )
        for key, tmpl, question, xs, ys in EN_DATED:
            text = tmpl.format(n=n, x=xs[i], y=ys[i])
            day = fact(rng.choice(days), session, text)
            ask(question.format(n=n), "fact", "en", day, text, n)
            if key == "dentist":
                dentist_text, dentist_day = text, day
        # Multi-hop: the person is named only through their employer or their pet.
        ask(
            f"Who is the dentist of the person who works at {employer}?",
            "multihop",
            "en",
            dentist_day,
            dentist_text,
            n,
        )
        ask(
            f"Which city does the {relative} of {pet_name}'s owner live in?",
            "multihop",
            "en",
            None,
            f"{n}'s {relative} lives in {city}.",
            n,
        )
        for tmpl, q in paraphrases[2 * i : 2 * i + 2]:
            text = tmpl.format(n=n)
            day = fact(rng.choice(days), session, text)
            ask(q.format(n=n), "paraphrase", "en", day, text, n)
        recurring(n, session, EN_RECURRING, {}, _when, en_relative)
        # A month-level question: the month of one concert, named with its year.
        concerts = [(d, t) for d, _s, s, t in history if s == session and "concert" in t]
        months = {}
        for d, t in concerts:
            months.setdefault((d.year, d.month), []).append((d, t))
        single = [v[0] for v in months.values() if len(v) == 1]
        if single:
            d, t = rng.choice(single)
            ask(
                f"Which band did {n} see live in {MONTHS[d.month - 1]} {d.year}?",
                "temporal",
                "en",
                d.isoformat(),
                t,
                n,
            )
        for day in rng.sample(days, 60):
            line = rng.choice(EN_FILLER).format(n=n, e=employer, p=pet, r=relative, c=city)
            history.append((day, stamp(), session, line))

    for i, (n, session, employer, relative, city, pet, pet_name) in enumerate(ZH_PEOPLE):
        for text, q in (
            (f"{n}的{relative}住在{city}。", f"{n}的{relative}住在哪个城市？"),
            (f"{n}养了一只{pet}，叫{pet_name}。", f"{n}的宠物叫什么名字？"),
        ):
            fact(None, session, text)
            ask(q, "fact", "zh", None, text, n)
        text = f"{n}开始在{employer}上班了。"
        day = fact(rng.choice(days), session, text)
        ask(f"{n}现在在哪家公司工作？", "fact", "zh", day, text, n)
        for _key, tmpl, question, xs in ZH_DATED:
            text = tmpl.format(n=n, x=xs[i])
            day = fact(rng.choice(days), session, text)
            ask(question.format(n=n), "fact", "zh", day, text, n)
        for tmpl, q in ZH_PARAPHRASE[2 * i : 2 * i + 2]:
            text = tmpl.format(n=n)
            day = fact(rng.choice(days), session, text)
            ask(q.format(n=n), "paraphrase", "zh", day, text, n)
        recurring(n, session, ZH_RECURRING, {}, _zh_when, zh_relative)
        # 去年十月: one purchase in October of last year, and no other in that month.
        october = date(NOW.year - 1, 10, rng.randint(3, 27))
        purchases = [(d, t) for d, _s, s, t in history if s == session and "买了" in t]
        if not any(d.year == october.year and d.month == 10 for d, _t in purchases):
            text = f"{n}在网上买了一台咖啡机。" if i == 0 else f"{n}在网上买了一辆自行车。"
            fact(october, session, text)
            ask(f"{n}去年十月买了什么？", "temporal", "zh", october.isoformat(), text, n)
        for day in rng.sample(days, 60):
            line = rng.choice(ZH_FILLER).format(n=n, e=employer, p=pet, r=relative, c=city)
            history.append((day, stamp(), session, line))

    _write(memory_dir, memory_lines, history)
    for number, q in enumerate(queries, 1):
        q["id"] = f"p{number:03d}"
    return queries


def _write(memory_dir: Path, memory_lines: list[str], history: list) -> None:
    memory = [
        "# Memory",
        "",
        "## People",
        "",
        *memory_lines,
        "",
        "## Preferences",
        "",
        "- Short answers, metric units, 24-hour times.",
    ]
    (memory_dir / "MEMORY.md").write_text("\n".join(memory) + "\n", encoding="utf-8")
    history.sort(key=lambda item: (item[0], item[1], item[2]))
    daily: dict[date, list[str]] = {}
    parts = []
    for day, hhmm, session, text in history:
        parts.append(f"[{day.isoformat()} {hhmm}] (telegram:{session}) {text}\n\n")
        # As MemoryStore.append_history does: the entry is copied into the day's log.
        daily.setdefault(day, []).append(f"- {hhmm} (telegram:{session}) {text}\n")
    (memory_dir / "HISTORY.md").write_text("".join(parts), encoding="utf-8")
    for day, lines in daily.items():
        (memory_dir / f"{day.isoformat()}.md").write_text("".join(lines), encoding="utf-8")


if __name__ == "__main__":
    target = Path(sys.argv[1])
    found = build(target)
    with (target / "queries.jsonl").open("w", encoding="utf-8") as handle:
        for q in found:
            handle.write(json.dumps(q, ensure_ascii=False) + "\n")
    print(f"{len(found)} queries -> {target}")
