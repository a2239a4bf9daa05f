"""A large pooled workspace of multi-speaker dialogues logged day by day (issue 29).

    python bench/recall_dialogue/dialogues.py OUT_DIR [--seed N]   # OUT_DIR/memory/, queries.jsonl

Written before any ranking change of issue 29 and seeded, so every run sees the same data.
Two years of daily logs (memory/YYYY-MM-DD.md): each day a few conversations, each a
"## HH:MM chat (people)" section of lines "Name: what they said", in private chats with the
owner and in group chats, English and Chinese; MEMORY.md holds undated facts. Facts worth
asking about are said once, in passing, inside a conversation about other things, while
everyone keeps talking about the same subjects (dentists, cars, hikes, dinners...), so an
answer competes with near misses of every age.

Questions ("kind"): "fact" (by name, no date), "temporal" (a date in the question),
"paraphrase" (no content word shared with the answer but the person's name), "zh" (a
Chinese question; its kind kept in `sub`). Each question is in one split: "tune" (people
of even rank) or "heldout" (odd rank), which no ranking parameter may be chosen on. The
needle is the answering line, "Name: what they said", as written in the log.

The same generator with another seed and the other half of the name lists (`people="train"`)
makes the reranker's training data (bench/recall_dialogue/train_reranker.py): never the
eval's people, values or days.
"""

from __future__ import annotations

import argparse
import json
import random
from datetime import date, timedelta
from pathlib import Path

NOW = date(2027, 6, 30)
DAYS = 730
EVAL_SEED = 29
MONTHS = (
    "January February March April May June July August September October November December".split()
)
BUCKETS = [(0, 30), (31, 90), (91, 180), (181, DAYS - 1)]

EN_NAMES = (
    "Maya Tom Priya Jonas Elena Sam Nadia Kofi Lucia Ravi Hannah Diego Aisha Felix Ingrid "
    "Mateo Chloe Omar Greta Yusuf Leila Bruno Zara Anton Freya Tariq Nina Oscar Selma Hugo "
    "Ruth Emil Carmen Idris Vera Lars"
).split()
ZH_NAMES = "李伟 王芳 张敏 刘洋 陈静 杨帆 赵磊 黄婷 周杰 吴倩 徐亮 孙悦".split()
EN_CITIES = (
    "Glasgow Valencia Leeds Hamburg Seville Cork Marseille Kumasi Turin Pune Porto Gdansk "
    "Lyon Bergen Bilbao Malmo Graz Utrecht Nantes Aarhus"
).split()
ZH_CITIES = "成都 青岛 杭州 西安 厦门 昆明 大连 苏州 南京 武汉".split()
RELATIVES = "brother sister cousin aunt uncle father mother niece nephew grandmother".split()
ZH_RELATIVES = "姐姐 舅舅 表哥 姑姑 叔叔 外婆".split()
BLOOD = "A positive;B negative;O positive;AB positive;A negative;O negative;B positive".split(";")
ALLERGIES = (
    "penicillin;shellfish;latex;wasp stings;peanuts;pollen;sesame;dust mites;ibuprofen;"
    "kiwi fruit;cats;strawberries;aspirin;walnuts"
).split(";")

