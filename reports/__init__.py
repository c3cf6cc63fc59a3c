"""The report: typed results in (records/report_data.py), HTML pages, charts and exports out. frames.py turns them
into DataFrames, figures.py into plotly figures, html.py assembles the pages from its templates (render.py,
templates/), diagram.py draws a node, build.py writes the folder or an export. It never measures, never traces."""
