"""Moving house: a backup of an installation as one archive (`backup.py`), checked
(`verify.py`) and unpacked into a fresh home (`restore.py`); a git-friendly, secret-free tree
(`export.py`); and importers that bring another assistant's workspace in (`importing/`).

Which files an installation has, and where each goes back, is `layout.py`; reading each
under the lock its writer takes is `snapshot.py`; the archive's table of contents is
`manifest.py`."""
