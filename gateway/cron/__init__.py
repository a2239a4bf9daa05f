"""Scheduled jobs and the heartbeat.

models.py     CronJob / JobsFile (cron/jobs.json), JobState / StateFile (cron/state.json)
triggers.py   schedule -> fire times (croniter for crontab expressions, DST-aware)
store.py      both files on disk: locked read-modify-write, atomic replace
requests.py   `clawgate cron run` handing a job to the running gateway (request files)
turns.py      a scheduled turn in its own session, its reply delivered to a chat
heartbeat.py  the periodic HEARTBEAT.md check
scheduler.py  CronScheduler: APScheduler wiring, the jobs.json watch, retries, run state
tool.py       the model's `cron` tool
"""
