"""The browser dashboard the gateway serves (aiohttp, inside the daemon's event loop).

    server.py     build_app(services) and Dashboard (start/stop, owned by the daemon);
                  the middlewares: security headers, the site host, login, CSRF + Origin
    auth.py       the owner's token (<data_dir>/dashboard.token), the site host derived
                  from it, one-time login codes, session checks, CSRF tokens (HMACs
                  under the token)
    browser_sessions.py  the server's sessions (logout, rotation, idle timeout end them
                  and their event streams) and the pace of failed logins
    services.py   DashboardServices: the runtime, bus, manager, dispatcher, scheduler and
                  pairing store the daemon runs - the only way a page reaches any file
    render.py     Jinja2 (autoescaped) rendering inside templates/base.html, the nav
    login.py      /login (one-time code link or token form), /logout (ends the session)
    login_link.py the link `clawgate dashboard` hands out (under the site host) and the
                  0600 page that takes the browser there (no code on a command line)
    memory.py     /memory...: MEMORY.md view/edit/versions, history, daily logs, search, audit
    sessions.py   /sessions...: every session, transcripts, the archive

A page is a module here named in server.PAGE_MODULES, exposing
`routes(services: DashboardServices) -> list[web.RouteDef]`; its handlers render with
`render(request, "page.html", title=...)` and reach services with `services(request)`.
Forms carry `{{ csrf_field }}`; scripts are files in static/ (no inline script: CSP) and post
with `window.clawgate.post(url, body)` from static/app.js, which sends the CSRF header.
This package is imported only by the daemon and the CLI's `dashboard` command (auth and
login_link only).
"""