# kind: (what the person says, the question, values)
EN_FACTS = {
    "dentist": (
        "I switched dentists, it's Dr {x} at the {y} practice now.",
        "Who is {n}'s dentist now?",
        "Okafor Lindqvist Moreau Patel Brennan Sato Ferreira Novak Quinn Abadi Haddad Olsen "
        "Kowalski Reyes Mbeki Tanaka Duval Castro".split(),
        "Riverside;Elm Street;Old Town;Harbour;Central;Westgate;Parkview;Mill Lane".split(";"),
    ),
    "car": (
        "we finally bought a used {x}, {y}, mostly for the commute.",
        "What car did {n} buy?",
        "Skoda Octavia;Toyota Yaris;Mazda 3;Volvo V60;Honda Jazz;Fiat Panda;Kia Ceed;"
        "Peugeot 208;Ford Focus;Seat Ibiza;Renault Clio;Opel Astra;Hyundai i30;Dacia Duster".split(
            ";"
        ),
        "dark green;silver;red;navy;white;yellow;grey;black;orange".split(";"),
    ),
    "course": (
        "I signed up for a {x} course, it runs on {y} evenings.",
        "Which course did {n} sign up for?",
        "pottery;Italian;salsa;photography;first aid;woodworking;Mandarin;sailing;"
        "bread baking;watercolour;Spanish;jazz piano;calligraphy;welding".split(";"),
        "Monday Tuesday Wednesday Thursday Friday".split(),
    ),
    "restaurant": (
        "my new favourite place to eat is {x}, a {y} spot near the station.",
        "What is {n}'s favourite restaurant?",
        "Casa Lupo;Saffron Door;Kaito;El Faro;Blue Lotus;Nonna Rosa;Tbilisi Table;Mezze Yard;"
        "Pho Real;The Crooked Spoon;Little Lisbon;Olive and Ash;Copper Pot;Sumac".split(";"),
        "Tuscan;Persian;ramen;seafood;Thai;Sicilian;Georgian;Lebanese;Vietnamese".split(";"),
    ),
    "key": (
        "the spare house key is with the neighbour {x} at number {y}.",
        "Where is {n}'s spare key?",
        "Mrs Albright;Mr Okoye;Greta;Hamid;Mrs Delaney;Bruno;Ines;Mr Varga;Chiara;"
        "Mrs Nakamura;Mr Dube;Agnes".split(";"),
        "12 7 31 4 18 22 9 40 15 3 27 11".split(),
    ),
    "phone": (
        "I moved my mobile to {x}, on the {y} plan.",
        "Which mobile provider is {n} with?",
        "Vodafone;Three;Orange;Lebara;giffgaff;O2;Tesco Mobile;Lycamobile;EE;Sky Mobile".split(";"),
        "20 GB;unlimited;pay as you go;5 GB;family;student;50 GB;SIM only".split(";"),
    ),
}
EN_EVENTS = {
    "hike": (
        "we hiked up {x} today, my legs are done.",
        "Where did {n} go hiking {d}?",
        "Ben Lomond;Snowdon;Pen y Fan;Scafell Pike;Helvellyn;Mount Teide;Monte Baldo;Brocken;"
        "Croagh Patrick;Table Mountain;Skiddaw;Cadair Idris;Ben Nevis;Tryfan".split(";"),
    ),
    "cook": (
        "I made {x} for dinner tonight.",
        "What did {n} cook for dinner {d}?",
        "lamb tagine;mushroom risotto;chicken katsu;lentil dal;paella;beef stew;shakshuka;"
        "pad thai;gnocchi;fish pie;ratatouille;jollof rice;bibimbap;moussaka".split(";"),
    ),
    "concert": (
        "just got back from the {x} gig downtown.",
        "Which concert did {n} go to {d}?",
        "Radiohead;Arctic Monkeys;Coldplay;Fontaines D.C.;Florence and the Machine;Khruangbin;"
        "Bon Iver;Massive Attack;Wet Leg;Nils Frahm;Little Simz;Burna Boy;Portishead".split(";"),
    ),
    "buy": (
        "picked up {x} at the market this morning.",
        "What did {n} buy {d}?",
        "a cast-iron pan;a reading lamp;running shoes;a wool scarf;a houseplant;a toaster;"
        "a rain jacket;a chess set;noise-cancelling headphones;a bike helmet;a kettle;"
        "a yoga mat;a coffee grinder;a tent".split(";"),
    ),
}
EN_PARAPHRASE = [
    ("I can't stand loud crowds, give me a quiet evening alone.", "Is {n} an introvert?"),
    (
        "started piano lessons, a teacher comes every Tuesday.",
        "Which musical instrument is {n} learning?",
    ),
    (
        "the doctor said my cholesterol numbers are far too high.",
        "Does {n} have cardiac health worries?",
    ),
    ("I gave the car away, I cycle to the office daily now.", "How does {n} commute to work?"),
    ("I quit smoking this spring after twenty years.", "Has {n} kicked the tobacco habit?"),
    ("we're expecting a baby girl in the autumn!", "Is {n} going to become a parent?"),
    ("I moved into a small flat by the harbour.", "Where does {n} reside these days?"),
    ("I lost the job when the branch closed down.", "Is {n} unemployed?"),
    ("ran the city marathon in under four hours!", "How athletic is {n}?"),
    (
        "I'm vegan, so no cheese or eggs for me.",
        "What diet regarding animal products does {n} follow?",
    ),
    ("I broke an ankle skiing in the Alps.", "Has {n} suffered any sports injury?"),
    ("I read mystery novels in bed every night.", "What literary genre does {n} enjoy?"),
    ("I volunteer at the food bank on Saturdays.", "Does {n} do charity work?"),
    ("flying terrifies me, I take trains everywhere.", "Is {n} nervous about air travel?"),
    ("I speak fluent Portuguese after years in Recife.", "What languages does {n} know?"),
    ("I'm saving up for a deposit on a house.", "Is {n} planning to purchase property?"),
    ("they promoted me to team lead at work.", "Did {n} advance professionally?"),
    ("I grow tomatoes and basil on the balcony.", "Does {n} enjoy gardening?"),
]
EN_CHATTER = [
    "long day at work, I'm tired.",
    "the weather was grey and wet again.",
    "watched a film and going to bed early.",
    "I want to go hiking again soon, maybe somewhere new.",
    "any quick dinner idea? I have rice and eggs.",
    "I need to call the dentist's office about a bill.",
    "stuck in traffic on the way home, the car is making a noise.",
    "a colleague took a course and loved it.",
    "went to the market but bought nothing.",
    "the phone bill was higher than usual this month.",
    "planning the week ahead, it's busy.",
    "thinking about visiting family soon.",
    "that concert last year was so loud.",
    "I tried a new restaurant, it was just okay.",
    "where did I put the spare key again?",
    "my neighbour keeps parking in front of my door.",
    "did anyone see the match last night?",
    "I'm cooking something simple tonight.",
    "the dentist wants me back in six months.",
    "need new shoes before the hike.",
]
ASSISTANT = [
    "Noted.",
    "Sounds good, enjoy it!",
    "Got it, I'll remember that.",
    "That sounds like a lot, take it easy.",
    "Want me to add it to your calendar?",
    "Nice! Tell me how it goes.",
    "Sorry to hear that.",
    "I can look up some options if you like.",
]

