"""A small web site for web_fetch, served on 127.0.0.2 (loopback, but not 127.0.0.1, so a
test can allow this site and still see a redirect to 127.0.0.1 refused): an article page, a
redirect chain of any length, a redirect to 127.0.0.1, a body larger than any cap, a PDF,
plain text, an image, a page whose charset only its <meta> names, a page that never comes.
`hosts` records each request's Host header."""

from __future__ import annotations

from aiohttp import web

from tests.fakes.server import LoopbackServer

ARTICLE = """<!doctype html>
<html><head><title>Tide tables of Saint-Malo</title></head>
<body>
<nav><a href="/">Home</a> | <a href="/about">About</a> | <a href="/shop">Shop</a></nav>
<div class="ad">Buy one, get one free! Subscribe now!</div>
<article>
<h1>Tide tables of Saint-Malo</h1>
<p>Saint-Malo has some of the largest tidal ranges in Europe: the sea can rise and fall by
more than thirteen metres in a single tide. Walkers reach the island of Grand Bé on foot at
low tide and must return before the water closes the causeway again.</p>
<h2>This week</h2>
<p>The times below are local. See the <a href="/harbour">harbour office</a> for the
official figures and the warnings that go with them.</p>
<table>
<tr><th>Day</th><th>Low tide</th><th>High tide</th></tr>
<tr><td>Monday</td><td>06:12</td><td>12:31</td></tr>
<tr><td>Tuesday</td><td>06:58</td><td>13:17</td></tr>
</table>
<p>Coefficients above one hundred bring the spectacular equinox tides that fill the
promenade with spray, and the town's sea walls were built with them in mind.</p>
</article>
<footer>Copyright the tide office. Cookies policy.</footer>
</body></html>
"""


def tiny_pdf(text: str) -> bytes:
    """A one-page PDF showing `text` in Helvetica, written by hand (offsets computed)."""
    stream = f"BT /F1 18 Tf 72 720 Td ({text}) Tj ET".encode()
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
        b"/Resources << /Font << /F1 5 0 R >> >> >>",
        b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(objects) + 1,
        xref,
    )
    return bytes(out)


class FakeWeb(LoopbackServer):
    host = "127.0.0.2"
    huge_bytes = 5_000_000

    def __init__(self) -> None:
        super().__init__()
        self.hosts: list[str] = []

    @property
    def base(self) -> str:
        return f"http://{self.host}:{self.port}"

    def add_routes(self, app: web.Application) -> None:
        app.router.add_get("/article", self._article)
        app.router.add_get("/hop/{n}", self._hop)
        app.router.add_get("/to-loopback", self._to_loopback)
        app.router.add_get("/to-metadata", self._to_metadata)
        app.router.add_get("/huge", self._huge)
        app.router.add_get("/paper.pdf", self._pdf)
        app.router.add_get("/notes.txt", self._text)
        app.router.add_get("/image.png", self._image)
        app.router.add_get("/missing", self._missing)
        app.router.add_get("/latin1", self._latin1)
        app.router.add_get("/slow", self._slow)

    async def _article(self, request: web.Request) -> web.Response:
        self.hosts.append(request.host)
        return web.Response(text=ARTICLE, content_type="text/html")

    async def _hop(self, request: web.Request) -> web.Response:
        """/hop/3 redirects to /hop/2 ... /hop/0 to the article."""
        n = int(request.match_info["n"])
        target = "/article" if n == 0 else f"/hop/{n - 1}"
        raise web.HTTPFound(target)

    async def _to_loopback(self, request: web.Request) -> web.Response:
        raise web.HTTPFound(f"http://127.0.0.1:{self.port}/article")

    async def _to_metadata(self, request: web.Request) -> web.Response:
        raise web.HTTPMovedPermanently("http://169.254.169.254/latest/meta-data/")

    async def _huge(self, request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "text/plain"})
        await response.prepare(request)
        line = b"all work and no play makes jack a dull boy\n" * 1000
        sent = 0
        try:
            while sent < self.huge_bytes:
                await response.write(line)
                sent += len(line)
            await response.write_eof()
        except ConnectionError:
            pass  # the client stopped reading at its cap and hung up: what the test wants
        return response

    async def _pdf(self, request: web.Request) -> web.Response:
        return web.Response(body=tiny_pdf("Quarterly tide report"), content_type="application/pdf")

    async def _text(self, request: web.Request) -> web.Response:
        return web.Response(text="milk\neggs\nbread\n", content_type="text/plain")

    async def _image(self, request: web.Request) -> web.Response:
        return web.Response(body=b"\x89PNG\r\n\x1a\n....", content_type="image/png")

    async def _latin1(self, request: web.Request) -> web.Response:
        """A page in ISO-8859-1 that says so only in its <meta>, as old sites do."""
        page = (
            '<html><head><meta charset="iso-8859-1"><title>Café</title></head>'
            "<body><p>Crêpes à la façon de Saint-Malo, servies à la crêperie du port.</p>"
            "</body></html>"
        )
        return web.Response(body=page.encode("iso-8859-1"), headers={"Content-Type": "text/html"})

    async def _slow(self, request: web.Request) -> web.Response:
        """Never answers (until the fake stops)."""
        await self._stopping.wait()
        return web.Response(text="too late")

    async def _missing(self, request: web.Request) -> web.Response:
        raise web.HTTPNotFound()


class FakeProxy(LoopbackServer):
    """A forward proxy that answers every request itself, recording the absolute URL it was
    asked for (what a client sends a proxy for an http:// target)."""

    def __init__(self) -> None:
        super().__init__()
        self.asked: list[str] = []

    def add_routes(self, app: web.Application) -> None:
        app.router.add_route("*", "/{tail:.*}", self._any)

    async def _any(self, request: web.Request) -> web.Response:
        self.asked.append(str(request.url))
        return web.Response(text="served by the proxy", content_type="text/plain")
