"""One view model per report section: what the templates show, formatted, from a Report.

`common` holds what every section reads (the basis: variants side by side, float, findings, names) and how
a change against float is drawn; `story`, `quality`, `recommendation`, `layers`, `structure` and `appendix`
serve the report's sections in the order a reader meets them; `markdown` holds the Markdown summary's own
choices. reporter.render.view.ReportView composes them. Views format; templates lay out; what a number
means is reporter.core.judgement's.
"""