ZH_FACTS = {
    "dentist": (
        "我换了牙医，现在去{x}诊所。",
        "{n}现在的牙医在哪家诊所？",
        "仁和口腔 美齿 博爱牙科 华美口腔 德雅齿科 瑞尔齿科".split(),
    ),
    "car": (
        "我们买了一辆二手{x}，上下班开。",
        "{n}买了什么车？",
        "比亚迪秦 大众朗逸 丰田卡罗拉 本田思域 吉利帝豪 长安逸动".split(),
    ),
    "course": (
        "我报名了{x}课，每周四晚上上。",
        "{n}报名了什么课？",
        "陶艺 书法 国画 古筝 瑜伽 摄影".split(),
    ),
    "restaurant": (
        "我现在最喜欢的餐厅是{x}，就在火车站附近。",
        "{n}最喜欢哪家餐厅？",
        "蜀香阁 海鲜小馆 老北京涮肉 云南人家 粤味轩 湘里人家".split(),
    ),
}
ZH_EVENTS = {
    "hike": (
        "今天去{x}爬山了，腿好酸。",
        "{n}{d}去哪里爬山了？",
        "青城山 崂山 峨眉山 泰山 黄山 华山 武夷山 莫干山 雁荡山 衡山".split(),
    ),
    "cook": (
        "晚饭我做了{x}。",
        "{n}{d}晚饭做了什么？",
        "红烧肉 麻婆豆腐 清蒸鱼 西红柿炒蛋 宫保鸡丁 酸菜鱼 糖醋排骨 回锅肉 水煮牛肉 可乐鸡翅".split(),
    ),
    "buy": (
        "今天在商场买了{x}。",
        "{n}{d}买了什么？",
        "一台空气净化器 一双登山鞋 一个电饭煲 一件羽绒服 一盏台灯 一套茶具 一个行李箱 一把雨伞 一台咖啡机 一辆自行车".split(),
    ),
}
ZH_PARAPHRASE = [
    ("我最近开始学弹钢琴，每周二上课。", "{n}在练哪种乐器？"),
    ("我戒烟已经半年了。", "{n}还碰尼古丁吗？"),
    ("下个月我要搬到海边的新公寓。", "{n}准备换住处吗？"),
    ("坐飞机我很害怕，出门都坐高铁。", "{n}恐惧航空旅行吗？"),
    ("我被提拔成组长了。", "{n}升职了吗？"),
    ("我每个周六去养老院做义工。", "{n}参加公益活动吗？"),
]
ZH_CHATTER = [
    "今天加班，很累。",
    "天气又冷又湿。",
    "看了一部电影，早点睡了。",
    "周末想再去爬山。",
    "晚饭吃什么好？",
    "牙有点疼，要去看牙医。",
    "路上堵车，车子有点异响。",
    "同事报了个课，说很好。",
    "去商场逛了逛，什么也没买。",
    "最近想换个餐厅试试。",
    "这个月话费有点贵。",
]
ZH_ASSISTANT = ["好的，记下了。", "听起来不错！", "辛苦了，早点休息。", "需要我帮你查一下吗？"]


