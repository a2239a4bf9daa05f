"""The labelled facts of the recall eval: each is written into the corpus once, and each
query names it as its target. Written before any ranking parameter was tuned.

FACTS: (id, where, date, text, queries); where is "memory" (MEMORY.md, undated), "daily"
(memory/<date>.md) or "history" (HISTORY.md entry stamped <date>). A query is
(kind, lang, text); kind "paraphrase" must share no content word (stemmed; for Chinese, no
character bigram) with its target, which bench/recall_eval.py checks.
"""

NOW = "2026-12-15"

FACTS = [
    # --- MEMORY.md (undated) ---------------------------------------------------------
    ("m-sister", "memory", None, "Ann's sister Rita lives in Lisbon with her husband Duarte.", [
        ("fact", "en", "where does Rita live"),
        ("paraphrase", "en", "which city is home to my sibling"),
    ]),
    ("m-cat", "memory", None, "The cat is called Miso; she is allergic to chicken-based food.", [
        ("fact", "en", "what is the cat allergic to"),
    ]),
    ("m-blood", "memory", None, "Ann's blood type is O negative.", [
        ("fact", "en", "blood type"),
    ]),
    ("m-bank", "memory", None, "Main bank account is with Millennium BCP; savings at Revolut.", [
        ("fact", "en", "which bank holds the savings"),
    ]),
    ("m-coffee", "memory", None, "Ann drinks oat-milk flat whites and no sugar.", [
        ("paraphrase", "zh", "安喝咖啡放什么奶"),
    ]),
    ("m-boss", "memory", None, "Ann's manager at Tidewater is Priya Natarajan.", [
        ("fact", "en", "who is my manager at Tidewater"),
    ]),
    ("m-zh-parents", "memory", None, "安的父母住在杭州西湖区，每年春节回去一次。", [
        ("fact", "zh", "父母住在哪里"),
        ("paraphrase", "en", "hometown of mum and dad"),
    ]),
    ("m-car", "memory", None, "Car: grey 2019 Renault Clio, plate 45-XR-12, insurance with Fidelidade.", [
        ("fact", "en", "car insurance company"),
    ]),
    ("m-zh-allergy", "memory", None, "安对花生过敏，点菜时要提醒。", [
        ("fact", "zh", "花生过敏"),
    ]),
    ("m-gym", "memory", None, "Gym membership at Fitness Hut Boavista, Monday Wednesday Friday mornings.", [
        ("fact", "en", "which gym am I a member of"),
    ]),
    # --- May 2026 ----------------------------------------------------------------------
    ("lisbon-flights", "history", "2026-05-04", "Planned the Lisbon trip with Ann: flights booked with TAP for 12-19 September, staying at a guesthouse in Alfama.", [
        ("date", "en", "when are the Lisbon flights"),
        ("fact", "en", "where are we staying in Lisbon"),
    ]),
    ("lisbon-car", "daily", "2026-05-06", "Decided to rent a car in Lisbon only for the Sintra day, not for the whole week.", [
        ("decision", "en", "what did we decide about renting a car in Lisbon"),
        ("paraphrase", "en", "automobile hire for the palace excursion near the Portuguese capital"),
    ]),
    ("tax-2025", "daily", "2026-05-09", "Submitted the 2025 IRS tax return; refund expected of 640 euros.", [
        ("fact", "en", "how much is the tax refund"),
    ]),
    ("zh-yoga", "daily", "2026-05-12", "报名了周二晚上的瑜伽课，在博阿维斯塔的工作室，老师叫玛塔。", [
        ("fact", "zh", "瑜伽课是星期几"),
    ]),
    ("plumber", "history", "2026-05-15", "The plumber (Senhor Costa, 912 334 556) fixed the leaking kitchen tap; charged 85 euros.", [
        ("fact", "en", "phone number of the plumber"),
        ("paraphrase", "en", "who repaired the dripping faucet"),
    ]),
    ("book-club", "daily", "2026-05-19", "Book club picked 'The Remains of the Day' for June; meeting at Rua Miguel Bombarda cafe.", [
        ("fact", "en", "which book did the book club pick for June"),
    ]),
    ("zh-dentist", "history", "2026-05-22", "牙医说左下第二颗臼齿需要做根管治疗，预约在六月三日。", [
        ("date", "zh", "根管治疗什么时候"),
        ("paraphrase", "en", "when is the root canal"),
    ]),
    ("laptop", "daily", "2026-05-27", "Ordered the new work laptop: ThinkPad X1 Carbon Gen 13, arrives in two weeks.", [
        ("fact", "en", "which laptop did I order"),
    ]),
    ("decide-stack", "history", "2026-05-29", "Decision for the Tidewater billing rewrite: stay on PostgreSQL, drop the MongoDB prototype.", [
        ("decision", "en", "what database did we choose for the billing rewrite"),
        ("paraphrase", "en", "which datastore won for the invoicing rebuild"),
    ]),
    # --- June 2026 ---------------------------------------------------------------------
    ("rita-bday", "daily", "2026-06-02", "Rita's birthday is 14 July; idea: a ceramics workshop voucher.", [
        ("date", "en", "when is Rita's birthday"),
        ("fact", "en", "gift idea for Rita"),
    ]),
    ("zh-visa", "history", "2026-06-05", "帮安查了去日本的签证：葡萄牙护照免签，最多停留九十天。", [
        ("fact", "zh", "去日本需要签证吗"),
    ]),
    ("running", "daily", "2026-06-08", "Signed up for the Porto half marathon on 8 November; training plan: 3 runs a week.", [
        ("date", "en", "when is the half marathon"),
        ("paraphrase", "en", "date of the 21 km race"),
    ]),
    ("insurance", "history", "2026-06-11", "Switched home insurance from Tranquilidade to Ageas; annual premium 212 euros.", [
        ("fact", "en", "who insures the house now"),
    ]),
    ("zh-recipe", "daily", "2026-06-14", "学会了妈妈的红烧肉做法：冰糖炒色，加黄酒和八角，小火炖九十分钟。", [
        ("fact", "zh", "红烧肉怎么做"),
        ("paraphrase", "zh", "母亲传授的那道荤菜步骤"),
    ]),
    ("wifi", "daily", "2026-06-17", "Changed the home wifi password to the one written on the fridge note; router is a MEO Fibergateway.", [
        ("fact", "en", "what router do we have"),
    ]),
    ("promo", "history", "2026-06-20", "Ann got promoted to Staff Engineer at Tidewater, effective 1 July, with a 12 percent raise.", [
        ("fact", "en", "when was the promotion effective"),
        ("paraphrase", "en", "career advancement and pay bump"),
    ]),
    ("zh-cat-vet", "daily", "2026-06-23", "Miso去看兽医，打了三联疫苗，体重四点二公斤。", [
        ("fact", "zh", "猫打了什么疫苗"),
        ("fact", "en", "how much does Miso weigh"),
    ]),
    ("conference", "history", "2026-06-26", "Talk accepted at PyCon Portugal in Braga, 3-4 October: 'Boring databases for billing'.", [
        ("fact", "en", "which conference accepted my talk"),
    ]),
    ("balcony", "daily", "2026-06-29", "Planted basil, mint and cherry tomatoes on the balcony; water every evening in summer.", [
        ("paraphrase", "en", "herbs growing on the terrace"),
    ]),
    # --- July 2026 ---------------------------------------------------------------------
    ("passport", "daily", "2026-07-03", "Passport renewal appointment at Loja do Cidadao Porto on 21 July at 09:30.", [
        ("date", "en", "passport renewal appointment"),
    ]),
    ("zh-move", "history", "2026-07-07", "讨论了搬家：决定明年春天前不搬，先续租一年，房租涨到九百五十欧。", [
        ("decision", "zh", "我们决定搬家了吗"),
        ("decision", "en", "did we decide to move flat"),
    ]),
    ("duarte-job", "daily", "2026-07-10", "Duarte started a new job as an architect at a studio in Belem.", [
        ("fact", "en", "where does Duarte work"),
    ]),
    ("budget", "history", "2026-07-14", "Set the monthly budget: 400 euros groceries, 150 eating out, 100 for hobbies.", [
        ("fact", "en", "grocery budget per month"),
        ("paraphrase", "en", "spending limit for food shopping"),
    ]),
    ("zh-guitar", "daily", "2026-07-18", "开始学吉他，每周四跟朋友佩德罗学一小时，先练C和G和弦。", [
        ("fact", "zh", "谁教我吉他"),
    ]),
    ("bike-stolen", "history", "2026-07-22", "Ann's bicycle was stolen from outside the Bolhao market; police report number PSP-2026-18841.", [
        ("fact", "en", "police report number for the bike"),
        ("paraphrase", "en", "theft of my two-wheeler"),
    ]),
    ("mortgage", "daily", "2026-07-25", "Asked Caixa about a mortgage pre-approval; they need three payslips and the IRS statement.", [
        ("fact", "en", "what documents does the bank need for the mortgage"),
    ]),
    ("zh-friend-wedding", "history", "2026-07-29", "小林九月二十六号在苏州结婚，安决定飞回去参加，伴娘礼服要自己准备。", [
        ("date", "zh", "小林什么时候结婚"),
        ("paraphrase", "en", "a friend's marriage ceremony in China"),
    ]),
    # --- August 2026 -------------------------------------------------------------------
    ("holiday-algarve", "history", "2026-08-02", "Weekend in the Algarve: stayed in Lagos, kayaked to Ponta da Piedade, too many jellyfish at Meia Praia.", [
        ("fact", "en", "where did we kayak in the Algarve"),
    ]),
    ("zh-phone", "daily", "2026-08-05", "手机屏幕摔裂了，送到苏亚雷斯街的维修店，换屏一百二十欧。", [
        ("fact", "zh", "换手机屏幕多少钱"),
    ]),
    ("standup", "daily", "2026-08-08", "Team agreed to move the daily standup from 09:30 to 10:15 because of the Lisbon office.", [
        ("decision", "en", "what time is standup now"),
    ]),
    ("garmin", "history", "2026-08-11", "Bought a Garmin Forerunner 265 for marathon training, 349 euros at Worten.", [
        ("fact", "en", "which watch did I buy"),
        ("paraphrase", "en", "wrist gadget purchased for jogging"),
    ]),
    ("zh-tea", "daily", "2026-08-14", "朋友从云南寄来普洱茶饼，二零一五年的熟茶。", [
        ("fact", "zh", "谁寄的普洱"),
    ]),
    ("landlord", "history", "2026-08-18", "Landlord Mr Pinto agreed to replace the broken oven before September at his expense.", [
        ("decision", "en", "who pays for the new oven"),
    ]),
    ("spanish", "daily", "2026-08-21", "Started Spanish lessons on italki with tutor Lucia, Saturdays 11:00.", [
        ("fact", "en", "who is my Spanish tutor"),
        ("paraphrase", "en", "online language teacher for castellano"),
    ]),
    ("zh-mom-health", "history", "2026-08-25", "妈妈体检发现血压偏高，医生让她少吃盐，每天量血压。", [
        ("fact", "zh", "妈妈体检结果"),
        ("paraphrase", "en", "mother's hypertension checkup"),
    ]),
    ("offsite", "daily", "2026-08-28", "Tidewater offsite confirmed for 15-17 October in Comporta; Ann presents the billing roadmap.", [
        ("date", "en", "when is the company offsite"),
    ]),
    # --- September 2026 ----------------------------------------------------------------
    ("lisbon-restaurant", "daily", "2026-09-01", "For Lisbon, booked dinner at Taberna da Rua das Flores on 14 September, 20:00.", [
        ("fact", "en", "restaurant booked in Lisbon"),
    ]),
    ("zh-lisbon-gift", "history", "2026-09-04", "决定给丽塔带杭州的龙井茶当礼物，顺便带两盒绿豆糕。", [
        ("decision", "zh", "给丽塔带什么礼物"),
        ("paraphrase", "en", "present for my sister from China"),
    ]),
    ("boiler", "history", "2026-09-08", "Boiler serviced by Vulcano technician; next service due September 2027.", [
        ("date", "en", "when is the next boiler service"),
        ("paraphrase", "en", "water heater maintenance visit"),
    ]),
    ("zh-sick", "daily", "2026-09-11", "感冒发烧三十八度，请了两天病假，吃了布洛芬。", [
        ("fact", "zh", "发烧吃了什么药"),
    ]),
    ("lisbon-decision", "history", "2026-09-13", "In Lisbon we decided to come back next spring for Rita's baby shower, and to skip Sintra this time because of the rain.", [
        ("decision", "en", "what did we decide about the Lisbon trip"),
        ("decision", "en", "did we go to Sintra"),
        ("paraphrase", "zh", "在葡萄牙首都时定下了什么"),
    ]),
    ("piano", "daily", "2026-09-15", "Sold the old Yamaha digital piano on OLX for 280 euros.", [
        ("fact", "en", "how much did the piano sell for"),
        ("paraphrase", "en", "got rid of the keyboard instrument"),
    ]),
    # --- late September - October 2026 ------------------------------------------------
    ("braga-talk", "history", "2026-10-04", "Gave the PyCon Portugal talk in Braga; about 120 people, slides uploaded to Speaker Deck.", [
        ("fact", "en", "how many people came to the talk"),
    ]),
    ("zh-wedding-back", "daily", "2026-09-28", "从苏州回来，小林的婚礼很热闹，给了一千元红包。", [
        ("fact", "zh", "红包给了多少"),
    ]),
    ("vaccine", "daily", "2026-10-07", "Got the flu shot and the COVID booster at the Paranhos health centre.", [
        ("fact", "en", "where did I get the flu shot"),
        ("paraphrase", "en", "influenza jab location"),
    ]),
    ("zh-offsite", "history", "2026-10-16", "团队外出会议在孔波尔塔，决定计费系统明年一月上线，先迁移欧洲客户。", [
        ("decision", "zh", "计费系统什么时候上线"),
        ("decision", "en", "billing launch date decided at the offsite"),
    ]),
    ("tyres", "daily", "2026-10-20", "Replaced the two front tyres of the Clio at Norauto, Michelin CrossClimate, 190 euros.", [
        ("fact", "en", "which tyres did we put on the car"),
    ]),
    ("duarte-baby", "history", "2026-10-23", "Rita and Duarte are expecting a baby girl in April; they want to call her Leonor.", [
        ("fact", "en", "what is Rita's baby going to be called"),
        ("paraphrase", "zh", "姐姐怀孕了吗"),
    ]),
    ("zh-heating", "daily", "2026-10-27", "家里的暖气片不热，物业说十一月第一周派人来放气。", [
        ("fact", "zh", "暖气什么时候修"),
    ]),
    ("newsletter", "daily", "2026-10-30", "Unsubscribed from 14 newsletters; kept only Stratechery and LWN.", [
        ("fact", "en", "which newsletters did I keep"),
    ]),
    # --- November 2026 -----------------------------------------------------------------
    ("marathon-result", "history", "2026-11-08", "Finished the Porto half marathon in 1:52:40, a personal best.", [
        ("fact", "en", "half marathon finish time"),
        ("paraphrase", "en", "how fast was my race result"),
    ]),
    ("zh-stock", "daily", "2026-11-03", "决定每月定投三百欧到全球指数基金，不再买个股。", [
        ("decision", "zh", "投资怎么安排的"),
        ("paraphrase", "en", "monthly investing plan"),
    ]),
    ("christmas", "history", "2026-11-12", "Christmas plan: spend 24-26 December in Lisbon with Rita and Duarte, drive down on the 23rd.", [
        ("decision", "en", "where are we spending Christmas"),
        ("paraphrase", "zh", "圣诞节去哪"),
    ]),
    ("ikea", "daily", "2026-11-16", "Ordered a PAX wardrobe from IKEA Matosinhos, delivery on 28 November.", [
        ("fact", "en", "when does the wardrobe arrive"),
    ]),
    ("zh-cat-food", "history", "2026-11-19", "Miso换了猫粮，改成三文鱼味的无谷配方，兽医建议的。", [
        ("fact", "zh", "Miso现在吃什么猫粮"),
        ("paraphrase", "en", "what does the kitty eat now"),
    ]),
    ("oncall", "daily", "2026-11-22", "On-call rotation: Ann covers the week of 7 December; handover with Tomas on Monday.", [
        ("date", "en", "when am I on call"),
    ]),
    ("dentist-cleaning", "daily", "2026-11-25", "Dentist cleaning done at Clinica Sorriso; next check-up in May 2027.", [
        ("date", "en", "next dental check-up"),
    ]),
    ("zh-xmas-gift", "history", "2026-11-28", "圣诞礼物清单：给爸爸买按摩仪，给妈妈买羊绒围巾，给丽塔买婴儿床铃。", [
        ("fact", "zh", "给妈妈买什么圣诞礼物"),
    ]),
    # --- December 2026 -----------------------------------------------------------------
    ("server", "daily", "2026-12-01", "Moved the home server to a Hetzner CX22 VPS; backups with restic to Backblaze B2 nightly.", [
        ("fact", "en", "where do the backups go"),
        ("paraphrase", "en", "offsite copies of my data"),
    ]),
    ("zh-new-year", "daily", "2026-12-04", "决定春节二月十五号飞杭州，订了卡塔尔航空，经多哈转机。", [
        ("decision", "zh", "春节怎么回家"),
        ("date", "en", "flight to Hangzhou for the new year"),
    ]),
    ("car-inspection", "history", "2026-12-07", "Car passed the IPO inspection at Controlauto; next one due December 2027.", [
        ("fact", "en", "did the car pass inspection"),
    ]),
    ("party", "daily", "2026-12-09", "Team Christmas dinner on 18 December at Cantinho do Avillez, Ann organises the secret Santa.", [
        ("date", "en", "team Christmas dinner date"),
        ("paraphrase", "en", "office festive meal"),
    ]),
    ("zh-cat-sick", "daily", "2026-12-12", "Miso这两天不爱吃东西，明天带去兽医那里检查。", [
        ("fact", "zh", "Miso怎么了"),
    ]),
    ("printer", "history", "2026-12-14", "Printer out of ink again; decided to switch to a Brother laser printer instead of buying HP cartridges.", [
        ("decision", "en", "what did we decide about the printer"),
    ]),
]
