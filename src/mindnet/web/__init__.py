"""The page of `mindnet serve` at `/`: search as you type, the note view, a status strip.

An interface like the CLI: each route parses its arguments, calls one `Index` method and renders
it with the package's templates. The search page fetches `/api/search` and `/api/status` from a
little script; the note view is rendered here (Markdown via `render.py`) and draws its graph
from `/api/graph`. Everything the page loads ships in this package (no CDN, no build step), and
every HTML response carries a Content-Security-Policy that admits only this origin's own script
and style, so a note that slips markup through still cannot run anything.
"""

from __future__ import annotations

from importlib import resources
from typing import Any

from fastapi import APIRouter, Query, Response
from fastapi.responses import HTMLResponse
from jinja2 import Environment, PackageLoader, select_autoescape

from .. import MAX_REF_CHARS, MindnetError, NotFoundError, Resident, StoreError, __version__
from .render import note_href, render_note

CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
       "base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
STATIC = {"app.js": "text/javascript; charset=utf-8", "style.css": "text/css; charset=utf-8"}
"""The only files the page serves, by name: no path from a request ever reaches the file system."""
LANGUAGES = ("de", "en")

TEMPLATES = Environment(loader=PackageLoader("mindnet.web", "templates"), autoescape=select_autoescape(["html"]),
                        trim_blocks=True, lstrip_blocks=True)
TEMPLATES.globals.update(note_href=note_href, version=__version__)


def page(name: str, status: int = 200, **values: Any) -> HTMLResponse:
    """A template as an HTML response with the page's security headers."""
    body = TEMPLATES.get_template(name).render(**values)
    return HTMLResponse(body, status_code=status, headers={
        "Content-Security-Policy": CSP, "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer",
        "Cache-Control": "no-store",
    })


def web_routes(resident: Resident) -> APIRouter:
    """The page's routes over the resident's index (mounted at `/` by the server)."""
    router = APIRouter(include_in_schema=False)
    index = resident.index

    @router.get("/", response_class=HTMLResponse)
    def search_page(q: str = "", type: str = "", tag: str = "", lang: str = "") -> HTMLResponse:
        langs = [*LANGUAGES, *([lang] if lang and lang not in LANGUAGES else [])]
        return page("search.html", q=q, type=type, tag=tag, lang=lang, languages=langs)

    @router.get("/note", response_class=HTMLResponse)
    def note_page(ref: str = Query("", max_length=MAX_REF_CHARS), chunk: str = "", q: str = "") -> HTMLResponse:
        if not ref:
            return page("error.html", 400, title="No note named", message="Give a note: /note?ref=NOTE_ID.",
                        suggestions=[], q=q)
        try:
            found = index.note(ref)
            links = index.note_links(ref)
            note_id = str(found["note"].get("note_id", ref))
            backlinks = index.graph(note_id, "backlinks")
            outgoing = index.graph(note_id, "references")
        except NotFoundError as exc:
            return page("error.html", 404, title="No such note", message=str(exc), suggestions=exc.suggestions, q=q)
        except StoreError as exc:
            return page("error.html", 503, title="The index is not ready", message=str(exc), suggestions=[], q=q)
        except MindnetError as exc:
            return page("error.html", 400, title="Not a note", message=str(exc), suggestions=[], q=q)
        hit_chunk = next((c for c in found["chunks"] if c.get("chunk_id") == chunk), None)
        body_line = int(found["note"].get("body_line", 1))
        span = None
        if hit_chunk is not None:
            span = (int(hit_chunk["line_start"]) - body_line, int(hit_chunk["line_end"]) - body_line + 1)
        return page("note.html", note=found["note"], note_id=note_id, q=q, chunk=hit_chunk,
                    body=render_note(found["fulltext"], links, span, str(found["note"].get("title", ""))),
                    backlinks=backlinks, outgoing=outgoing)

    @router.get("/static/{name}")
    def static(name: str) -> Response:
        if name not in STATIC:
            return Response("not found", status_code=404, media_type="text/plain")
        data = resources.files("mindnet.web").joinpath("static", name).read_bytes()
        return Response(data, media_type=STATIC[name], headers={"X-Content-Type-Options": "nosniff",
                                                                 "Cache-Control": "no-cache"})

    return router
