"""The kernel: message types, trust, config models, errors, storage and secrets.

Imports nothing of the project; everything else imports it.
"""
