"""A run's report as a page beside its Markdown (`report.html`, issue 57): the same text rendered with
markdown-it (the parser rich already brings), raw HTML in it escaped (a model's answer stays text), titled by
campaign and run, its figures the files beside it; the evidence page links it. `write_run_report` writes
both, so every place that writes a run's report writes the two alike."""

from __future__ import annotations

from html import escape
from pathlib import Path

from ..store.run_dir import RunDir
from .run_report import run_report

STYLE = """
body { font: 15px/1.45 system-ui, sans-serif; max-width: 1200px; margin: 2em auto; padding: 0 1em; }
table { border-collapse: collapse; display: block; overflow-x: auto; font-size: 13px; }
th, td { border: 1px solid #ccc; padding: 3px 6px; text-align: left; vertical-align: top; }
code, pre { font-size: 13px; } pre { overflow-x: auto; } img { max-width: 100%; }
"""


def run_page(markdown: str, title: str) -> str:
    """The report's Markdown as one self-contained page (no script, nothing fetched)."""
    from markdown_it import MarkdownIt

    body = MarkdownIt("commonmark", {"html": False}).enable("table").render(markdown)
    return (
        f'<!doctype html>\n<html lang="en"><head><meta charset="utf-8"><title>{escape(title)}</title>'
        f"<style>{STYLE}</style></head>\n<body>\n{body}</body></html>\n"
    )


def write_run_report(run: RunDir, price_per_gpu_hour: float | None = None) -> Path:
    """Write the run's `report.md` and `report.html` from its files; the Markdown's path."""
    text = run_report(run, price_per_gpu_hour)
    markdown = run.path / "report.md"
    markdown.write_text(text)
    campaign = run.manifest().campaign or "ad hoc"
    (run.path / "report.html").write_text(run_page(text, f"{campaign}: {run.run_id}"))
    return markdown