def _when(day: date) -> str:
    return f"on {MONTHS[day.month - 1]} {day.day}, {day.year}"


def _zh_when(day: date) -> str:
    return f"{day.year}年{day.month}月{day.day}日"


class _Log:
    """Days -> conversations -> lines, with facts planted into chosen conversations."""

    def __init__(self, rng: random.Random, groups: list[tuple[str, list[str], str]]) -> None:
        self.rng = rng
        self.groups = groups  # (chat key, members, language)
        self.days: dict[date, list[dict]] = {}

    def conversation(self, day: date, chat: str, people: list[str], lang: str) -> dict:
        convs = self.days.setdefault(day, [])
        for conv in convs:
            if conv["chat"] == chat:
                return conv
        conv = {"chat": chat, "people": people, "lang": lang, "lines": [], "planted": []}
        convs.append(conv)
        return conv

    def plant(self, day: date, person: str, chat: str, people: list[str], lang: str, said: str):
        self.conversation(day, chat, people, lang)["planted"].append((person, said))


def build(out: Path, seed: int = EVAL_SEED, people: str = "eval") -> list[dict]:
    """Write out/memory/ and return the questions."""
    rng = random.Random(seed)
    half = 0 if people == "eval" else 1
    en_names = EN_NAMES[half::2][:18]
    zh_names = ZH_NAMES[half::2][:6]
    memory_dir = out / "memory"
    memory_dir.mkdir(parents=True, exist_ok=True)
    all_days = [NOW - timedelta(days=a) for a in range(1, DAYS)]
    # Group chats: four English, two Chinese, each of four to six members.
    groups = []
    for g in range(4):
        members = rng.sample(en_names, rng.randint(4, 6))
        groups.append((f"telegram:-100{700 + g}", members, "en"))
    for g in range(2):
        members = rng.sample(zh_names, 3)
        groups.append((f"telegram:-100{800 + g}", members, "zh"))
    log = _Log(rng, groups)
    private = {n: f"telegram:{1000 + i}" for i, n in enumerate(en_names + zh_names)}
    memory_lines: list[str] = []
    queries: list[dict] = []

    def chat_for(person: str, lang: str) -> tuple[str, list[str]]:
        mine = [g for g in groups if person in g[1]]
        if mine and rng.random() < 0.6:
            chat, members, _ = rng.choice(mine)
            return chat, members
        return private[person], [person]

    def day_in(bucket: int) -> date:
        low, high = BUCKETS[bucket]
        return NOW - timedelta(days=rng.randint(max(low, 1), high))

    def ask(q: str, kind: str, lang: str, day: date | None, needle: str, name: str, rank: int):
        if day is not None:
            needle = f"{name}: {needle}"
        queries.append(
            {
                "query": q,
                "kind": kind if lang == "en" else "zh",
                "sub": kind,
                "lang": lang,
                "target_date": day.isoformat() if day else None,
                "needle": needle,
                "person": name,
                "split": "tune" if rank % 2 == 0 else "heldout",
            }
        )

    def say(day: date, name: str, lang: str, said: str) -> None:
        chat, members = chat_for(name, lang)
        log.plant(day, name, chat, members, lang, said)

    paraphrases = list(EN_PARAPHRASE)
    rng.shuffle(paraphrases)
    for i, n in enumerate(en_names):
        relative, city = rng.choice(RELATIVES), rng.choice(EN_CITIES)
        for text, q in (
            (f"{n}'s blood type is {rng.choice(BLOOD)}.", f"What is {n}'s blood type?"),
            (f"{n} is allergic to {rng.choice(ALLERGIES)}.", f"What is {n} allergic to?"),
            (f"{n}'s {relative} lives in {city}.", f"Where does {n}'s {relative} live?"),
        ):
            memory_lines.append(f"- {text}")
            ask(q, "fact", "en", None, text, n, i)
        for k, (_kind, (tmpl, question, xs, ys)) in enumerate(EN_FACTS.items()):
            said = tmpl.format(x=rng.choice(xs), y=rng.choice(ys))
            day = day_in((i + k) % 4)
            say(day, n, "en", said)
            ask(question.format(n=n), "fact", "en", day, said, n, i)
        for k, (_kind, (tmpl, question, xs)) in enumerate(EN_EVENTS.items()):
            picks = rng.sample(xs, 8)
            for j, x in enumerate(picks):
                day = day_in((i + k + j) % 4) if j == 0 else rng.choice(all_days)
                said = tmpl.format(x=x)
                say(day, n, "en", said)
                if j == 0:
                    ask(question.format(n=n, d=_when(day)), "temporal", "en", day, said, n, i)
        for tmpl, q in paraphrases[(2 * i) % len(paraphrases) : (2 * i) % len(paraphrases) + 2]:
            day = day_in(rng.randrange(4))
            say(day, n, "en", tmpl)
            ask(q.format(n=n), "paraphrase", "en", day, tmpl, n, i)
    for i, n in enumerate(zh_names):
        relative, city = rng.choice(ZH_RELATIVES), rng.choice(ZH_CITIES)
        text = f"{n}的{relative}住在{city}。"
        memory_lines.append(f"- {text}")
        ask(f"{n}的{relative}住在哪个城市？", "fact", "zh", None, text, n, i)
        for k, (_kind, (tmpl, question, xs)) in enumerate(ZH_FACTS.items()):
            said = tmpl.format(x=rng.choice(xs))
            day = day_in((i + k) % 4)
            say(day, n, "zh", said)
            ask(question.format(n=n), "fact", "zh", day, said, n, i)
        for k, (_kind, (tmpl, question, xs)) in enumerate(ZH_EVENTS.items()):
            for j, x in enumerate(rng.sample(xs, 8)):
                day = day_in((i + k + j) % 4) if j == 0 else rng.choice(all_days)
                said = tmpl.format(x=x)
                say(day, n, "zh", said)
                if j == 0:
                    ask(question.format(n=n, d=_zh_when(day)), "temporal", "zh", day, said, n, i)
        for tmpl, q in ZH_PARAPHRASE[(2 * i) % 6 : (2 * i) % 6 + 2]:
            day = day_in(rng.randrange(4))
            say(day, n, "zh", tmpl)
            ask(q.format(n=n), "paraphrase", "zh", day, tmpl, n, i)
    # Everyday talk: four or five conversations a day on the same subjects.
    for day in all_days:
        for _ in range(rng.choice((3, 4, 4, 5))):
            if rng.random() < 0.8:
                n = rng.choice(en_names)
                chat, members = chat_for(n, "en")
                log.conversation(day, chat, members, "en")
            else:
                n = rng.choice(zh_names)
                chat, members = chat_for(n, "zh")
                log.conversation(day, chat, members, "zh")
    _write(memory_dir, memory_lines, log, rng)
    for number, q in enumerate(queries, 1):
        q["id"] = f"d{number:03d}"
    return queries


