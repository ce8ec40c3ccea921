"""Checks that a rendered report tells its story first, shared by the end-to-end tests of the demo
models, the binary-sigmoid and regression fixtures and the 100+-layer model."""

import io
import re

from reporter.render import formats as render
from reporter.model.report import Report

MD_WORD_BUDGET = 400  # summary.md outside its <details> fold: what a reviewer reads in a minute


def words(text: str) -> str:
    return " ".join(text.split())


def md_as_text(md: str) -> str:
    """The Markdown as GitHub shows it, tags stripped and entities decoded."""
    import html

    from markdown_it import MarkdownIt

    rendered = MarkdownIt("commonmark", {"html": True}).enable("table").render(md)
    return words(html.unescape(re.sub(r"<[^>]+>", " ", rendered)))


def check_story(report: Report) -> dict:
    """Renders every format and checks the story-first layout; returns the texts for further checks."""
    from pypdf import PdfReader

    found = report.findings
    assert found is not None and found.headline
    html = render.render_html(report).decode()
    # The first section is the panel: the variants' table, then the headline sentences.
    first_section = re.search(r'<section id="([a-z-]+)"', html).group(1)
    assert first_section == "story"
    story = html[html.index('<section id="story"'):html.index("</section>")]
    plain = words(re.sub(r"<[^>]+>", " ", story.replace("<wbr>", "")))
    import html as html_lib

    plain = html_lib.unescape(plain)
    for sentence in found.headline:
        assert words(sentence) in plain, sentence
    for f in found.variants:
        if f.ok and f.name != "rule" and f.accuracy is not None:
            assert f"{f.accuracy * 100:.1f} %" in plain, f.name
    # Page 1 of the PDF holds the panel and the verdict.
    pdf = PdfReader(io.BytesIO(render.render_pdf(report, html.encode())))
    page1 = words(pdf.pages[0].extract_text())
    assert "Against float" in page1 or "Output against float" in page1
    for sentence in found.headline:
        assert words(sentence)[:50] in page1, sentence
    # The Markdown: short, no HTML entities, the story in it.
    md = render.render_md(report).decode()
    assert len(re.sub(r"<details>.*?</details>", "", md, flags=re.S).split()) <= MD_WORD_BUDGET
    assert not re.search(r"&[a-z]+;|&#\d+;", md)
    shown = md_as_text(md)
    for sentence in found.headline:
        assert words(sentence) in shown, sentence
    if found.task == "regression":  # no accuracy, so no sentence about a gap or being as accurate
        for text in (plain, shown):
            assert "as accurate" not in text and "of the gap" not in text and "accuracy points" not in text
    return {"html": html, "pdf_page1": page1, "md": md, "pdf_pages": len(pdf.pages),
            "pdf": words(" ".join(page.extract_text() for page in pdf.pages))}
