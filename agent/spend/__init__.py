"""Spend: what each model call cost (the ledger), what may still be spent (the budget), and
what a person reads about it (/usage, `clawgate usage`, the dashboard's spend page).

    scope.py    CallTag: which session, trust and purpose the running call is for
    records.py  UsageRecord: one line of <data_dir>/usage/YYYY-MM.jsonl
    prices.py   PriceBook: USD per token from `agent.prices`, else litellm's offline cost map
    ledger.py   Ledger: append one record per call, read them back, running totals
    budget.py   Budget: caps checked before a call, the 80 % warning, notices sent once
    report.py   totals by chat, model, purpose or day, as text
"""