def _write(memory_dir: Path, memory_lines: list[str], log: _Log, rng: random.Random) -> None:
    memory = ["# Memory", "", "## People", "", *memory_lines, "", "## Preferences", ""]
    memory.append("- Short answers, metric units, 24-hour times.")
    (memory_dir / "MEMORY.md").write_text("\n".join(memory) + "\n", encoding="utf-8")
    for day in sorted(log.days):
        parts = [f"# {day.isoformat()}", ""]
        minutes = sorted(rng.sample(range(7 * 60, 23 * 60, 5), len(log.days[day])))
        for conv, minute in zip(log.days[day], minutes, strict=True):
            zh = conv["lang"] == "zh"
            chatter, replies = (ZH_CHATTER, ZH_ASSISTANT) if zh else (EN_CHATTER, ASSISTANT)
            group = conv["chat"].startswith("telegram:-")
            names = conv["people"]
            lines = []
            for _ in range(rng.randint(4, 9)):
                lines.append((rng.choice(names), rng.choice(chatter)))
            for person, said in conv["planted"]:
                lines.insert(rng.randint(0, len(lines)), (person, said))
            where = f"{conv['chat']} ({'group' if group else 'private'})"
            parts.append(f"## {minute // 60:02d}:{minute % 60:02d} {where}")
            for person, said in lines:
                parts.append(f"{person}: {said}")
                if not group and rng.random() < 0.5:
                    parts.append(f"assistant: {rng.choice(replies)}")
            parts.append("")
        (memory_dir / f"{day.isoformat()}.md").write_text("\n".join(parts), encoding="utf-8")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("out", type=Path)
    parser.add_argument("--seed", type=int, default=EVAL_SEED)
    parser.add_argument("--people", choices=["eval", "train"], default="eval")
    args = parser.parse_args()
    found = build(args.out, args.seed, args.people)
    with (args.out / "queries.jsonl").open("w", encoding="utf-8") as handle:
        for q in found:
            handle.write(json.dumps(q, ensure_ascii=False) + "\n")
    print(f"{len(found)} queries -> {args.out}")
